"""Every policy feature through every driver: the same scenario, the same observable writes.

Each test below runs one scenario through each driver of :mod:`tests.parity.harness` (the daemon with a
sentinel, a reboot request or the Zincati marker; FleetLock central and node-local) against the real API
server, and checks the same things for all of them. :data:`tests.parity.matrix.FEATURES` maps every feature
to these tests (or to the reason a driver cannot have it); ``docs/parity.md`` is generated from it.
"""

from __future__ import annotations

import datetime
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pykured.alertmanager.record import SILENCE_ANNOTATION, record_of
from pykured.config.startup import parse
from pykured.cycle import state
from pykured.cycle.decide import Step
from pykured.fleet import view as fleetview
from pykured.fleet.freeze import freeze
from pykured.fleet.locks import lock_release
from pykured.fleet.quarantine import unquarantine
from pykured.fleet.requester import lock_holders
from pykured.halting.streak import FAILED_DRAINS_ANNOTATION, Streak
from pykured.halting.streak import read as read_streak
from pykured.policy.freeze import FreezeRecord
from pykured.policy.quarantine import quarantine_record
from pykured.status import agent as agentstatus
from pykured_dev.eventually import eventually
from pykured_dev.testenv.alertmanager import Alertmanager, AlertmanagerProxy
from pykured_dev.testenv.prometheus import SEEN_WITHIN, Exporter, Prometheus
from tests.parity.harness import DAEMON_DRIVERS, DRIVERS, Bench, Run, bench
from tests.testenv import TestEnv

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(600)]  # Prometheus waits: SEEN_WITHIN

NOW = datetime.datetime.now(datetime.UTC)
TEMPLATES = [
    "--message-template-drain=parity drain %s",
    "--message-template-reboot=parity reboot %s",
    "--message-template-uncordon=parity uncordon %s",
]


@pytest.fixture
def parity(k8s: TestEnv, tmp_path: Path) -> Iterator[Bench]:
    yield from bench(k8s, tmp_path)


PARITY_RULES = """groups:
  - name: parity
    rules:
      - alert: ParityAlert
        expr: parity_alert == 1
"""


class Alerting:
    """A real Prometheus whose rule ``ParityAlert`` fires while the test says so: the rule is evaluated on a
    metric Prometheus scrapes from a target the test sets."""

    def __init__(self, prom: Prometheus, target: Exporter) -> None:
        self.prom = prom
        self.target = target
        self.url = prom.url

    def fire(self, firing: bool) -> None:
        """Set the metric and wait until Prometheus's ``ALERTS`` has (or no longer has) the alert."""
        self.target.set("parity_alert", 1 if firing else 0)
        alert = 'ALERTS{alertname="ParityAlert",alertstate="firing"}'
        assert eventually(lambda: bool(self.prom.query(alert)) == firing, timeout=SEEN_WITHIN)


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[Alerting]:
    """:class:`Alerting`, its alert firing."""
    rules = tmp_path / "parity.rules.yaml"
    rules.write_text(PARITY_RULES)
    with Exporter() as target, Prometheus(tmp_path / "prometheus", rule_files=[rules]) as prom:
        prom.scrape("parity", target.address)
        alerting = Alerting(prom, target)
        alerting.fire(True)
        yield alerting


def other_weekday() -> str:
    return ["mo", "tu", "we", "th", "fr", "sa", "su"][(NOW.weekday() + 3) % 7]


def done(run: Run) -> None:
    """The cycle ended cleanly: lock free, node schedulable, no cycle memory left."""
    assert run.holders() == []
    assert not run.cordoned()
    assert run.memory() == {}


# -- the whole cycle ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["daemonset", "lease"])
@pytest.mark.parametrize("driver", DRIVERS)
def test_a_whole_cycle(parity: Bench, driver: str, backend: str) -> None:
    """Lock, annotations, labels, cordon, drain, reboot or hand-off, bootID proof, uncordon, release; the
    notifications (kured's templates), Events and metrics of each step."""
    labels = ["--pre-reboot-node-labels=parity=before", "--post-reboot-node-labels=parity=after"]
    run = parity.run(driver, ["--annotate-nodes", *labels, *TEMPLATES], backend=backend)
    boot = run.k8s.boot_id(run.node)
    run.need()
    assert run.drive(), run.replies
    assert run.holders() == [run.node] and run.cordoned()
    assert run.labels().get("parity") == "before"
    notes = run.annotations()
    assert state.IN_PROGRESS_ANNOTATION in notes and state.MOST_RECENT_REBOOT_NEEDED_ANNOTATION in notes
    assert notes[state.REBOOT_BOOT_ID_ANNOTATION] == boot
    assert run.reboots() == 1 and run.metric("pykured_drain_duration_seconds_count") == 1
    for _ in range(3):  # no new bootID, no end of the cycle
        run.step() if run.fleetlock else run.daemon.run_once()
    assert run.holders() == [run.node] and run.cordoned()

    run.reboot()
    run.settle()
    done(run)
    assert run.labels().get("parity") == "after"
    assert state.IN_PROGRESS_ANNOTATION not in run.annotations()
    assert run.metric("pykured_reboots_total", outcome="completed") == 1
    events = run.events()
    for reason in ("LockAcquired", "Draining", "Rebooting", "Uncordoned", "LockReleased"):
        assert reason in events, events
    extra = 1 if driver == "request" else 0  # and "Node … rebooted as requested: …"
    assert eventually(lambda: len(run.receiver.bodies) == 3 + extra), run.receiver.bodies
    for body, what in zip(run.receiver.bodies, ("drain", "reboot", "uncordon"), strict=False):
        assert f"parity {what} {run.node}" in body


# -- what holds a reboot back before the lock --------------------------------------------------------------

