"""The daemon in process, one row per step and transition, on a fake API server and a fake clock.

Each row sets the scene (sentinel, lock, Node annotations, clock), runs ONE pass of the real
:class:`~pykured.agent.daemon.Daemon` with the real lock, book, drainer, taint and Event recorder over
:class:`tests.fakes.FakeKube`, and checks the decision taken and what it wrote. The real API server and real
agents are exercised by tests/test_daemon.py; these rows reach the paths that are slow or hard to provoke
there (GIVE_UP, CLEANUP, RETRY_REBOOT, a failed drain) without a wall clock.
"""

from __future__ import annotations

import dataclasses
import datetime
import threading
import time
from collections.abc import Callable

import pytest

from pykured.agent.daemon import LOCK_WAIT_SLACK, Daemon, Senses, Settings
from pykured.alertmanager.silence import SilenceKeeper
from pykured.blockers.quarantine import QuarantineBlocker
from pykured.core import errors
from pykured.core.model import Reason
from pykured.cycle import state
from pykured.cycle.book import NodeBook
from pykured.cycle.decide import CyclePolicy, Escalation, Step
from pykured.cycle.observers import CycleObserver, CycleObservers
from pykured.cycle.state import NodeState
from pykured.cycle.steps import Behaviour, Hands
from pykured.cyclemetrics import CycleMetrics
from pykured.drain import Drainer, DrainResult
from pykured.gocompat.goflags import Duration
from pykured.kube.events import EventRecorder
from pykured.lock.annotation import AnnotationLock
from pykured.lock.record import LockEntry, encode_entry
from pykured.metrics import Metrics
from pykured.policy.quarantine import MAX_PODS, QUARANTINED_ANNOTATION, QuarantineRecord
from pykured.policy.weekly import TimeWindow
from pykured.requests.record import REQUEST_ANNOTATION
from pykured.roll import record as rollrecord
from pykured.status import agent as agentstatus
from pykured.taint import WaitingTaint
from pykured_dev.eventually import eventually
from tests.fakes import FakeClock, FakeKube, RecordingNotifier, RecordingRebooter

NODE = "n1"
NS = "kube-system"
DS = "kured"
LOCK = "weave.works/kured-node-lock"
TAINT = "weave.works/kured-node-reboot"
T0 = datetime.datetime(2026, 6, 30, 12, 0, tzinfo=datetime.UTC)
MIN = datetime.timedelta(minutes=1)
PERIOD = 3600.0


class Sentinel:
    def __init__(self) -> None:
        self.present = True

    def required(self) -> bool:
        return self.present

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass


class Blocker:
    def __init__(self) -> None:
        self.reason: Reason | None = None

    def check(self, *, now: datetime.datetime) -> Reason | None:
        return self.reason


class Lock(AnnotationLock):
    """kured's annotation lock on the fake API; waiting for a change returns at once (or blocks, if told);
    polled (as under kured's RBAC) unless told it is watched."""

    waits = 0
    timeouts: tuple[float, ...] = ()
    block: threading.Event | None = None
    watched_as = False

    @property
    def watched(self) -> bool:
        return self.watched_as

    def wait_for_change(self, timeout: float) -> None:
        self.waits += 1
        self.timeouts = (*self.timeouts, timeout)
        if self.block is not None:
            self.block.wait(timeout)


@dataclasses.dataclass
class Rig:
    kube: FakeKube
    clock: FakeClock
    sentinel: Sentinel
    rebooter: RecordingRebooter
    notifier: RecordingNotifier
    blocker: Blocker
    metrics: Metrics
    lock: Lock
    daemon: Daemon

    # -- the scene -----------------------------------------------------------------------------------------

    def hold(self, node: str = NODE, *, unschedulable: bool = False) -> None:
        """``node`` holds the lock (written as kured writes it)."""
        entry = LockEntry(node_id=node, unschedulable=unschedulable, created_ns=int(T0.timestamp()) * 10**9)
        ds = self.kube.daemonsets[(NS, DS)]
        ds["metadata"]["annotations"] = {LOCK: encode_entry(entry)}

    def remember(self, **changes: object) -> None:
        """Write the cycle's memory on the Node."""
        patch = state.state_patch(**changes)  # type: ignore[arg-type]
        self.kube.patch_node(NODE, {"metadata": {"annotations": patch}})

    def cordon(self) -> None:
        self.kube.patch_node(NODE, {"spec": {"unschedulable": True}})

    def taint(self) -> None:
        self.kube.nodes[NODE]["spec"]["taints"] = [{"key": TAINT, "effect": "PreferNoSchedule"}]

    # -- what happened -------------------------------------------------------------------------------------

    def step(self) -> Step:
        assert self.daemon.last_action is not None
        return self.daemon.last_action.step

    def holders(self) -> list[str]:
        return [e.node_id for e in self.lock.holders(now_ns=int(self.clock.now.timestamp()) * 10**9)]

    def memory(self) -> dict[str, str]:
        """The cycle's memory on the Node (the agent's published status and roll record are not memory)."""
        annotations = self.kube.annotations(NODE).items()
        return {
            k: v
            for k, v in annotations
            if k.startswith(state.PYKURED_PREFIX)
            and k not in (agentstatus.STATUS_ANNOTATION, rollrecord.ROLL_ANNOTATION)
        }

    def sample(self, name: str, **labels: str) -> float:
        return self.metrics.registry.get_sample_value(name, labels) or 0.0


