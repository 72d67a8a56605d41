"""The maintenance policy with real agents on simulated nodes: blackouts and the freeze from the watched
ConfigMap mid-roll, settle gates, reboot hooks, zone pacing. The API server and the agents are real."""

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pykured.core.errors import KubeError
from pykured.cycle.state import NodeState
from pykured.fleet import freeze as freezecmd
from pykured.fleet import view as fleetview
from pykured.kube.client import Obj
from pykured.lock.lease import LOCK_LABEL, lease_entry
from pykured.policy.source import configmaps_path
from pykured.roll import order as roll
from pykured.roll import rule as turns
from pykured_dev.eventually import eventually
from pykured_dev.testenv.fleet import Fleet
from tests.fleets import MakeFleet, fleet_factory
from tests.testenv import TestEnv

pytestmark = [pytest.mark.k8s, pytest.mark.slow]
UTC = datetime.UTC
LOCK = "weave.works/kured-node-lock"
POLICY = "kured-policy"


@pytest.fixture
def make_fleet(k8s: TestEnv, tmp_path: Path) -> Iterator[MakeFleet]:
    with fleet_factory(k8s, tmp_path, period="10s") as make:
        yield make


def put_policy(k8s: TestEnv, ns: str, data: dict[str, str]) -> None:
    kube = k8s.kube()
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": POLICY}, "data": data}
    try:
        kube.request("PUT", configmaps_path(ns, POLICY), body=obj)
    except KubeError:
        kube.request("POST", configmaps_path(ns), body=obj)


def reboots(fleet: Fleet) -> int:
    return sum(slot.reboots for slot in fleet.slots.values())


def lock_value(k8s: TestEnv, ns: str) -> str | None:
    value = k8s.kube().get_daemonset(ns, "kured")["metadata"].get("annotations", {}).get(LOCK)
    return str(value) if value is not None else None


def events(k8s: TestEnv, node: str) -> list[Obj]:
    found: list[Obj] = k8s.kube().get(
        "/api/v1/namespaces/default/events", query={"fieldSelector": f"involvedObject.name={node}"}
    )["items"]
    return found


def node_obj(k8s: TestEnv, node: str) -> Obj:
    return k8s.kube().get_node(node)


def logs(fleet: Fleet) -> str:
    return "\n".join(f"--- {n}\n{fleet.log_text(n)[-3000:]}" for n in fleet.slots)


def test_a_blackout_added_to_the_configmap_during_a_roll_stops_the_next_reboot(
    k8s: TestEnv, make_fleet: MakeFleet
) -> None:
    fleet, ns, nodes = make_fleet(
        3, args=(f"--policy-configmap={POLICY}", "--lock-release-delay=4s", "--log-level=debug")
    )
    put_policy(k8s, ns, {"blackouts": "# none\n"})
    for node in nodes:
        fleet.touch(node)
    assert fleet.wait_for(lambda: reboots(fleet) >= 1, timeout=60), logs(fleet)
    now = datetime.datetime.now(UTC)
    start, end = (
        (now - datetime.timedelta(hours=1)).isoformat(),
        (now + datetime.timedelta(hours=1)).isoformat(),
    )
    put_policy(k8s, ns, {"blackouts": f"{start}/{end} change freeze"})
    first = reboots(fleet)
    assert first == 1
    # the first node finishes its cycle and releases; nobody else starts
    assert fleet.wait_for(lambda: lock_value(k8s, ns) is None, timeout=90), logs(fleet)
    waiting = [n for n in nodes if fleet.slots[n].reboots == 0]
    assert fleet.wait_for(  # each remaining agent decided to wait for the window (its own log)
        lambda: all("wait: outside the maintenance window" in fleet.log_text(n) for n in waiting), timeout=90
    ), logs(fleet)
    assert reboots(fleet) == 1, logs(fleet)
    assert "Policy ConfigMap" in logs(fleet) and "1 blackout(s)" in logs(fleet)
    # lifting the blackout lets the roll continue
    put_policy(k8s, ns, {})
    assert fleet.wait_for(lambda: reboots(fleet) == 3, timeout=90), logs(fleet)
    assert all(slot.reboots == 1 for slot in fleet.slots.values())