HELD = {
    "weekly-window": ([f"--reboot-days={other_weekday()}", "--time-zone=UTC"], "outside_window", False),
    "calendar-window": (
        [f"--maintenance-window=FREQ=YEARLY;BYMONTH={(NOW.month + 5) % 12 + 1};BYMONTHDAY=1;BYHOUR=1;"
         "DURATION=1h"],
        "outside_window", False,
    ),
    "blackout": (
        [f"--blackout={(NOW - datetime.timedelta(hours=1)):%Y-%m-%dT%H:%M}/"
         f"{(NOW + datetime.timedelta(hours=1)):%Y-%m-%dT%H:%M} parity", "--time-zone=UTC"],
        "outside_window", False,
    ),
    "freeze": (["--policy-configmap=kured-policy"], "blocked", True),
    "blocking-pods": (["--blocking-pod-selector=parity=blocker"], "blocked", True),
    "blocking-node": (["--blocking-node-label=parity.example/hold=yes"], "blocked", True),
    "alerts": ([], "blocked", True),
    "alertmanager": ([], "blocked", True),
}  # fmt: skip


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("hold", list(HELD))
def test_held_before_the_lock(parity: Bench, request: pytest.FixtureRequest, driver: str, hold: str) -> None:
    """A closed window, a blackout, the freeze, a blocking pod, a blocking node label or a firing alert (of a
    real Prometheus's rule, or in a real Alertmanager): no lock, no cordon, no reboot (FleetLock: 423 with the
    reason's kind); blockers post ``RebootBlocked``."""
    flags, kind, blocker = HELD[hold]
    if hold == "alerts":
        flags = [f"--prometheus-url={request.getfixturevalue('prometheus').url}"]
    if hold == "alertmanager":
        am: Alertmanager = request.getfixturevalue("alertmanager")
        am.fire("ParityAlert", severity="critical")
        flags = [f"--alertmanager-url={am.url}"]

    def before_start(namespace: str, node: str) -> None:
        if hold == "freeze":
            freeze(parity.k8s.kube(), namespace=namespace, name="kured-policy", reason="parity", until=None,
                   now=NOW)  # fmt: skip
        if hold == "blocking-pods":
            parity.k8s.create_pod(namespace, "blocker", node=node, labels={"parity": "blocker"})
        if hold == "blocking-node":
            parity.k8s.kube().patch_node(node, {"metadata": {"labels": {"parity.example/hold": "yes"}}},
                                         patch_type="application/merge-patch+json")  # fmt: skip

    run = parity.run(driver, flags, before_start=before_start)
    run.need()
    assert not run.drive(passes=3)
    assert run.holders() == [] and not run.cordoned() and run.reboots() == 0
    if run.fleetlock:
        assert run.replies[-1] == (423, kind)
    if blocker:
        assert "RebootBlocked" in run.events()


# -- the drain ---------------------------------------------------------------------------------------------


def guarded_pod(parity: Bench, namespace: str, node: str) -> None:
    """A pod on the node whose PodDisruptionBudget allows no eviction."""
    parity.k8s.create_pod(namespace, "guarded", node=node, labels={"parity": "guarded"})
    parity.k8s.create_pdb(namespace, "guarded", {"parity": "guarded"}, min_available=1)
    parity.k8s.set_pdb_status(namespace, "guarded", disruptions_allowed=0)


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("force", [False, True], ids=["drain-fails", "force-reboot"])
def test_a_drain_that_fails(parity: Bench, driver: str, force: bool) -> None:
    """A drain that times out: release, uncordon, ``DrainFailed``, no reboot (FleetLock: 503); with
    ``--force-reboot`` the reboot goes ahead."""
    flags = ["--drain-timeout=2s", *(["--force-reboot"] if force else [])]
    run = parity.run(driver, flags, before_start=lambda ns, node: guarded_pod(parity, ns, node))
    run.need()
    triggered = run.drive(passes=2)
    assert triggered is force, run.replies
    if force:
        assert run.holders() == [run.node] and run.reboots() == 1
    else:
        assert run.holders() == [] and not run.cordoned() and run.reboots() == 0
        assert "DrainFailed" in run.events()
        if run.fleetlock:
            assert run.replies[-1] == (503, "drain_failed")


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("end", ["timed-out", "escalated"])
def test_a_drain_you_can_watch(parity: Bench, driver: str, end: str) -> None:
    """A drain a PodDisruptionBudget holds until ``--drain-timeout``: while it runs, the node's
    ``pykured.dev/status`` records the pod it waits on, held by the budget named (written by the agent, or by
    the FleetLock server for a node no agent publishes on); one ``DrainSlow`` Event; the metrics; and the
    record is gone when the drain has ended: timed out (``DrainFailed``), or escalated
    (``--drain-escalation=delete``: the pod deleted, the reboot goes ahead)."""
    escalate = ["--drain-escalation=delete"] if end == "escalated" else []
    flags = ["--drain-timeout=10s", *escalate]
    run = parity.run(driver, flags, before_start=lambda ns, node: guarded_pod(parity, ns, node))
    written: list[str | None] = []  # every status the agent (or the FleetLock server) wrote on the Node

    def heard(name: str, obj: dict[str, Any]) -> None:
        if name == run.node:
            written.append((obj["metadata"].get("annotations") or {}).get(agentstatus.STATUS_ANNOTATION))

    run.agent.kube.on_node_written(heard)
    run.need()
    over = run.triggered if escalate else lambda: "DrainFailed" in run.events()

    def stepped() -> bool:
        run.step()
        return over()

    assert eventually(stepped, timeout=120), run.replies
    drains = [s.drain for s in map(agentstatus.decode, written) if s is not None and s.drain is not None]
    assert drains, written
    for drain in drains:
        (held,) = drain.pods
        assert (held.pod, held.reason, held.detail) == (f"{run.namespace}/guarded", "pdb", "guarded"), drain
    after = agentstatus.decode(run.annotations().get(agentstatus.STATUS_ANNOTATION))
    assert after is None or after.drain is None  # cleared when the drain timed out
    assert run.events().count("DrainSlow") == 1
    assert ("DrainEscalated" if escalate else "DrainFailed") in run.events()
    assert run.metric("pykured_drain_slow_total", node=run.node) == 1.0
    assert run.agent.metrics.registry.get_sample_value(
        "pykured_drain_pods_waiting", {"node": run.node, "reason": "pdb"}
    ) is None  # fmt: skip