def make_rig(
    *,
    policy: CyclePolicy | None = None,
    behaviour: Behaviour | None = None,
    rebooter: RecordingRebooter | None = None,
) -> Rig:
    kube = FakeKube()
    kube.add_node(NODE)
    kube.add_node("other")
    kube.add_daemonset(NS, DS)
    clock = FakeClock(T0)
    lock = Lock(
        kube,
        namespace=NS, ds_name=DS, annotation=LOCK, node_id=NODE, concurrency=1, ttl=Duration(0),
        liveness_interval=None, sleep=lambda _s: None,
    )  # fmt: skip
    sentinel, notifier, blocker = Sentinel(), RecordingNotifier(), Blocker()
    rebooter = rebooter or RecordingRebooter()
    metrics = Metrics(process_collectors=False)
    hands = Hands(
        book=NodeBook(kube, node=NODE),
        drainer=Drainer(kube, node=NODE, poll_interval=0.0),
        lock=lock,
        rebooter=rebooter,
        notifier=notifier,
        events=EventRecorder(kube, node=NODE),
        observers=CycleObservers([CycleMetrics(metrics), WaitingTaint(kube, node=NODE, key=TAINT)]),
    )
    senses = Senses(
        kube=kube,
        sentinel=sentinel,
        window=TimeWindow.parse(["su", "mo", "tu", "we", "th", "fr", "sa"], "0:00", "23:59:59", "UTC"),
        blockers=[blocker],
        metrics=metrics,
    )
    settings = Settings(
        node=NODE,
        period=PERIOD,
        behaviour=behaviour or Behaviour(),
        policy=policy or CyclePolicy(taint=True, reboot_retry_delay=10 * MIN, sentinel_loop_backoff=60 * MIN),
    )
    daemon = Daemon(hands, senses, settings=settings, clock=clock)
    return Rig(kube, clock, sentinel, rebooter, notifier, blocker, metrics, lock, daemon)


@pytest.fixture
def rig() -> Rig:
    return make_rig()


def rebooting(rig: Rig, *, attempts: int = 1, ago: datetime.timedelta = MIN) -> None:
    """Holding the lock, cordoned by us, reboot triggered ``ago`` and the bootID not changed yet."""
    rig.hold()
    rig.cordon()
    rig.remember(
        unschedulable_before=False,
        reboot_boot_id="boot-1",
        reboot_triggered_at=T0 - ago,
        reboot_attempts=attempts,
    )


def rebooted(rig: Rig) -> None:
    rebooting(rig)
    rig.kube.reboot(NODE, "boot-2")


# -- one row per step and transition -------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Row:
    name: str
    given: Callable[[Rig], object]
    step: Step
    then: Callable[[Rig, float], None]


def _nothing(rig: Rig) -> None:
    pass


def _not_required(rig: Rig) -> None:
    rig.sentinel.present = False


def then_waits_a_period(rig: Rig, pause: float) -> None:
    assert pause == PERIOD
    assert rig.memory() == {} and rig.holders() == [] and rig.kube.event_reasons() == []


def then_untainted(rig: Rig, pause: float) -> None:
    assert rig.kube.nodes[NODE]["spec"].get("taints") == []


def then_blocked(rig: Rig, pause: float) -> None:
    assert pause == PERIOD and rig.holders() == []
    assert rig.kube.event_reasons() == ["RebootBlocked"]
    assert rig.sample("pykured_blocked", reason="prometheus") == 1


def then_acquired(rig: Rig, pause: float) -> None:
    assert rig.holders() == [NODE]
    assert rig.memory() == {state.UNSCHEDULABLE_BEFORE_ANNOTATION: "false"}
    assert rig.kube.event_reasons() == ["LockAcquired"]


def then_waits_for_the_lock(rig: Rig, pause: float) -> None:
    assert rig.holders() == ["other"] and rig.memory() == {}
    assert rig.kube.nodes[NODE]["spec"]["taints"][0]["key"] == TAINT
    assert rig.sample("pykured_blocked", reason="lock") == 1
    assert pause == 60.0 + LOCK_WAIT_SLACK  # the wait's end (60 s) wakes the loop first
    rig.daemon._lock_waiter.join(1)  # type: ignore[union-attr]
    assert rig.lock.waits == 1 and rig.lock.timeouts == (60.0,)


def then_rebooted_once(rig: Rig, pause: float) -> None:
    assert rig.rebooter.calls == 1 and rig.kube.cordoned(NODE)
    memory = rig.memory()
    assert memory[state.REBOOT_BOOT_ID_ANNOTATION] == "boot-1"
    assert memory[state.REBOOT_ATTEMPTS_ANNOTATION] == "1"
    assert memory[state.UNSCHEDULABLE_BEFORE_ANNOTATION] == "false"
    assert rig.notifier.kinds == ["drain", "reboot"]
    assert rig.kube.event_reasons() == ["Draining", "Rebooting"]
    assert rig.sample("pykured_reboots_total", outcome="triggered") == 1