def test_a_bad_configmap_is_refused_and_keeps_the_blackout(k8s: TestEnv, make_fleet: MakeFleet) -> None:
    fleet, ns, (node,) = make_fleet(1, args=(f"--policy-configmap={POLICY}", "--log-level=debug"))
    now = datetime.datetime.now(UTC)
    start, end = (
        (now - datetime.timedelta(hours=1)).isoformat(),
        (now + datetime.timedelta(hours=1)).isoformat(),
    )
    put_policy(k8s, ns, {"blackouts": f"{start}/{end}"})
    assert fleet.wait_for(lambda: "1 blackout(s)" in fleet.log_text(node), timeout=90), fleet.log_text(node)
    put_policy(k8s, ns, {"blackouts": "23 Dec 16:00 - 2 Jan 10:00"})
    assert fleet.wait_for(lambda: "Refusing policy ConfigMap" in fleet.log_text(node), timeout=90)
    fleet.touch(node)
    assert fleet.wait_for(lambda: "wait: outside the maintenance window" in fleet.log_text(node), timeout=90)
    assert fleet.slots[node].reboots == 0 and lock_value(k8s, ns) is None
    proc = fleet.slots[node].proc
    assert proc is not None and proc.poll() is None  # no crash


def test_freeze_during_a_roll_lets_the_holder_finish_and_starts_no_other(
    k8s: TestEnv, make_fleet: MakeFleet
) -> None:
    fleet, ns, nodes = make_fleet(3, args=(f"--policy-configmap={POLICY}", "--drain-delay=3s"))
    put_policy(k8s, ns, {})
    for node in nodes:
        fleet.touch(node)
    assert fleet.wait_for(lambda: bool(lock_value(k8s, ns)), timeout=60), logs(fleet)
    holder = next(n for n in nodes if n in (lock_value(k8s, ns) or ""))
    alice = k8s.kube_as("alice", ["system:masters"])
    freezecmd.freeze(
        alice, namespace=ns, name=POLICY, reason="INC-123", until=None, now=datetime.datetime.now(UTC)
    )
    # the holder is past the gates: it finishes its cycle
    assert fleet.wait_for(lambda: fleet.slots[holder].reboots == 1, timeout=60), logs(fleet)
    assert fleet.wait_for(lambda: lock_value(k8s, ns) is None, timeout=90), logs(fleet)
    others = [n for n in nodes if n != holder]
    assert fleet.wait_for(
        lambda: all("Reboot blocked: frozen by alice at " in fleet.log_text(n) for n in others), timeout=90
    ), logs(fleet)
    assert reboots(fleet) == 1, logs(fleet)
    assert any(e["reason"] == "RebootBlocked" and "INC-123" in e["message"] for e in events(k8s, others[0]))
    freezecmd.unfreeze(alice, namespace=ns, name=POLICY)
    assert fleet.wait_for(lambda: reboots(fleet) == 3, timeout=90), logs(fleet)