@pytest.mark.parametrize("driver", DRIVERS)
def test_failed_drains_halt_the_fleet(parity: Bench, driver: str) -> None:
    """``--max-failed-drains=2``: one drain failed elsewhere in the fleet (the count on the policy ConfigMap);
    this node's drain fails too: the fleet is halted, the count taken back to zero; nothing else happens."""

    def before_start(namespace: str, node: str) -> None:
        guarded_pod(parity, namespace, node)
        earlier = {FAILED_DRAINS_ANNOTATION: Streak(1, "node-0: error when evicting pods").to_json()}
        parity.k8s.kube().request("POST", f"/api/v1/namespaces/{namespace}/configmaps", body={
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "kured-policy", "annotations": earlier},
        })  # fmt: skip

    run = parity.run(driver, ["--drain-timeout=2s", "--max-failed-drains=2"], before_start=before_start)
    run.need()
    assert not run.drive(passes=2)
    assert run.holders() == [] and not run.cordoned() and run.reboots() == 0
    policy = run.kube.request("GET", f"/api/v1/namespaces/{run.namespace}/configmaps/kured-policy")
    record = FreezeRecord.from_json(policy["data"]["halt"])  # the halt's own key
    assert record.halted == run.node, record
    assert record.reason.startswith(f"2 consecutive drains failed (last: {run.node}: error when evicting")
    assert read_streak(policy) == Streak()  # the halt took the count back to zero
    assert "RebootHalted" in run.events() and "DrainFailed" in run.events()


@pytest.mark.parametrize("driver", DRIVERS)
def test_drain_escalation_delete(parity: Bench, driver: str) -> None:
    """``--drain-escalation=delete``: the drain times out on a pod whose PodDisruptionBudget allows no
    eviction; the pod is deleted without the eviction API and the reboot goes ahead (FleetLock: 200)."""
    flags = ["--drain-timeout=5s", "--drain-escalation=delete"]  # room for the deleted pod to terminate
    run = parity.run(driver, flags, before_start=lambda ns, node: guarded_pod(parity, ns, node))
    run.need()
    assert run.drive(passes=2), run.replies
    assert run.holders() == [run.node] and run.reboots() == 1
    pods = run.kube.list_pods(field_selector=f"spec.nodeName={run.node}")["items"]
    assert not [
        p for p in pods if p["metadata"]["name"] == "guarded" and not p["metadata"].get("deletionTimestamp")
    ]
    assert "DrainEscalated" in run.events() and "DrainFailed" not in run.events()


@pytest.mark.parametrize("driver", DRIVERS)
def test_drain_escalation_delete_then_force(parity: Bench, driver: str) -> None:
    """``--drain-escalation=delete,force``: a pod a finalizer keeps after its deletion does not leave within
    the second timeout either: the reboot goes ahead anyway (FleetLock: 200), each step said in an Event."""
    hold = {"metadata": {"finalizers": ["parity.example/hold"]}}

    def before_start(namespace: str, node: str) -> None:
        guarded_pod(parity, namespace, node)
        parity.k8s.kube().request("PATCH", f"/api/v1/namespaces/{namespace}/pods/guarded", body=hold,
                                  content_type="application/merge-patch+json")  # fmt: skip

    run = parity.run(
        driver, ["--drain-timeout=2s", "--drain-escalation=delete,force"], before_start=before_start
    )
    try:
        run.need()
        assert run.drive(passes=2), run.replies
        assert run.holders() == [run.node] and run.reboots() == 1
        assert run.events().count("DrainEscalated") == 2 and "DrainFailed" not in run.events()
        pod = run.kube.get_pod(run.namespace, "guarded")
        assert pod["metadata"].get("deletionTimestamp")  # deleted, held by its finalizer: rebooted over it
    finally:
        release = {"metadata": {"finalizers": None}}
        parity.k8s.kube().request("PATCH", f"/api/v1/namespaces/{run.namespace}/pods/guarded", body=release,
                                  content_type="application/merge-patch+json")  # fmt: skip


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("backend", ["daemonset", "lease"])
def test_drain_escalation_quarantine(parity: Bench, driver: str, backend: str) -> None:
    """``--drain-escalation=quarantine``: the node stays cordoned and is not rebooted, the lock is released,
    ``pykured.dev/quarantined`` names the pod, an Event, a notification, ``pykured_quarantined``; the node is
    blocked from the lock (FleetLock: 423) until ``pykured unquarantine``, which uncordons it; then (the PDB
    gone) its reboot goes ahead."""
    flags = ["--drain-timeout=5s", "--drain-escalation=quarantine"]
    run = parity.run(
        driver, flags, backend=backend, before_start=lambda ns, node: guarded_pod(parity, ns, node)
    )
    run.need()
    assert not run.drive(passes=3), run.replies
    assert run.holders() == [] and run.cordoned() and run.reboots() == 0
    record = quarantine_record(run.annotations())
    assert record is not None and record.cordoned and record.pods == (f"{run.namespace}/guarded",)
    assert run.memory() == {}  # the cycle ended: only the quarantine is left
    assert "Quarantined" in run.events() and "DrainFailed" not in run.events()
    assert run.metric("pykured_quarantined", node=run.node) == 1.0
    assert eventually(lambda: any(f"Node {run.node} quarantined" in b for b in run.receiver.bodies))
    if run.fleetlock:
        assert run.replies[-1][0] == 423, run.replies
    else:
        assert run.daemon.last_action is not None and run.daemon.last_action.step is Step.BLOCKED
        assert run.daemon.last_action.blocked is not None
        assert run.daemon.last_action.blocked.kind == "quarantined"
    row = fleetview.node_row(run.state(), now=datetime.datetime.now(datetime.UTC))  # pykured status
    assert row.step == "quarantined" and row.blocked_by == record.describe()
    done = unquarantine(run.kube, run.node)
    assert done.uncordoned and not run.cordoned() and quarantine_record(run.annotations()) is None
    pdb = f"/apis/policy/v1/namespaces/{run.namespace}/poddisruptionbudgets/guarded"
    parity.k8s.kube().request("DELETE", pdb)  # nothing holds the pod any more
    assert run.drive(passes=4), run.replies
    assert run.reboots() == 1 and run.metric("pykured_quarantined", node=run.node) == 0.0