def then_waits_for_the_reboot(rig: Rig, pause: float) -> None:
    assert rig.rebooter.calls == 0 and pause == pytest.approx(9 * 60)


def then_retried(rig: Rig, pause: float) -> None:
    assert rig.rebooter.calls == 1
    assert rig.memory()[state.REBOOT_ATTEMPTS_ANNOTATION] == "2"
    assert rig.kube.event_reasons() == ["RebootRetry", "Rebooting"]


def then_gave_up(rig: Rig, pause: float) -> None:
    assert rig.rebooter.calls == 0 and rig.holders() == [] and not rig.kube.cordoned(NODE)
    assert rig.memory() == {
        state.BACKOFF_UNTIL_ANNOTATION: "2026-06-30T13:00:00Z",
        state.BACKOFF_REASON_ANNOTATION: "no-reboot",
    }
    assert rig.kube.event_reasons() == ["RebootLoopBackoff"]
    assert rig.sample("pykured_reboots_total", outcome="failed") == 1


def then_finished_the_reboot(rig: Rig, pause: float) -> None:
    assert not rig.kube.cordoned(NODE) and rig.holders() == [NODE]
    assert rig.memory()[state.RELEASE_AFTER_ANNOTATION] == "2026-06-30T12:00:00Z"
    assert rig.notifier.kinds == ["uncordon"]
    assert rig.kube.event_reasons() == ["Uncordoned"]
    assert rig.sample("pykured_reboots_total", outcome="completed") == 1


def _release_due(rig: Rig) -> None:
    rebooted(rig)
    rig.kube.patch_node(NODE, {"spec": {"unschedulable": None}})
    rig.remember(release_after=T0)


def holders_gauge(rig: Rig) -> float | None:
    """``pykured_lock_holders`` of the rig's backend; ``None`` when the series is absent."""
    return rig.metrics.registry.get_sample_value(
        "pykured_lock_holders", {"backend": rig.daemon.hands.lock.backend}
    )


def then_released(rig: Rig, pause: float) -> None:
    assert rig.holders() == [] and rig.memory() == {}
    # the holders as the lock is after the release (the gauge was absent: this agent never tried for it)
    assert holders_gauge(rig) == 0


def then_released_and_backs_off(rig: Rig, pause: float) -> None:
    assert rig.holders() == []
    assert holders_gauge(rig) == 0
    assert rig.memory() == {
        state.BACKOFF_UNTIL_ANNOTATION: "2026-06-30T13:00:00Z",
        state.BACKOFF_REASON_ANNOTATION: "sentinel",
    }
    assert rig.kube.event_reasons() == ["LockReleased", "RebootLoopBackoff"]


def then_aborted(rig: Rig, pause: float) -> None:
    assert rig.holders() == [] and rig.memory() == {} and not rig.kube.cordoned(NODE)
    assert rig.rebooter.calls == 0


def then_admin_cordon_kept(rig: Rig, pause: float) -> None:
    assert rig.holders() == [] and rig.memory() == {} and rig.kube.cordoned(NODE)


def then_cleaned_up(rig: Rig, pause: float) -> None:
    assert rig.memory() == {} and not rig.kube.cordoned(NODE) and rig.notifier.kinds == []


def then_cleaned_up_after_the_reboot(rig: Rig, pause: float) -> None:
    assert rig.memory() == {} and not rig.kube.cordoned(NODE)
    assert rig.notifier.kinds == ["uncordon"] and rig.kube.event_reasons() == ["Uncordoned"]


def then_hands_off(rig: Rig, pause: float) -> None:
    # the scene's mark, then only the agent's published status: nothing of the cycle is touched
    assert rig.kube.requests.count(("PATCH", f"/api/v1/nodes/{NODE}")) == 2
    assert set(rig.memory()) == {state.FLEETLOCK_ID_ANNOTATION} and not rig.kube.cordoned(NODE)
    assert rig.holders() == [] and pause == PERIOD


def _lost_lock_mid_drain(rig: Rig) -> None:
    rig.cordon()
    rig.remember(unschedulable_before=False)


def _lost_lock_after_reboot(rig: Rig) -> None:
    rebooted(rig)
    rig.kube.daemonsets[(NS, DS)]["metadata"]["annotations"] = {}


def _admin_cordon_lost_lock(rig: Rig) -> None:
    rig.cordon()
    rig.remember(unschedulable_before=True)


def _aborting_admin_cordon(rig: Rig) -> None:
    rig.sentinel.present = False
    rig.hold(unschedulable=True)
    rig.cordon()
    rig.remember(unschedulable_before=True)


def both(*scenes: Callable[[Rig], object]) -> Callable[[Rig], None]:
    def given(rig: Rig) -> None:
        for scene in scenes:
            scene(rig)

    return given


def _holding(rig: Rig) -> None:
    rig.hold()
    rig.remember(unschedulable_before=False)


def _holding_cordoned(rig: Rig) -> None:
    _holding(rig)
    rig.cordon()