def test_settle_gates_hold_the_lock_on_an_unready_pod_and_a_pdb_then_release(
    k8s: TestEnv, make_fleet: MakeFleet
) -> None:
    apps = k8s.new_namespace("apps")
    fleet, ns, (first, second) = make_fleet(
        2, args=("--settle-pod-selector=app=web", "--settle-pdbs", "--settle-timeout=5m")
    )
    ds = k8s.kube().get_daemonset(ns, "kured")
    # a DaemonSet pod the drain leaves alone, not Ready after the reboot
    k8s.create_pod(
        ns, "web-ds", node=first, labels={"app": "web"}, owner=k8s.owner_ref(ds), phase_running=False
    )
    k8s.create_pod(apps, "db-0", node=first, labels={"app": "db"})
    k8s.create_pdb(apps, "db", {"app": "db"}, min_available=1)
    k8s.set_pdb_status(apps, "db", disruptions_allowed=1, healthy=2)

    def pdb_busy(_node: str) -> None:  # the drained pod's replacement is not healthy yet
        k8s.set_pdb_status(apps, "db", disruptions_allowed=0, healthy=1)

    fleet.on_reboot = pdb_busy
    fleet.touch(first)
    assert fleet.wait_for(lambda: fleet.slots[first].reboots == 1, timeout=60), logs(fleet)
    fleet.touch(second)
    assert fleet.wait_for(
        lambda: f"Holding the reboot lock: pods not ready: [{ns}/web-ds]" in fleet.log_text(first),
        timeout=60,
    ), logs(fleet)
    assert node_obj(k8s, first)["metadata"]["annotations"]["pykured.dev/drained-pdbs"] == f"{apps}/db"
    assert not node_obj(k8s, first)["spec"].get("unschedulable")  # back and uncordoned, still holding
    ready = {"type": "Ready", "status": "True"}
    k8s.kube().request(
        "PATCH",
        f"/api/v1/namespaces/{ns}/pods/web-ds/status",
        body={"status": {"phase": "Running", "conditions": [ready]}},
        content_type="application/strategic-merge-patch+json",
    )
    assert fleet.wait_for(
        lambda: f"PodDisruptionBudgets allow no disruption: [{apps}/db]" in fleet.log_text(first), timeout=90
    ), logs(fleet)
    assert fleet.slots[second].reboots == 0 and first in (lock_value(k8s, ns) or "")
    k8s.set_pdb_status(apps, "db", disruptions_allowed=1, healthy=2)
    assert fleet.wait_for(lambda: fleet.slots[second].reboots == 1, timeout=60), logs(fleet)
    assert "pykured.dev/drained-pdbs" not in node_obj(k8s, first)["metadata"].get("annotations", {})
    assert any(e["reason"] == "HoldingLock" for e in events(k8s, first))


def test_settle_timeout_releases_with_a_warning(k8s: TestEnv, make_fleet: MakeFleet) -> None:
    fleet, ns, (node,) = make_fleet(1, args=("--settle-pod-selector=app=web", "--settle-timeout=3s"))
    ds = k8s.kube().get_daemonset(ns, "kured")
    k8s.create_pod(
        ns, "web-ds", node=node, labels={"app": "web"}, owner=k8s.owner_ref(ds), phase_running=False
    )
    fleet.touch(node)
    assert fleet.wait_for(lambda: fleet.slots[node].reboots == 1 and lock_value(k8s, ns) is None, timeout=60)
    assert "Timed out waiting: pods not ready" in fleet.log_text(node)
    assert any(e["reason"] == "SettleTimeout" and e["type"] == "Warning" for e in events(k8s, node))


def test_a_before_reboot_hook_that_answers(k8s: TestEnv, make_fleet: MakeFleet) -> None:
    fleet, _ns, (node,) = make_fleet(1, args=("--before-reboot-annotations=lb.example.com/drained",))
    answered = threading.Event()

    def controller() -> None:  # a hook controller: sees the label, does its work, answers
        def labelled() -> bool:
            labels = node_obj(k8s, node)["metadata"].get("labels", {})
            return bool(labels.get("pykured.dev/before-reboot") == "true")

        waiting = "Holding the reboot lock: waiting for before-reboot hooks"
        if eventually(labelled, timeout=60, every=0.1) and eventually(
            lambda: waiting in fleet.log_text(node), timeout=60
        ):  # its work takes a while: the agent waits for the answer, not for the label
            k8s.kube().patch_node(node, {"metadata": {"annotations": {"lb.example.com/drained": "true"}}})
            answered.set()

    thread = threading.Thread(target=controller, daemon=True)
    thread.start()
    fleet.touch(node)
    assert fleet.wait_for(lambda: fleet.slots[node].reboots == 1, timeout=60), fleet.log_text(node)
    assert answered.is_set()
    assert (
        "Holding the reboot lock: waiting for before-reboot hooks: [lb.example.com/drained]"
        in fleet.log_text(node)
    )
    assert fleet.wait_for(
        lambda: "pykured.dev/before-reboot" not in node_obj(k8s, node)["metadata"].get("labels", {}),
        timeout=90,
    )
    assert "lb.example.com/drained" not in node_obj(k8s, node)["metadata"].get("annotations", {})