# -- reboot hooks and settle gates -------------------------------------------------------------------------


@pytest.mark.parametrize("driver", DRIVERS)
def test_before_and_after_reboot_hooks(parity: Bench, driver: str) -> None:
    """The before-reboot hook holds the drain until approved; the after-reboot hook holds the release."""
    run = parity.run(driver, ["--before-reboot-annotations=parity.example/ok",
                              "--after-reboot-annotations=parity.example/back"])  # fmt: skip
    run.need()
    assert not run.drive(passes=3)
    assert run.holders() == [run.node] and not run.cordoned()
    assert run.labels().get("pykured.dev/before-reboot") == "true"
    run.kube.patch_node(run.node, {"metadata": {"annotations": {"parity.example/ok": "true"}}})
    assert run.drive()
    run.reboot()
    run.settle(passes=4)
    assert run.holders() == [run.node] and not run.cordoned()
    assert run.labels().get("pykured.dev/after-reboot") == "true"
    assert "HoldingLock" in run.events()
    run.kube.patch_node(run.node, {"metadata": {"annotations": {"parity.example/back": "true"}}})
    run.settle()
    done(run)
    assert "pykured.dev/after-reboot" not in run.labels()


@pytest.mark.parametrize("driver", DRIVERS)
def test_settle_gates_hold_the_release(parity: Bench, prometheus: Alerting, driver: str) -> None:
    """A settle gate (here a query of a real Prometheus) keeps the lock after the reboot until it is empty."""
    run = parity.run(driver, [f"--prometheus-url={prometheus.url}", "--settle-prometheus-query=ALERTS"])
    prometheus.fire(False)
    run.need()
    assert run.drive()
    prometheus.fire(True)
    run.reboot()
    run.settle(passes=4)
    assert run.holders() == [run.node] and not run.cordoned()
    assert "HoldingLock" in run.events()
    prometheus.fire(False)
    run.settle()
    done(run)


# -- Alertmanager: its alerts hold the lock, an operator's silence lets go, a silence while rebooting ------


@pytest.mark.parametrize("driver", DRIVERS)
def test_an_operators_silence_lets_the_node_go(
    parity: Bench, alertmanager: Alertmanager, driver: str
) -> None:
    """An active alert in Alertmanager holds the lock; once an operator silences it, the node reboots."""
    alertmanager.fire("DiskPressure", node="elsewhere")
    run = parity.run(driver, [f"--alertmanager-url={alertmanager.url}"])
    run.need()
    assert not run.drive(passes=2)
    assert run.holders() == [] and run.reboots() == 0 and "RebootBlocked" in run.events()
    if run.fleetlock:
        assert run.replies[-1] == (423, "blocked")
    alertmanager.silence({"alertname": "DiskPressure"})
    assert run.drive(), run.replies
    assert run.holders() == [run.node]


def silences_of(alertmanager: Alertmanager, node: str) -> list[dict[str, Any]]:
    """The active silences whose matchers name ``node``."""
    return [
        s for s in alertmanager.silences(state="active")
        if any(m["value"] == node for m in s["matchers"])
    ]  # fmt: skip


@pytest.mark.parametrize("driver", DRIVERS)
def test_silenced_while_the_node_reboots(parity: Bench, alertmanager: Alertmanager, driver: str) -> None:
    """``--silence-during-reboot``: the silence exists from the lock through the reboot (an alert of the
    rebooting node is silenced), its id kept on the Node; expired when the node is back and its settle gate
    passed, the record gone."""
    # the node's own settle gate (--settle-nodes-ready would wait for every Node of the shared API server)
    flags = [f"--alertmanager-url={alertmanager.url}", "--silence-max=1h", "--settle-pod-selector=app=web",
             '--silence-during-reboot=node="{{.Node}}",severity!="page"']  # fmt: skip
    run = parity.run(driver, flags)
    run.need()
    assert run.drive(), run.replies
    (silence,) = silences_of(alertmanager, run.node)
    assert silence["createdBy"] == "pykured" and run.node in silence["comment"]
    assert {(m["name"], m["isEqual"]) for m in silence["matchers"]} == {("node", True), ("severity", False)}
    record = record_of(run.obj())
    assert record is not None and record.ident == silence["id"]
    alertmanager.fire("NodeNotReady", node=run.node)  # the reboot's own alert: silenced, never blocking
    assert alertmanager.alerts() == []
    run.reboot()
    run.settle()
    done(run)
    assert silences_of(alertmanager, run.node) == []
    assert SILENCE_ANNOTATION not in run.annotations()
    assert "Silenced" in run.events() and "SilenceExpired" in run.events()


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_restarted_agent_expires_the_silence(
    parity: Bench, alertmanager: Alertmanager, driver: str
) -> None:
    """The agent (FleetLock: the server) restarts while the node reboots: the new one finds the silence's
    record on the Node, makes no second silence, and expires it when the node is back."""
    flags = [f"--alertmanager-url={alertmanager.url}", '--silence-during-reboot=node="{{.Node}}"']
    run = parity.run(driver, flags)
    run.need()
    assert run.drive(), run.replies
    (silence,) = silences_of(alertmanager, run.node)
    parity.restart(run)
    run.reboot()
    run.settle()
    done(run)
    assert silences_of(alertmanager, run.node) == []
    assert [s["id"] for s in alertmanager.silences()] == [silence["id"]]  # no second one was made
    assert SILENCE_ANNOTATION not in run.annotations()