ROWS = [
    Row("idle, reboot not required: wait a period", _not_required, Step.WAIT, then_waits_a_period),
    Row(
        "idle, leftover taint: remove it",
        both(_not_required, Rig.taint),
        Step.SYNC_TAINT,
        then_untainted,
    ),
    Row(
        "idle, required, blocked",
        lambda r: setattr(r.blocker, "reason", Reason("prometheus", "1 active alerts: [Down]")),
        Step.BLOCKED,
        then_blocked,
    ),
    Row("idle, required: acquire the lock", _nothing, Step.ACQUIRE, then_acquired),
    Row(
        "idle, lock held by another: taint and wait",
        lambda r: r.hold("other"),
        Step.ACQUIRE,
        then_waits_for_the_lock,
    ),
    Row(
        "holding: drain and reboot",
        _holding,
        Step.DRAIN_AND_REBOOT,
        then_rebooted_once,
    ),
    Row(
        "holding, memory not yet written (restart): record, drain, reboot",
        lambda r: r.hold(),
        Step.DRAIN_AND_REBOOT,
        then_rebooted_once,
    ),
    Row(
        "rebooting, bootID unchanged: wait for the retry delay",
        rebooting,
        Step.WAIT,
        then_waits_for_the_reboot,
    ),
    Row(
        "rebooting, retry delay passed: retry once",
        lambda r: rebooting(r, ago=11 * MIN),
        Step.RETRY_REBOOT,
        then_retried,
    ),
    Row(
        "rebooting, retried already: give up",
        lambda r: rebooting(r, attempts=2, ago=11 * MIN),
        Step.GIVE_UP,
        then_gave_up,
    ),
    Row(
        "rebooted: uncordon and set the release time",
        both(rebooted, _not_required),
        Step.POST_REBOOT,
        then_finished_the_reboot,
    ),
    Row(
        "release time passed: release and forget",
        both(_release_due, _not_required),
        Step.RELEASE,
        then_released,
    ),
    Row(
        "release time passed, sentinel back: release and back off",
        _release_due,
        Step.RELEASE,
        then_released_and_backs_off,
    ),
    Row(
        "holding, sentinel gone: abort",
        both(_not_required, _holding_cordoned),
        Step.ABORT,
        then_aborted,
    ),
    Row(
        "holding, sentinel gone, admin's cordon: abort, keep it",
        _aborting_admin_cordon,
        Step.ABORT,
        then_admin_cordon_kept,
    ),
    Row("lock lost mid-drain: uncordon, forget", _lost_lock_mid_drain, Step.CLEANUP, then_cleaned_up),
    Row(
        "lock lost after the reboot: finish it, forget",
        _lost_lock_after_reboot,
        Step.CLEANUP,
        then_cleaned_up_after_the_reboot,
    ),
    Row(
        "lock lost, admin's cordon: forget only",
        _admin_cordon_lost_lock,
        Step.CLEANUP,
        then_admin_cordon_kept,
    ),
    Row(
        "FleetLock runs the cycle: hands off",
        lambda r: r.remember(fleetlock_id="zid"),
        Step.WAIT,
        then_hands_off,
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_one_pass(rig: Rig, row: Row) -> None:
    row.given(rig)
    rig.kube.events.clear()
    pause = rig.daemon.run_once()
    assert rig.step() is row.step, rig.daemon.last_action
    row.then(rig, pause)


# -- transitions that need more than one pass or another configuration ---------------------------------------


def test_a_failed_drain_releases_uncordons_and_retries_after_a_period(rig: Rig) -> None:
    rig.hold()
    rig.remember(unschedulable_before=False)
    rig.kube.fail_next(
        lambda m, p, body: errors.KubeError("boom") if m == "PATCH" and "spec" in body else None
    )
    assert rig.daemon.run_once() == PERIOD
    assert rig.step() is Step.DRAIN_AND_REBOOT
    assert rig.rebooter.calls == 0 and rig.holders() == [] and rig.memory() == {}
    assert rig.kube.event_reasons() == ["Draining", "DrainFailed"]
    rig.daemon.run_once()
    assert rig.daemon.last_action is not None
    assert (rig.step(), rig.daemon.last_action.until) == (Step.WAIT, T0 + datetime.timedelta(seconds=PERIOD))


def test_force_reboot_reboots_after_a_failed_drain() -> None:
    rig = make_rig(policy=CyclePolicy(force_reboot=True))
    rig.hold()
    rig.kube.fail_next(
        lambda m, p, body: errors.KubeError("boom") if m == "PATCH" and "spec" in body else None
    )
    rig.daemon.run_once()
    assert rig.rebooter.calls == 1 and rig.holders() == [NODE]


class StuckDrainer(Drainer):
    """A drain (and each ``delete`` escalation step) that times out with ``pods`` still on the node, or
    completes once ``empties_after`` steps have run; ``calls`` names the steps run."""

    def __init__(self, kube: FakeKube, *, pods: tuple[str, ...], empties_after: int = 99) -> None:
        super().__init__(kube, node=NODE, poll_interval=0.0)
        self.pods = pods
        self.empties_after = empties_after
        self.calls: list[str] = []

    def _step(self, name: str) -> DrainResult:
        self.calls.append(name)
        if len(self.calls) > self.empties_after:
            return DrainResult(NODE, (), (), "", name == "drain", 0.0)
        raise errors.DrainTimeout("global timeout reached: 2s", pods=self.pods)

    def drain(self) -> DrainResult:
        return self._step("drain")

    def delete_remaining(self) -> DrainResult:
        return self._step("delete")


class StreakRecorder(CycleObserver):
    """``--max-failed-drains``' counter, recorded: each drain's end as the cycle tells it."""

    def __init__(self) -> None:
        self.ends: list[tuple[str, str | None]] = []

    def drained(self, node: str, failure: str | None) -> None:
        self.ends.append((node, failure))


def escalating_rig(
    escalation: tuple[Escalation, ...], *, empties_after: int = 99, pods: tuple[str, ...] = ("ns/guarded",)
) -> tuple[Rig, StuckDrainer, StreakRecorder]:
    rig = make_rig(policy=CyclePolicy(escalation=escalation))
    drainer = StuckDrainer(rig.kube, pods=pods, empties_after=empties_after)
    streak = StreakRecorder()
    rig.daemon.hands.drainer = drainer
    rig.daemon.hands.observers.append(streak)
    rig.hold()
    rig.remember(unschedulable_before=False)
    rig.cordon()
    return rig, drainer, streak


def test_escalation_quarantine_leaves_the_node_cordoned_releases_and_marks_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pods = tuple(f"ns/pod-{i:03d}" for i in range(500))
    rig, drainer, streak = escalating_rig((Escalation.QUARANTINE,), pods=pods)
    with caplog.at_level("INFO"):
        assert rig.daemon.run_once() == PERIOD
    assert drainer.calls == ["drain"] and rig.rebooter.calls == 0
    assert rig.holders() == [] and rig.kube.nodes[NODE]["spec"]["unschedulable"] is True
    memory = rig.memory()
    assert list(memory) == [QUARANTINED_ANNOTATION]  # the cycle's memory is gone, the quarantine stays
    record = QuarantineRecord.from_json(memory[QUARANTINED_ANNOTATION])
    assert record.cordoned and record.at == T0 and record.pods == pods[:MAX_PODS] and record.more == 480
    assert "--drain-escalation=quarantine" in record.reason and not record.unreadable
    assert rig.kube.event_reasons() == ["Draining", "Quarantined", "LockReleased"]
    assert rig.sample("pykured_quarantined", node=NODE) == 1.0
    assert streak.ends == [(NODE, "global timeout reached: 2s")]  # counted toward --max-failed-drains
    lines = [r.getMessage() for r in caplog.records if "Drain escalation" in r.getMessage()]
    assert len(lines) == 1 and "500 pods would not leave: ns/pod-000, " in lines[0], lines
    assert lines[0].endswith("ns/pod-009 and 490 more") and len(lines[0]) < 1000


def test_escalation_delete_then_the_node_empties_and_reboots() -> None:
    rig, drainer, streak = escalating_rig((Escalation.DELETE, Escalation.QUARANTINE), empties_after=1)
    rig.daemon.run_once()
    assert drainer.calls == ["drain", "delete"] and rig.rebooter.calls == 1 and rig.holders() == [NODE]
    assert rig.kube.event_reasons() == ["Draining", "DrainEscalated", "Rebooting"]
    assert QUARANTINED_ANNOTATION not in rig.memory()
    assert streak.ends == [(NODE, None)]  # the drain completed (by deleting): not a failed drain


def test_escalation_delete_then_quarantine_when_the_node_still_does_not_empty() -> None:
    rig, drainer, _ = escalating_rig((Escalation.DELETE, Escalation.QUARANTINE))
    rig.daemon.run_once()
    assert drainer.calls == ["drain", "delete"] and rig.rebooter.calls == 0 and rig.holders() == []
    assert QUARANTINED_ANNOTATION in rig.memory()
    assert rig.kube.event_reasons() == ["Draining", "DrainEscalated", "Quarantined", "LockReleased"]


def test_escalation_delete_then_force_reboots_anyway(caplog: pytest.LogCaptureFixture) -> None:
    rig, drainer, _ = escalating_rig((Escalation.DELETE, Escalation.FORCE))
    with caplog.at_level("INFO"):
        rig.daemon.run_once()
    assert drainer.calls == ["drain", "delete"] and rig.rebooter.calls == 1 and rig.holders() == [NODE]
    assert rig.kube.event_reasons() == ["Draining", "DrainEscalated", "DrainEscalated", "Rebooting"]
    lines = [r.getMessage() for r in caplog.records if "Drain escalation (force)" in r.getMessage()]
    assert lines == [
        f"Drain escalation (force) on node {NODE}: the drain did not finish in time; rebooting anyway over "
        "1 pods still there: ns/guarded"
    ]


def test_escalation_delete_alone_ends_as_a_failed_drain() -> None:
    rig, drainer, _ = escalating_rig((Escalation.DELETE,))
    rig.daemon.run_once()
    assert drainer.calls == ["drain", "delete"] and rig.rebooter.calls == 0 and rig.holders() == []
    assert rig.kube.event_reasons() == ["Draining", "DrainEscalated", "DrainFailed"]
    assert rig.kube.nodes[NODE]["spec"].get("unschedulable") in (None, False)  # kured's path: uncordoned


def test_only_a_timeout_escalates() -> None:
    """A drain that fails for another reason (here: the cordon) takes kured's path, not the quarantine."""
    rig = make_rig(policy=CyclePolicy(escalation=(Escalation.QUARANTINE,)))
    rig.hold()
    rig.kube.fail_next(
        lambda m, p, body: errors.KubeError("boom") if m == "PATCH" and "spec" in body else None
    )
    rig.daemon.run_once()
    assert rig.rebooter.calls == 0 and rig.holders() == [] and QUARANTINED_ANNOTATION not in rig.memory()
    assert "Quarantined" not in rig.kube.event_reasons() and "DrainFailed" in rig.kube.event_reasons()


def test_a_quarantined_node_is_blocked_and_its_metric_follows_the_record() -> None:
    rig = make_rig()
    rig.daemon.senses = dataclasses.replace(rig.daemon.senses, blockers=[QuarantineBlocker(rig.kube, NODE)])
    record = QuarantineRecord.make(reason="drain timed out", at=T0, pods=["ns/a"], cordoned=True)
    rig.kube.patch_node(NODE, {"metadata": {"annotations": {QUARANTINED_ANNOTATION: record.to_json()}}})
    rig.daemon.run_once()
    assert rig.step() is Step.BLOCKED and rig.holders() == []
    assert rig.sample("pykured_quarantined", node=NODE) == 1.0
    assert rig.sample("pykured_blocked", reason="quarantined") == 1.0
    rig.kube.patch_node(NODE, {"metadata": {"annotations": {QUARANTINED_ANNOTATION: None}}})
    rig.daemon.run_once()
    assert rig.step() is Step.ACQUIRE and rig.holders() == [NODE]
    assert rig.sample("pykured_quarantined", node=NODE) == 0.0


def test_a_failed_reboot_is_logged_counted_and_retried_later(rig: Rig) -> None:
    rig = make_rig(rebooter=RecordingRebooter(fail=True))
    rig.hold()
    rig.daemon.run_once()
    assert rig.kube.event_reasons()[-1] == "RebootFailed"
    assert rig.sample("pykured_reboots_total", outcome="failed") == 1
    rig.daemon.run_once()
    assert rig.step() is Step.WAIT  # the retry delay decides, as for a reboot that did not happen


def test_annotate_nodes_annotates_first_and_removes_after_the_reboot() -> None:
    rig = make_rig(policy=CyclePolicy(annotate_nodes=True))
    rig.daemon.run_once()
    assert rig.step() is Step.ANNOTATE
    assert rig.kube.annotations(NODE)[state.IN_PROGRESS_ANNOTATION] == "2026-06-30T12:00:00Z"
    rebooted(rig)
    rig.sentinel.present = False
    rig.daemon.run_once()
    assert rig.step() is Step.POST_REBOOT
    assert state.IN_PROGRESS_ANNOTATION not in rig.kube.annotations(NODE)
    assert state.MOST_RECENT_REBOOT_NEEDED_ANNOTATION in rig.kube.annotations(NODE)


def test_a_hand_off_is_counted_and_withdrawn_when_the_node_is_back() -> None:
    rig = make_rig(rebooter=RecordingRebooter(hands_off=True))
    rig.hold()
    rig.daemon.run_once()
    assert rig.sample("pykured_reboots_total", outcome="handoff") == 1
    assert rig.sample("pykured_handoff_state", state="allowed") == 1
    rig.kube.reboot(NODE, "boot-2")
    rig.daemon.run_once()
    assert rig.step() is Step.POST_REBOOT and rig.rebooter.withdrawn == 1
    assert rig.sample("pykured_handoff_state", state="none") == 1


def test_release_delay_is_kept_on_the_node() -> None:
    rig = make_rig(policy=CyclePolicy(release_delay=5 * MIN))
    rebooted(rig)
    rig.daemon.run_once()
    assert rig.memory()[state.RELEASE_AFTER_ANNOTATION] == "2026-06-30T12:05:00Z"
    rig.daemon.run_once()
    assert (rig.step(), rig.holders()) == (Step.WAIT, [NODE])
    rig.clock.advance(5 * MIN)
    rig.daemon.run_once()
    assert (rig.step(), rig.holders()) == (Step.RELEASE, [])


def test_the_delays_are_waits_on_the_stop_event() -> None:
    rig = make_rig(behaviour=Behaviour(drain_delay_s=30.0, reboot_delay_s=30.0))
    rig.hold()
    rig.daemon.stopping.set()
    started = time.monotonic()
    rig.daemon.run_once()
    assert time.monotonic() - started < 30.0  # a delay not waited on the stop event would last all 30 s
    assert not rig.kube.cordoned(NODE)  # stopped before the drain began: nothing cordoned


def test_a_whole_cycle_pass_by_pass(rig: Rig) -> None:
    steps = []
    for _ in range(3):
        rig.daemon.run_once()
        steps.append(rig.step())
    rig.kube.reboot(NODE, "boot-2")
    rig.sentinel.present = False
    for _ in range(3):
        rig.daemon.run_once()
        steps.append(rig.step())
    assert steps == [
        Step.ACQUIRE, Step.DRAIN_AND_REBOOT, Step.WAIT, Step.POST_REBOOT, Step.RELEASE, Step.WAIT,
    ]  # fmt: skip
    assert rig.memory() == {} and rig.holders() == [] and not rig.kube.cordoned(NODE)
    assert rig.notifier.kinds == ["drain", "reboot", "uncordon"]
    assert rig.kube.event_reasons() == ["LockAcquired", "Draining", "Rebooting", "Uncordoned", "LockReleased"]


@dataclasses.dataclass
class SilenceSpy(SilenceKeeper):
    """Stands in for the silence keeper (``pykured.alertmanager.silence``, tested on its own): what the
    cycle had done each time it was asked, and who held the lock then."""

    kube: FakeKube
    holders: Callable[[], list[str]]
    calls: list[tuple[str, list[str], list[str]]] = dataclasses.field(default_factory=list)

    def start(self) -> None:
        self.calls.append(("start", self.kube.event_reasons(), self.holders()))

    def end(self) -> bool:
        self.calls.append(("end", self.kube.event_reasons(), self.holders()))
        return True

    def observed(self, view: NodeState) -> None:
        self.calls.append(("observed", [], []))


def test_the_silence_lasts_from_the_lock_to_the_release(rig: Rig) -> None:
    """``--silence-during-reboot``: made right after the lock is taken (and asked again before the drain, for
    an agent that resumes a cycle), expired before the slot is released (and asked again as the cycle's
    memory is cleared); every pass shows it the Node (a leftover is retried from there)."""
    spy = SilenceSpy(rig.kube, rig.holders)
    rig.daemon.hands.observers.append(spy)
    rig.daemon.run_once()
    rig.daemon.run_once()
    assert [c for c in spy.calls if c[0] != "observed"] == [
        ("start", ["LockAcquired"], [NODE]), ("start", ["LockAcquired"], [NODE]),
    ]  # fmt: skip
    rig.kube.reboot(NODE, "boot-2")
    rig.sentinel.present = False
    for _ in range(3):
        rig.daemon.run_once()
    moments = [c for c in spy.calls if c[0] != "observed"]
    assert [c[0] for c in moments] == ["start", "start", "end", "end"]
    _, events, holders = moments[2]
    assert holders == [NODE] and "LockReleased" not in events  # expired while the slot is still held
    assert moments[3][1][-1] == "LockReleased"  # asked again as the memory goes (nothing left by then)
    assert [c[0] for c in spy.calls].count("observed") == 5  # one per pass
    assert rig.memory() == {} and rig.holders() == []


def test_an_api_error_mid_step_is_retried_on_the_next_pass(rig: Rig) -> None:
    rig.kube.fail_next(lambda m, p, body: errors.KubeError("down") if m == "PATCH" else None)
    assert rig.daemon.run_once() == 5.0  # the lock was taken, the memory not written
    assert rig.holders() == [NODE] and rig.memory() == {}
    rig.daemon.run_once()  # the holder resumes: records what it had not, then drains and reboots
    assert rig.step() is Step.DRAIN_AND_REBOOT and rig.rebooter.calls == 1
    assert rig.memory()[state.UNSCHEDULABLE_BEFORE_ANNOTATION] == "false"


def test_stop_ends_a_lock_wait_at_once(rig: Rig) -> None:
    rig.hold("other")
    rig.lock.block = threading.Event()  # a wait that would last its whole timeout (60 s)
    thread = threading.Thread(target=rig.daemon.run)
    thread.start()
    assert eventually(lambda: rig.lock.waits > 0, timeout=5, every=0.01)
    rig.daemon.stop()
    thread.join(30)
    assert not thread.is_alive()  # a wait the stop did not end would last its whole 60 s
    rig.lock.block.set()


def test_a_watched_lock_is_looked_at_again_only_at_the_period(rig: Rig) -> None:
    """A Lease waiter's wait ends by itself when a slot frees: the loop looks again only at ``--period``
    (kured's cadence); a polled lock (kured's annotation) is looked at every minute."""
    rig.lock.block = threading.Event()
    try:
        assert rig.daemon._wait_for_lock() == 60.0 + LOCK_WAIT_SLACK
        rig.lock.block.set()
        rig.daemon._lock_waiter.join(1)  # type: ignore[union-attr]
        rig.lock.block.clear()
        rig.lock.watched_as = (
            True  # as the Lease lock's, or the annotation lock's where RBAC grants the watch
        )
        assert rig.daemon._wait_for_lock() == PERIOD + LOCK_WAIT_SLACK
        rig.lock.block.set()
        rig.daemon._lock_waiter.join(1)  # type: ignore[union-attr]
        rig.lock.block.clear()
        assert rig.daemon._wait_for_lock(at_most=15.0) == 15.0 + LOCK_WAIT_SLACK  # a turn's grace bounds it
        assert rig.lock.timeouts == (60.0, PERIOD, 15.0)
    finally:
        rig.lock.block.set()


def test_an_idle_agent_reads_its_lock_at_start_up_and_again_only_when_asked_to_reboot(rig: Rig) -> None:
    """kured looks at its lock at start-up and then only once its sentinel is there: an idle pykured pass
    reads it only at start-up (a slot left from before the restart is found there), or when the sentinel, a
    reboot request or a cycle's mark on the Node asks (each of them makes the next pass read it)."""
    lock_reads = "/daemonsets/" + DS

    def reads_after_a_pass() -> int:
        before = rig.kube.calls("GET", lock_reads)
        rig.daemon.run_once()
        return rig.kube.calls("GET", lock_reads) - before

    rig.sentinel.present = False
    assert reads_after_a_pass() == 1  # start-up
    assert [reads_after_a_pass() for _ in range(3)] == [0, 0, 0]
    assert rig.step() is Step.WAIT

    rig.hold()  # a slot written for this node by someone else, while it needs nothing: as kured, not seen...
    assert reads_after_a_pass() == 0
    rig.sentinel.present = True  # ...until it needs a reboot: then it goes on with the slot it holds
    assert reads_after_a_pass() >= 1
    assert rig.step() is Step.DRAIN_AND_REBOOT

    idle = make_rig()
    idle.sentinel.present = False
    idle.daemon.run_once()
    request = {REQUEST_ANNOTATION: "x"}
    idle.kube.patch_node(NODE, {"metadata": {"annotations": request}})  # a request (even garbled) is a look
    before = idle.kube.calls("GET", lock_reads)
    idle.daemon.run_once()
    assert idle.kube.calls("GET", lock_reads) == before + 1
    idle.kube.patch_node(NODE, {"metadata": {"annotations": {REQUEST_ANNOTATION: None}}})
    idle.remember(reboot_boot_id="boot-1")  # a cycle's mark too
    before = idle.kube.calls("GET", lock_reads)
    idle.daemon.run_once()
    assert idle.kube.calls("GET", lock_reads) == before + 1


# -- hostile values and unexpected errors: the loop goes on -------------------------------------------------


@pytest.mark.parametrize(
    ("annotation", "value"),
    [
        (REQUEST_ANNOTATION, "[" * 2000),
        (agentstatus.STATUS_ANNOTATION, "{" * 5000),
        (rollrecord.ROLL_ANNOTATION, '{"a":' * 3000),
        (REQUEST_ANNOTATION, '"\\ud800"'),
        (agentstatus.STATUS_ANNOTATION, "x" * 200_000),
    ],
    ids=["deep-request", "deep-status", "deep-roll", "surrogate-request", "huge-status"],
)
def test_a_hostile_record_on_the_node_neither_crashes_nor_blinds_the_pass(
    annotation: str, value: str, caplog: pytest.LogCaptureFixture
) -> None:
    rig = make_rig()
    rig.kube.patch_node(NODE, {"metadata": {"annotations": {annotation: value}}})
    rig.daemon.run_once()  # the sentinel is there: the pass takes the lock as if the record were absent
    assert rig.step() is Step.ACQUIRE and rig.holders() == [NODE]
    assert rig.daemon.pass_errors == 0
    rig.daemon.run_once()
    assert rig.step() is Step.DRAIN_AND_REBOOT and rig.rebooter.calls == 1
    status = agentstatus.decode(rig.kube.annotations(NODE)[agentstatus.STATUS_ANNOTATION])
    assert status is not None and status.sentinel  # the agent's own status replaced a garbled one
    said = {
        REQUEST_ANNOTATION: "Ignoring and removing the reboot request of node n1: unreadable reboot request",
        agentstatus.STATUS_ANNOTATION: "The status on node n1 cannot be read (unreadable status record: ",
        rollrecord.ROLL_ANNOTATION: "",  # the agent's own roll record replaces it (written with its status)
    }
    assert said[annotation] in caplog.text
    assert rig.kube.annotations(NODE).get(annotation) != value


def test_an_unexpected_error_ends_the_pass_not_the_agent(rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        def check(self, *, now: datetime.datetime) -> Reason | None:
            raise RuntimeError("a bug")

    rig.daemon.senses = dataclasses.replace(rig.daemon.senses, blockers=[Broken()])
    caplog.set_level("ERROR", logger="pykured.agent.daemon")
    pauses = [rig.daemon.run_once() for _ in range(3)]
    assert pauses == [5.0, 10.0, 20.0]  # backed off, doubling
    assert rig.daemon.pass_errors == 3 and rig.sample("pykured_pass_errors_total") == 3
    tracebacks = [r for r in caplog.records if r.exc_info is not None]
    assert len(tracebacks) == 1 and "RuntimeError: a bug" in tracebacks[0].getMessage()
    assert "failed again (3 in a row)" in caplog.records[-1].getMessage()
    rig.daemon.senses = dataclasses.replace(rig.daemon.senses, blockers=[rig.blocker])
    rig.daemon.run_once()
    assert rig.step() is Step.ACQUIRE and rig.holders() == [NODE]
    assert rig.daemon.run_once() == 0 and rig.rebooter.calls == 1
    assert rig.daemon.pass_errors == 3


def test_the_back_off_after_unexpected_errors_is_bounded(rig: Rig) -> None:
    def broken(now: datetime.datetime) -> None:
        raise RecursionError("maximum recursion depth exceeded")

    rig.daemon.observe = broken  # type: ignore[assignment,method-assign]
    pauses = [rig.daemon.run_once() for _ in range(12)]
    assert max(pauses) == 300.0 and pauses[-1] == 300.0
