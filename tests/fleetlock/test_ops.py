"""FleetLock's cycle operations over the shared steps, in process on a fake API server.

The real API server and a Zincati-like client exercise FleetLock in test_cycle_k8s.py; these check that the
operations are the daemon's steps (same writes, same Events, ``--drain-delay`` and ``--reboot-delay``
applied) and that FleetLock's own metrics stay its own.
"""

from __future__ import annotations

import datetime
import threading

from pykured.core.errors import KubeError
from pykured.cycle import state
from pykured.cycle.book import NodeBook
from pykured.cycle.decide import Policy
from pykured.cycle.steps import Behaviour
from pykured.drain import Drainer
from pykured.fleetlock.core import Core
from pykured.fleetlock.ops import NodeOps
from pykured.fleetlock.worker import Worker
from pykured.gocompat.goflags import Duration
from pykured.kube.events import EventRecorder
from pykured.lock.annotation import AnnotationLock
from pykured.metrics import Metrics
from tests.fakes import FakeKube, RecordingNotifier

NODE = "z1"
T0 = datetime.datetime(2026, 6, 30, 12, 0, tzinfo=datetime.UTC)
NS_T0 = int(T0.timestamp()) * 10**9


class RecordingEvent(threading.Event):
    """A cancel event that records the waits made on it (the delays) instead of sleeping."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float | None] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout)
        return self.is_set()


def make_ops(
    policy: Policy | None = None, behaviour: Behaviour | None = None
) -> tuple[NodeOps, FakeKube, Metrics]:
    kube = FakeKube()
    kube.add_node(NODE)
    kube.add_daemonset("kube-system", "kured")
    lock = AnnotationLock(
        kube,  # type: ignore[arg-type]
        namespace="kube-system", ds_name="kured", annotation="weave.works/kured-node-lock", node_id="",
        concurrency=1, ttl=Duration(0), liveness_interval=None, sleep=lambda _s: None,
    )  # fmt: skip
    metrics = Metrics(process_collectors=False)
    ops = NodeOps(
        lock=lock,
        drainer_factory=lambda node, cancel: Drainer(kube, node=node, cancel=cancel),  # type: ignore[arg-type]
        book_factory=lambda node: NodeBook(kube, node=node),  # type: ignore[arg-type]
        notifier=RecordingNotifier(),  # type: ignore[arg-type]
        events_factory=lambda node: EventRecorder(kube, node=node),  # type: ignore[arg-type]
        metrics=metrics,
        policy=policy or Policy(),
        behaviour=behaviour or Behaviour(),
    )
    return ops, kube, metrics


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


def take_slot(ops: NodeOps) -> None:
    ops.mark(NODE, "zid")
    assert ops.lock.acquire(unschedulable=False, now_ns=NS_T0, node_id=NODE).acquired
    ops.steps(NODE).begin(unschedulable_before=False)


def test_the_drain_applies_the_drain_and_reboot_delays() -> None:
    ops, kube, _ = make_ops(behaviour=Behaviour(drain_delay_s=7.0, reboot_delay_s=9.0, pre_labels={"k": "v"}))
    take_slot(ops)
    core = Core(ops=ops, drain_retry_s=300.0, clock=lambda: T0)
    worker = Worker(NODE, cancel=RecordingEvent())
    assert core._drain(NODE, worker) is None
    assert worker.cancel.waits == [7.0, 9.0]  # type: ignore[attr-defined]
    assert kube.cordoned(NODE) and kube.nodes[NODE]["metadata"]["labels"] == {"k": "v"}
    assert kube.event_reasons() == ["Draining"]


def test_a_failed_drain_skips_the_reboot_delay_unless_forced() -> None:
    for force, waits in ((False, []), (True, [9.0])):
        ops, kube, _ = make_ops(policy=Policy(force_reboot=force), behaviour=Behaviour(reboot_delay_s=9.0))
        take_slot(ops)
        kube.fail_next(lambda m, p, body: KubeError("boom") if m == "PATCH" and "spec" in body else None)
        worker = Worker(NODE, cancel=RecordingEvent())
        assert Core(ops=ops, drain_retry_s=300.0)._drain(NODE, worker) is not None
        assert worker.cancel.waits == waits  # type: ignore[attr-defined]


def test_the_grant_is_the_shared_reboot_step_as_a_hand_off() -> None:
    ops, kube, metrics = make_ops(policy=Policy(annotate_nodes=True))
    take_slot(ops)
    ops.grant(NODE, now=T0)
    memory = kube.annotations(NODE)
    assert memory[state.REBOOT_BOOT_ID_ANNOTATION] == "boot-1"
    assert memory[state.REBOOT_TRIGGERED_AT_ANNOTATION] == "2026-06-30T12:00:00Z"
    assert state.REBOOT_ATTEMPTS_ANNOTATION not in memory
    assert memory[state.IN_PROGRESS_ANNOTATION] == "2026-06-30T12:00:00Z"
    assert kube.event_reasons() == ["Rebooting"]
    assert sample(metrics, "pykured_fleetlock_requests_total", api="cycle", kind="granted") == 1
    assert (
        sample(metrics, "pykured_reboots_total", outcome="handoff") == 0
    )  # the daemon's counters stay its own


def test_finish_releases_now_or_after_the_release_delay() -> None:
    for delay, released in ((datetime.timedelta(0), True), (datetime.timedelta(minutes=5), False)):
        ops, kube, _ = make_ops(policy=Policy(annotate_nodes=True, release_delay=delay))
        take_slot(ops)
        ops.grant(NODE, now=T0)
        kube.patch_node(NODE, {"spec": {"unschedulable": True}})
        kube.reboot(NODE, "boot-2")
        entry = ops.lock.holding(now_ns=NS_T0, honour_ttl=False, node_id=NODE)
        assert ops.finish_reboot(NODE, ops.view(NODE, entry), now=T0) is released
        assert not kube.cordoned(NODE)
        memory = kube.annotations(NODE)
        assert state.IN_PROGRESS_ANNOTATION not in memory
        if released:
            assert not [k for k in memory if k.startswith(state.PYKURED_PREFIX)]
            assert kube.event_reasons()[-2:] == ["Uncordoned", "LockReleased"]
        else:
            assert memory[state.RELEASE_AFTER_ANNOTATION] == "2026-06-30T12:05:00Z"
            assert memory[state.FLEETLOCK_ID_ANNOTATION] == "zid"


def test_abandon_keeps_an_administrators_cordon() -> None:
    ops, kube, _ = make_ops()
    kube.patch_node(NODE, {"spec": {"unschedulable": True}})
    ops.mark(NODE, "zid")
    assert ops.lock.acquire(unschedulable=True, now_ns=NS_T0, node_id=NODE).acquired
    ops.steps(NODE).begin(unschedulable_before=True)
    entry = ops.lock.holding(now_ns=NS_T0, honour_ttl=False, node_id=NODE)
    ops.abandon(NODE, ops.view(NODE, entry))
    assert kube.cordoned(NODE)
    assert ops.lock.holding(now_ns=NS_T0, honour_ttl=False, node_id=NODE) is None
    assert not [k for k in kube.annotations(NODE) if k.startswith(state.PYKURED_PREFIX)]