@pytest.fixture
def proxy(alertmanager: Alertmanager) -> Iterator[AlertmanagerProxy]:
    """A proxy in front of the real Alertmanager that can refuse a silence's expiry (HTTP 500)."""
    with AlertmanagerProxy(alertmanager.url) as found:
        yield found


def holders_now(run: Run) -> list[str]:
    """Who holds the reboot lock, read afresh from the API server (every backend), as ``pykured lock status``
    reads it: not through the agent's own lock and its watch."""
    cfg = parse(run.argv, {})
    infos = lock_holders(
        run.k8s.kube(), namespace=run.namespace, ds_name=cfg.ds_name, annotation=cfg.lock_annotation,
        lease_prefix=cfg.lease_name_prefix,
    )  # fmt: skip
    return sorted(holder for info in infos for holder in info.holders)


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("end", ["release-daemonset", "release-lease", "drain-fails", "quarantine", "abort"])
def test_the_silence_ends_before_the_slot_is_freed(
    parity: Bench, alertmanager: Alertmanager, proxy: AlertmanagerProxy, driver: str, end: str
) -> None:
    """The silence is expired while the node still holds its slot, on every path that frees it: the release
    after the reboot (annotation and Lease lock), a failed drain's release, a quarantine's release, an abort
    (the need gone while a before-reboot hook holds the drain). The proxy reads the lock from the API server
    the moment the expiry arrives: the node holds it then."""
    flags = [f"--alertmanager-url={proxy.url}", '--silence-during-reboot=node="{{.Node}}"']
    backend = "lease" if end == "release-lease" else "daemonset"
    guarded = (
        (lambda ns, node: guarded_pod(parity, ns, node)) if end in ("drain-fails", "quarantine") else None
    )
    flags += {
        "drain-fails": ["--drain-timeout=2s"],
        "quarantine": ["--drain-timeout=5s", "--drain-escalation=quarantine"],
        "abort": ["--before-reboot-annotations=parity.example/ok"],
    }.get(end, [])
    run = parity.run(driver, flags, backend=backend, before_start=guarded)
    proxy.on_expire = lambda _ident: holders_now(run)
    run.need()
    if end.startswith("release"):
        assert run.drive(), run.replies
        (silence,) = silences_of(alertmanager, run.node)
        run.reboot()
        run.settle()
        done(run)
    else:
        assert not run.drive(passes=3), run.replies
        (silence,) = [s for s in alertmanager.silences() if run.node in s["comment"]]
        if end == "abort":
            assert holders_now(run) == [run.node] and silences_of(alertmanager, run.node) == [silence]
            run.unneed()  # FleetLock: Zincati's steady-state before the reboot
            if not run.fleetlock:
                run.daemon.run_once()
        assert eventually(lambda: holders_now(run) == [])  # FleetLock: its drain worker frees the slot
        assert {"drain-fails": "DrainFailed", "quarantine": "Quarantined"}.get(
            end, "Silenced"
        ) in run.events()
        assert run.reboots() == 0
    assert [(e.ident, e.status, e.seen) for e in proxy.expiries] == [(silence["id"], 200, [run.node])]
    assert holders_now(run) == [] and silences_of(alertmanager, run.node) == []
    assert SILENCE_ANNOTATION not in run.annotations() and "SilenceExpired" in run.events()


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_refused_expiry_holds_the_next_node_until_it_is_retried(
    parity: Bench, alertmanager: Alertmanager, proxy: AlertmanagerProxy, driver: str
) -> None:
    """Alertmanager refuses the expiry (500): the slot is freed anyway, the record marked, the failure counted
    and shown by ``pykured status``; the next node (a sentinel daemon sharing the lock) does not take the lock
    while the first node's alert fires under pykured's silence; the retry expires it once Alertmanager takes
    it, and then the alert itself holds the next node until it resolves."""
    flags = [f"--alertmanager-url={proxy.url}", '--silence-during-reboot=node="{{.Node}}"']
    run = parity.run(driver, flags)
    proxy.on_expire = lambda _ident: holders_now(run)
    other = parity.run("sentinel", flags, namespace=run.namespace)  # the same DaemonSet: the same lock
    run.need()
    assert run.drive(), run.replies
    (silence,) = silences_of(alertmanager, run.node)
    alertmanager.fire("NodeNotReady", node=run.node)  # the reboot's own alert
    assert eventually(lambda: alertmanager.alerts() == [])  # silenced: nobody is paged
    proxy.refuse_expiry = True
    run.reboot()
    run.settle()
    done(run)  # the slot is freed: a broken Alertmanager does not stop the fleet
    assert [(e.status, e.seen) for e in proxy.expiries][:1] == [(500, [run.node])]
    record = record_of(run.obj())
    assert record is not None and record.ident == silence["id"] and record.due is not None
    assert run.metric("pykured_silence_expiry_failures_total") >= 1
    assert run.metric("pykured_silence_expiry_pending", node=run.node) == 1.0
    assert "SilenceFailed" in run.events()
    now = datetime.datetime.now(datetime.UTC)
    assert "silence not expired since" in fleetview.node_row(run.state(), now=now).cells(now)[5]
    assert silences_of(alertmanager, run.node) == [silence] and alertmanager.alerts() == []

    other.need()
    assert not other.drive(passes=2)  # held by the alert under pykured's silence
    assert other.holders() == [] and other.reboots() == 0
    blocked = other.daemon.last_action.blocked if other.daemon.last_action else None
    assert blocked is not None and blocked.kind == "alertmanager", other.daemon.last_action
    assert "[NodeNotReady] silenced only by pykured's reboot silences" in blocked.message

    proxy.refuse_expiry = False  # Alertmanager takes the expiry again: the retry goes through
    assert eventually(lambda: silences_of(alertmanager, run.node) == [], timeout=120)
    assert eventually(lambda: record_of(run.obj()) is None, timeout=60)
    assert eventually(lambda: run.metric("pykured_silence_expiry_pending", node=run.node) == 0.0)
    assert eventually(lambda: "SilenceExpired" in run.events())
    assert proxy.expiries[-1].status == 200
    assert not other.drive(passes=1) and other.holders() == []  # the alert itself fires: still held
    alertmanager.resolve("NodeNotReady", node=run.node)
    assert eventually(lambda: other.drive(passes=1), timeout=90), other.daemon.last_action
    assert other.holders() == [other.node]