def test_a_before_reboot_hook_that_never_answers_aborts_without_reboot(
    k8s: TestEnv, make_fleet: MakeFleet
) -> None:
    fleet, ns, (node,) = make_fleet(
        1,
        args=(
            "--before-reboot-annotations=lb.example.com/drained",
            "--reboot-hook-timeout=3s",
            "--period=1m",
        ),
    )
    fleet.touch(node)
    assert fleet.wait_for(
        lambda: "Timed out waiting: waiting for before-reboot hooks" in fleet.log_text(node), timeout=60
    )
    assert fleet.wait_for(lambda: lock_value(k8s, ns) is None, timeout=90)
    assert fleet.slots[node].reboots == 0

    # the slot is released first, then the cycle's marks are cleared (cycle.steps): wait for the label to go
    def unlabelled() -> bool:
        return "pykured.dev/before-reboot" not in node_obj(k8s, node)["metadata"].get("labels", {})

    assert fleet.wait_for(unlabelled, timeout=60)
    obj = node_obj(k8s, node)
    assert not obj["spec"].get("unschedulable")  # never cordoned
    assert any(e["reason"] == "RebootHookTimeout" and e["type"] == "Warning" for e in events(k8s, node))


@pytest.mark.timeout(400)  # nine agents on a shared two-core machine
def test_zone_pacing_three_zones_of_three_never_two_of_a_zone_down(
    k8s: TestEnv, make_fleet: MakeFleet
) -> None:
    zones = [z for z in ("zone-a", "zone-b", "zone-c") for _ in range(3)]
    fleet, ns, nodes = make_fleet(
        9,
        args=(
            "--lock-backend=lease",
            "--concurrency=3",
            "--concurrency-label=topology.kubernetes.io/zone",
            "--concurrency-per-label=1",
            "--lock-release-delay=1s",
        ),
        labels=[{"topology.kubernetes.io/zone": z} for z in zones],
    )
    zone_of = dict(zip(nodes, zones, strict=True))
    # the API server's watch history of the cluster slots (Leases) and of the Nodes' cordons
    kube = k8s.kube()
    holders: dict[str, str] = {}
    cordoned: set[str] = set()
    worst_holders: dict[str, int] = {}
    worst_down: dict[str, int] = {}
    stop = threading.Event()

    listed = threading.Semaphore(0)

    def watch(path: str, query: dict[str, str], on_event: Callable[[str, Obj], None]) -> None:
        rv = kube.get(path, query=query)["metadata"]["resourceVersion"]
        listed.release()
        while not stop.is_set():
            try:
                for event in kube.watch(path, query={**query, "resourceVersion": rv}, timeout_seconds=2):
                    rv = event["object"]["metadata"].get("resourceVersion", rv)
                    on_event(event["type"], event["object"])
            except KubeError:
                time.sleep(0.1)

    def on_lease(kind: str, obj: Obj) -> None:
        entry = lease_entry(obj) if kind != "DELETED" else None
        holders[obj["metadata"]["name"]] = entry.node_id if entry else ""
        for zone in set(zones):
            count = sum(1 for h in holders.values() if zone_of.get(h) == zone)
            worst_holders[zone] = max(worst_holders.get(zone, 0), count)

    def on_node(kind: str, obj: Obj) -> None:
        name = obj["metadata"]["name"]
        if name not in zone_of:
            return
        ready = any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in obj.get("status", {}).get("conditions", [])
        )
        if obj["spec"].get("unschedulable") or not ready:
            cordoned.add(name)
        else:
            cordoned.discard(name)
        for zone in set(zones):
            worst_down[zone] = max(worst_down.get(zone, 0), sum(1 for n in cordoned if zone_of[n] == zone))

    threads = [
        threading.Thread(
            target=watch,
            args=(
                f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
                {"labelSelector": "pykured.dev/lock=kured-lock"},
                on_lease,
            ),
            daemon=True,
        ),
        threading.Thread(target=watch, args=("/api/v1/nodes", {}, on_node), daemon=True),
    ]
    for thread in threads:
        thread.start()
    for _ in threads:  # both watches start from a list taken before the first sentinel
        assert listed.acquire(timeout=30)
    for node in nodes:
        fleet.touch(node)
    done = fleet.wait_for(
        lambda: all(s.reboots == 1 for s in fleet.slots.values()), timeout=240, interval=0.5
    )
    fleet.wait_for(lambda: not any(holders.values()), timeout=90)
    stop.set()
    for thread in threads:
        thread.join(timeout=60)
    assert done, logs(fleet)
    assert worst_holders == {"zone-a": 1, "zone-b": 1, "zone-c": 1}, worst_holders
    assert worst_down == {"zone-a": 1, "zone-b": 1, "zone-c": 1}, worst_down
    assert max(sum(1 for h in holders.values() if h), 0) == 0