# -- the lock: concurrency, the taint, pacing, the release delay, the roll's order -------------------------


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_held_lock_taints_and_waits(parity: Bench, driver: str) -> None:
    """``--concurrency`` reached: wait with the PreferNoSchedule taint; go when the slot is free; untaint."""
    run = parity.run(driver, ["--prefer-no-schedule-taint=parity/waiting"])
    (other,) = parity.k8s.add_nodes(parity.k8s.unique("po"))
    lock = run.agent_lock()
    assert lock.acquire(unschedulable=False, now_ns=0, node_id=other).acquired
    run.need()
    assert not run.drive(passes=2)
    assert run.holders() == [other] and "parity/waiting:PreferNoSchedule" in run.taints()
    if run.fleetlock:
        assert run.replies[-1] == (423, "lock_held")
    assert lock.release(node_id=other)
    assert run.drive()
    run.reboot()
    run.settle()
    done(run)
    assert "parity/waiting:PreferNoSchedule" not in run.taints()


@pytest.mark.parametrize("driver", DRIVERS)
def test_the_early_taint_while_the_node_waits(parity: Bench, driver: str) -> None:
    """``--prefer-no-schedule-early``: tainted as soon as the node needs a reboot, while the closed window
    holds it back (no lock taken); untainted when the need goes away."""
    taint = "parity/early:PreferNoSchedule"
    flags = ["--prefer-no-schedule-taint=parity/early", "--prefer-no-schedule-early"]
    run = parity.run(driver, [*flags, f"--reboot-days={other_weekday()}"])
    run.need()
    assert not run.drive(passes=3)
    assert taint in run.taints() and run.holders() == [] and not run.cordoned()
    if run.fleetlock:
        assert run.replies[-1][0] != 200
        assert run.agent.fleetlock is not None
        run.agent.fleetlock.service.reconcile_once()  # Zincati said nothing since: the taint stays
        assert taint in run.taints()
    run.unneed()
    for _ in range(3):
        if not run.fleetlock:
            run.daemon.run_once()
    assert taint not in run.taints() and run.holders() == [] and run.reboots() == 0


@pytest.mark.parametrize("driver", DRIVERS)
def test_zone_pacing(parity: Bench, driver: str) -> None:
    """``--concurrency-label``: a node of the same zone holding a slot holds this one back."""
    zone = {"parity/zone": parity.k8s.unique("z")}
    run = parity.run(driver, ["--concurrency=2", "--concurrency-label=parity/zone"], backend="lease",
                     labels=zone)  # fmt: skip
    (other,) = parity.k8s.add_nodes(parity.k8s.unique("po"), labels=zone)
    lock = run.agent_lock()
    assert lock.acquire(unschedulable=False, now_ns=0, node_id=other).acquired
    run.need()
    assert not run.drive(passes=2)
    assert run.reboots() == 0 and not run.cordoned()
    assert lock.release(node_id=other)
    assert run.drive()


@pytest.mark.parametrize("backend", ["lease", "daemonset"])
@pytest.mark.parametrize("driver", DRIVERS)
def test_max_unavailable(parity: Bench, driver: str, backend: str) -> None:
    """``--max-unavailable=25%`` with ``--concurrency=3``: a quarter of the DaemonSet's 4 nodes is one, so a
    held slot holds this node back (with the taint); of 8 nodes it is two, and it goes."""

    def four(namespace: str, _node: str) -> None:
        parity.k8s.schedule_daemonset(namespace, "kured", desired=4)

    flags = ["--concurrency=3", "--max-unavailable=25%", "--prefer-no-schedule-taint=parity/waiting"]
    run = parity.run(driver, flags, backend=backend, before_start=four)
    (other,) = parity.k8s.add_nodes(parity.k8s.unique("po"))
    lock = run.agent_lock()
    assert lock.acquire(unschedulable=False, now_ns=0, node_id=other).acquired
    run.need()
    assert not run.drive(passes=2)
    assert run.holders() == [other] and run.reboots() == 0 and not run.cordoned()
    assert "parity/waiting:PreferNoSchedule" in run.taints()
    if run.fleetlock:
        assert run.replies[-1] == (423, "lock_held")
    parity.k8s.schedule_daemonset(run.namespace, "kured", desired=8)
    assert run.drive()
    assert sorted(run.holders()) == sorted([other, run.node]) and lock.concurrency == 2
    assert lock.release(node_id=other)
    run.reboot()
    run.settle()
    done(run)


@pytest.mark.parametrize("driver", DRIVERS)
def test_zone_share(parity: Bench, driver: str) -> None:
    """``--concurrency-per-label=50%``: the zone has 4 Nodes, so two of it at once; with two others holding
    slots this node waits although ``--concurrency=3`` has one free, and goes when one of them is done."""
    zone = {"parity/zone": parity.k8s.unique("z")}
    flags = ["--concurrency=3", "--concurrency-label=parity/zone", "--concurrency-per-label=50%"]
    run = parity.run(driver, flags, backend="lease", labels=zone)
    first, second, _idle = parity.k8s.add_nodes(*(parity.k8s.unique("po") for _ in range(3)), labels=zone)
    lock = run.agent_lock()
    assert lock.acquire(unschedulable=False, now_ns=0, node_id=first).acquired
    assert lock.acquire(unschedulable=False, now_ns=0, node_id=second).acquired
    run.need()
    assert not run.drive(passes=2)
    assert run.reboots() == 0 and not run.cordoned() and sorted(run.holders()) == sorted([first, second])
    assert lock.release(node_id=second)
    assert run.drive()
    assert lock.release(node_id=first)
    run.reboot()
    run.settle()
    done(run)


@pytest.mark.parametrize("driver", DRIVERS)
def test_the_lock_release_delay(parity: Bench, driver: str) -> None:
    """``--lock-release-delay``: the slot stays held after the reboot until the delay (stored on the Node)."""
    run = parity.run(driver, ["--lock-release-delay=2s"])
    run.need()
    assert run.drive()
    run.reboot()
    run.settle(passes=1)
    assert run.holders() == [run.node] and state.RELEASE_AFTER_ANNOTATION in run.annotations()

    def released() -> bool:
        run.settle(passes=1)
        return run.holders() == []

    assert eventually(released, timeout=60)
    done(run)


@pytest.mark.parametrize("driver", DAEMON_DRIVERS)
def test_resume_rolls_queue(parity: Bench, driver: str) -> None:
    """``--resume-rolls``: a waiting node writes its place in the roll (its queue Lease) and goes in turn."""
    run = parity.run(driver, ["--resume-rolls"], backend="lease")
    (other,) = parity.k8s.add_nodes(parity.k8s.unique("po"))
    lock = run.agent_lock()
    assert lock.acquire(unschedulable=False, now_ns=0, node_id=other).acquired
    run.need()
    assert not run.drive(passes=2)
    leases = run.kube.get(f"/apis/coordination.k8s.io/v1/namespaces/{run.namespace}/leases",
                          query={"labelSelector": "pykured.dev/lock-queue"})["items"]  # fmt: skip
    assert any(run.node in json.dumps(lease) for lease in leases)
    assert lock.release(node_id=other)
    assert run.drive()


# -- never a reboot loop -----------------------------------------------------------------------------------


@pytest.mark.parametrize("driver", DAEMON_DRIVERS)
def test_no_second_reboot_for_the_same_need(parity: Bench, driver: str) -> None:
    """A need still there right after a completed reboot backs off (sentinel, marker); a request is bound to
    the boot it names, so the reboot satisfies it."""
    run = parity.run(driver)
    run.need()
    assert run.drive()
    run.reboot()
    if driver != "request":
        run.sentinel.touch()  # the sentinel did not clear
    run.settle()
    assert run.holders() == []
    for _ in range(3):
        run.daemon.run_once()
    assert run.reboots() == 1 and run.holders() == []
    if driver != "request":
        assert state.BACKOFF_UNTIL_ANNOTATION in run.annotations()
        assert "RebootLoopBackoff" in run.events()


@pytest.mark.parametrize("driver", DAEMON_DRIVERS)
def test_the_loop_guard_holds_the_sentinel_never_a_request(parity: Bench, driver: str) -> None:
    """The need is there again right after a completed reboot, the driver's way. The sentinel (and the Zincati
    marker path's, the command that sees a staged deployment) can outlive a reboot: it backs off, and the
    back-off says so. A request for the new boot cannot: it is carried out at once, and a request written
    during the sentinel's back-off is not held by it either."""
    run = parity.run(driver)
    run.need()
    assert run.drive()
    run.reboot()
    run.need()  # the sentinel did not clear; a new request, for the new boot
    run.settle()
    assert run.holders() == [] and run.reboots() == 1
    notes = run.annotations()
    if driver != "request":
        assert notes.get(state.BACKOFF_REASON_ANNOTATION) == "sentinel"
        assert state.BACKOFF_UNTIL_ANNOTATION in notes and "RebootLoopBackoff" in run.events()
        for _ in range(3):
            run.daemon.run_once()
        assert run.reboots() == 1, "the sentinel is held"
        assert run.daemon.last_action is not None
        assert run.daemon.last_action.reason == "backing off after a reboot that did not clear the sentinel"
        run.ask("during the back-off")
    else:
        assert state.BACKOFF_UNTIL_ANNOTATION not in notes and "RebootLoopBackoff" not in run.events()

    def rebooted_again() -> bool:
        run.daemon.run_once()
        return run.reboots() == 2

    assert eventually(rebooted_again, timeout=60), run.events()


# -- the autoscalers kept off the node while its cycle runs ------------------------------------------------

CLUSTER_AUTOSCALER = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
KARPENTER = "karpenter.sh/do-not-disrupt"


def autoscaler_marks(run: Run, *keys: str) -> dict[str, str]:
    """The autoscalers' annotations on the Node (``keys``, default the two defaults) and pykured's record."""
    found = run.annotations()
    keys = keys or (CLUSTER_AUTOSCALER, KARPENTER)
    return {k: found[k] for k in (*keys, state.AUTOSCALER_RECORD_ANNOTATION) if k in found}