def lease_holders(k8s: TestEnv, ns: str) -> list[str]:
    leases = k8s.kube().list_leases(ns, label_selector=f"{LOCK_LABEL}=kured-lock")["items"]
    return [e.node_id for lease in leases if (e := lease_entry(lease)) is not None]


def test_a_roll_interrupted_by_a_closed_window_resumes_with_the_remaining_nodes_first(
    k8s: TestEnv, make_fleet: MakeFleet
) -> None:
    fleet, ns, nodes = make_fleet(
        5,
        args=("--lock-backend=lease", "--resume-rolls", f"--policy-configmap={POLICY}", "--log-level=debug"),
    )
    order: list[str] = []
    fleet.on_reboot = order.append
    put_policy(k8s, ns, {})
    for node in nodes:
        fleet.touch(node)
    assert fleet.wait_for(lambda: len(order) >= 2, timeout=90), logs(fleet)
    now = datetime.datetime.now(UTC)
    span = (
        f"{(now - datetime.timedelta(hours=1)).isoformat()}/{(now + datetime.timedelta(hours=1)).isoformat()}"
    )
    put_policy(k8s, ns, {"blackouts": f"{span} the window closes"})
    assert fleet.wait_for(lambda: not lease_holders(k8s, ns), timeout=60), logs(fleet)
    first = list(order)
    rest = [n for n in nodes if n not in first]
    assert fleet.wait_for(
        lambda: all("wait: outside the maintenance window" in fleet.log_text(n) for n in rest), timeout=90
    ), logs(fleet)
    # new updates land on the nodes this roll already rebooted, while the window is closed
    for node in first:
        fleet.touch(node)

    def roll_now() -> roll.Roll:
        views = [NodeState.from_obj(node_obj(k8s, n)) for n in nodes]
        return fleetview.current_roll(fleetview.rows(views, [], now=datetime.datetime.now(UTC)))

    assert fleet.wait_for(lambda: len(roll_now().waiting) == 5, timeout=60), logs(fleet)
    paused = roll_now()  # what `pykured status` shows while the window is closed
    assert set(paused.rebooted) == set(first)
    assert set(paused.waiting[: len(rest)]) == set(rest) and set(paused.waiting[len(rest) :]) == set(first)
    assert order == first
    # the window opens again: the roll goes on with the nodes it has not rebooted yet
    put_policy(k8s, ns, {})
    assert fleet.wait_for(lambda: len(order) == 5 + len(first), timeout=240), logs(fleet)
    assert set(order[len(first) : 5]) == set(rest), f"{order}\n{logs(fleet)}"
    assert set(order[5:]) == set(first)
    assert fleet.wait_for(lambda: roll_now().since is None, timeout=90)  # nothing needs a reboot: roll over
    queue = k8s.kube().list_leases(ns, label_selector=f"{turns.QUEUE_LABEL}=kured-lock")["items"]
    assert len(queue) == 5 and not any(q["spec"].get("holderIdentity") for q in queue)  # every entry cleared