MARKED = {
    CLUSTER_AUTOSCALER: "true",
    KARPENTER: "true",
    state.AUTOSCALER_RECORD_ANNOTATION: f"{CLUSTER_AUTOSCALER},{KARPENTER}",
}


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize(
    "end",
    ["done-daemonset", "done-lease", "drain-fails", "quarantine", "abort", "released", "restarted"],
)
def test_the_autoscalers_keep_off_the_node_for_its_cycle(parity: Bench, driver: str, end: str) -> None:
    """From the lock until the cycle ends the Node carries the cluster-autoscaler's and Karpenter's
    annotations (``"true"``), cordoned and drained or not yet; every end of the cycle takes them off with
    their record: the release after the reboot (annotation and Lease lock), a failed drain, a quarantine (the
    node stays cordoned), an abort (the need gone while a before-reboot hook holds the drain), the slot freed
    by an operator (``pykured lock release``) and an agent (FleetLock: the server) restarted mid-cycle."""
    backend = "lease" if end == "done-lease" else "daemonset"
    guarded = (
        (lambda ns, node: guarded_pod(parity, ns, node)) if end in ("drain-fails", "quarantine") else None
    )
    flags = {
        "drain-fails": ["--drain-timeout=2s"],
        "quarantine": ["--drain-timeout=5s", "--drain-escalation=quarantine"],
        "abort": ["--before-reboot-annotations=parity.example/ok"],
    }.get(end, [])
    run = parity.run(driver, flags, backend=backend, before_start=guarded)
    assert autoscaler_marks(run) == {}
    run.need()
    if end in ("drain-fails", "quarantine"):
        assert not run.drive(passes=3), run.replies
        assert eventually(lambda: holders_now(run) == [])  # FleetLock: its drain worker frees the slot
        assert autoscaler_marks(run) == {} and run.memory() == {} and run.reboots() == 0
        assert run.cordoned() is (end == "quarantine")
        return
    if end == "abort":
        assert not run.drive(passes=3), run.replies
        assert holders_now(run) == [run.node] and not run.cordoned()  # held before the cordon: marked
        assert autoscaler_marks(run) == MARKED
        run.unneed()  # FleetLock: Zincati's steady-state before the reboot
        if not run.fleetlock:
            run.daemon.run_once()
        assert eventually(lambda: holders_now(run) == [])
        assert autoscaler_marks(run) == {} and run.memory() == {} and run.reboots() == 0
        return
    assert run.drive(), run.replies
    assert run.cordoned() and autoscaler_marks(run) == MARKED
    if end == "released":
        cfg = parse(run.argv, {})
        freed = lock_release(
            run.k8s.kube(), run.node, namespace=run.namespace, ds_name=cfg.ds_name,
            annotation=cfg.lock_annotation, lease_prefix=cfg.lease_name_prefix, out=io.StringIO(),
        )  # fmt: skip
        assert freed == 0 and holders_now(run) == []
    if end == "restarted":
        parity.restart(run)
        run.step() if run.fleetlock else run.daemon.run_once()  # the new agent keeps them while it waits
        assert autoscaler_marks(run) == MARKED
    run.reboot()
    run.settle()
    done(run)
    assert autoscaler_marks(run) == {}


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("setting", ["operators-own-renamed", "off"])
def test_an_operators_autoscaler_annotation_stays_and_each_may_be_renamed_or_off(
    parity: Bench, driver: str, setting: str
) -> None:
    """An autoscaler's annotation the Node carries before the cycle is the operator's: the cycle neither
    records nor removes it (and adds the other). ``--karpenter-annotation`` renames Karpenter's (the
    ``karpenter.sh/do-not-consolidate`` of Karpenter before v0.32); ``""`` turns each off."""
    older = "karpenter.sh/do-not-consolidate"
    if setting == "off":
        flags = ["--cluster-autoscaler-annotation=", "--karpenter-annotation="]
        before: dict[str, str] = {}
        during: dict[str, str] = {}
    else:
        flags = [f"--karpenter-annotation={older}"]
        before = {CLUSTER_AUTOSCALER: "true"}
        during = {CLUSTER_AUTOSCALER: "true", older: "true", state.AUTOSCALER_RECORD_ANNOTATION: older}

    def annotate(_namespace: str, node: str) -> None:
        if before:
            parity.k8s.kube().patch_node(node, {"metadata": {"annotations": before}})

    run = parity.run(driver, flags, before_start=annotate)
    run.need()
    assert run.drive(), run.replies
    assert run.cordoned() and autoscaler_marks(run, CLUSTER_AUTOSCALER, KARPENTER, older) == during
    run.reboot()
    run.settle()
    done(run)
    assert autoscaler_marks(run, CLUSTER_AUTOSCALER, KARPENTER, older) == before


# -- a Node condition as the need ----------------------------------------------------------------------------


@pytest.mark.parametrize("driver", ("sentinel", "zincati-marker"))
def test_a_node_condition_is_the_need(parity: Bench, driver: str) -> None:
    """``--reboot-condition``: a condition written as Node Problem Detector writes it (the status subresource)
    takes the sentinel's place: the node reboots (the marker path hands the reboot off to Zincati), and the
    Event names the condition."""
    kind = "RebootRequired" + parity.k8s.unique("c").replace("-", "")  # one node only shows it: the fleet's
    run = parity.run(driver, (f"--reboot-condition={kind}",))  # breaker counts every Node of the cluster
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    condition = {"type": kind, "status": "True", "reason": "KernelUpdateStaged", "message": "staged",
                 "lastHeartbeatTime": now, "lastTransitionTime": now}  # fmt: skip
    run.kube.patch_node_status(run.node, {"status": {"conditions": [condition]}})
    assert run.drive()
    assert "RebootConditionHeld" in run.events()
