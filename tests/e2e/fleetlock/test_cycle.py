"""FleetLock end to end on the real apiserver: Zincati's cycle, the shared budget, restarts, failures."""

from __future__ import annotations

import datetime
import threading
import time
from typing import Any

import pytest

from pykured.blockers.freeze import FreezeBlocker
from pykured.blockers.pause import PauseBlocker
from pykured.core.model import Reason
from pykured.cycle.state import (
    FLEETLOCK_ID_ANNOTATION,
    REBOOT_BOOT_ID_ANNOTATION,
    RELEASE_AFTER_ANNOTATION,
    UNSCHEDULABLE_BEFORE_ANNOTATION,
)
from pykured.fleet.freeze import pause_nodes, unfreeze, unpause_nodes
from pykured.kube.client import Obj
from pykured.policy import halt
from pykured.policy.source import PolicySource
from pykured.policy.writer import add_halt
from tests.e2e.fleetlock.conftest import Rig, utcnow, zincati, zincati_id
from tests.lock.conftest import History, annotation_history

pytestmark = pytest.mark.k8s

STATE_KEYS = (FLEETLOCK_ID_ANNOTATION, REBOOT_BOOT_ID_ANNOTATION, UNSCHEDULABLE_BEFORE_ANNOTATION,
              RELEASE_AFTER_ANNOTATION)  # fmt: skip


def event_reasons(rig: Rig, node: str) -> list[str]:
    query = {"fieldSelector": f"involvedObject.name={node}"}
    return [e["reason"] for e in rig.kube.get("/api/v1/namespaces/default/events", query=query)["items"]]


def pods_on(rig: Rig, node: str) -> list[str]:
    listed = rig.kube.list_pods(namespace=rig.namespace, field_selector=f"spec.nodeName={node}")
    return [p["metadata"]["name"] for p in listed.get("items", [])]


@pytest.mark.parametrize("mode", ["node-local", "central"], ids=["node-local", "central"])
def test_full_zincati_cycle(rig: Rig, mode: str) -> None:
    (node,) = rig.add_nodes(rig.k8s.unique("zn"))
    rig.k8s.create_pod(rig.namespace, "work", node=node, grace=2)
    server = rig.server(mode=mode, node=node if mode == "node-local" else "")
    zid = zincati_id(node)

    def pre() -> tuple[int, str]:
        return zincati(server.port, "pre-reboot", zid)

    # Zincati starts: steady-state with no slot held answers 200 at once.
    assert zincati(server.port, "steady-state", zid) == (200, "ok")
    assert rig.holders() == []
    # pre-reboot: slot taken, node cordoned, drain running -> 423, never 2xx before the drain completes.
    assert pre() == (423, "drain_in_progress")
    assert rig.holders() == [node]
    assert rig.cordoned(node)
    assert rig.annotations(node)[FLEETLOCK_ID_ANNOTATION] == zid
    assert rig.annotations(node)[UNSCHEDULABLE_BEFORE_ANNOTATION] == "false"
    kinds = rig.until(pre)
    assert set(kinds[:-1]) <= {"drain_in_progress"}
    assert pods_on(rig, node) == []  # the 200 came after the pods were gone
    boot = rig.k8s.boot_id(node)
    assert rig.annotations(node)[REBOOT_BOOT_ID_ANNOTATION] == boot
    assert ("drain", node) in rig.notifier.sent and ("reboot", node) in rig.notifier.sent
    # Zincati re-asks during its interactive-session grace: reentrant 200, nothing changes.
    assert pre() == (200, "ok")
    assert rig.holders() == [node]
    # Zincati finalizes, the node reboots, Zincati reports steady state.
    assert rig.k8s.reboot_node(node) != boot
    assert zincati(server.port, "steady-state", zid) == (200, "ok")
    assert not rig.cordoned(node)
    assert rig.holders() == []
    assert not set(STATE_KEYS) & set(rig.annotations(node))
    assert ("uncordon", node) in rig.notifier.sent
    assert rig.count("pre-reboot", "ok") == 2 and rig.count("steady-state", "ok") == 2
    assert rig.count("pre-reboot", "drain_in_progress") >= 1
    assert rig.count("cycle", "granted") == 1 and rig.count("cycle", "rebooted") == 1


def test_shared_budget_with_a_sentinel_driven_holder(rig: Rig) -> None:
    zn, other = rig.add_nodes(rig.k8s.unique("zn"), rig.k8s.unique("sentinel"))
    server = rig.server(mode="central")
    zid = zincati_id(zn)
    # A sentinel-driven daemon holds the only slot: Zincati waits, nothing is cordoned or marked.
    assert rig.lock.acquire(unschedulable=False, now_ns=time.time_ns(), node_id=other).acquired
    assert zincati(server.port, "pre-reboot", zid) == (423, "lock_held")
    assert not rig.cordoned(zn)
    assert FLEETLOCK_ID_ANNOTATION not in rig.annotations(zn)
    assert rig.holders() == [other]
    rig.lock.release(node_id=other)
    # Now Zincati gets it, and the daemon cannot take the last slot while Zincati holds it.
    rig.until(lambda: zincati(server.port, "pre-reboot", zid))
    assert not rig.lock.acquire(unschedulable=False, now_ns=time.time_ns(), node_id=other).acquired
    assert rig.holders() == [zn]
    assert zincati(server.port, "steady-state", zid) == (200, "ok")  # no reboot: released anyway (counted)
    assert rig.count("cycle", "released_without_reboot") == 1
    assert rig.holders() == [] and not rig.cordoned(zn)


def test_restart_at_every_step_keeps_the_state(rig: Rig) -> None:
    (node,) = rig.add_nodes(rig.k8s.unique("zn"))
    rig.k8s.create_pod(rig.namespace, "work", node=node, grace=2)
    zid = zincati_id(node)

    def restart() -> int:
        for server in rig.servers:
            server.stop()
        rig.servers.clear()
        return rig.server(mode="node-local", node=node).port

    port = restart()
    assert zincati(port, "pre-reboot", zid) == (423, "drain_in_progress")
    port = restart()  # mid-drain: the drain is cancelled and resumed by the new process
    assert rig.holders() == [node] and rig.cordoned(node)
    rig.until(lambda: zincati(port, "pre-reboot", zid))
    port = restart()  # granted: a restart must not release, and re-asking is still 200
    rig.servers[0].service.reconcile_once()
    assert rig.holders() == [node] and rig.cordoned(node)
    assert zincati(port, "pre-reboot", zid) == (200, "ok")
    rig.k8s.reboot_node(node)
    port = restart()  # rebooted, before steady-state: still held until Zincati says so (or the grace ends)
    rig.servers[0].service.reconcile_once()
    assert rig.holders() == [node]
    assert zincati(port, "steady-state", zid) == (200, "ok")
    assert rig.holders() == [] and not rig.cordoned(node)
    port = restart()
    assert zincati(port, "steady-state", zid) == (200, "ok")


def node_history(rig: Rig, nodes: list[str]) -> History:
    """Every version of the Nodes, in the API server's order: how many of ``nodes`` were cordoned at once."""
    cordoned: set[str] = set()

    def count(kind: str, obj: Obj) -> int:
        name = obj["metadata"]["name"]
        if name in nodes and kind != "DELETED" and obj["spec"].get("unschedulable"):
            cordoned.add(name)
        else:
            cordoned.discard(name)
        return len(cordoned)

    return History(rig.kube, "/api/v1/nodes", {}, count)


def test_central_ten_nodes_two_slots(rig: Rig) -> None:
    rig.set_concurrency(2)
    nodes = rig.add_nodes(*(rig.k8s.unique("zc") for _ in range(10)))
    for node in nodes:
        rig.k8s.create_pod(rig.namespace, f"w-{node}", node=node, grace=1)
    server = rig.server(mode="central", long_poll_s=2.0)
    locks = annotation_history(rig.kube, rig.namespace, "kured")
    cordons = node_history(rig, nodes)
    done: list[str] = []

    def agent(node: str) -> None:
        zid = zincati_id(node)
        rig.until(lambda: zincati(server.port, "steady-state", zid))
        rig.until(lambda: zincati(server.port, "pre-reboot", zid), timeout=120)
        assert pods_on(rig, node) == []
        rig.k8s.reboot_node(node, down_seconds=0.05)
        rig.until(lambda: zincati(server.port, "steady-state", zid))
        done.append(node)

    agents = [threading.Thread(target=agent, args=(n,), daemon=True) for n in nodes]
    for thread in agents:
        thread.start()
    for thread in agents:
        thread.join(timeout=150)
    locks.stop()
    cordons.stop()
    assert sorted(done) == sorted(nodes)
    assert locks.max_holders == 2  # both slots used, never more
    assert locks.holders_seen == set(nodes)
    assert 1 <= cordons.max_holders <= 2
    assert rig.holders() == []
    assert rig.count("pre-reboot", "lock_held") > 0


def test_unknown_ids(rig: Rig) -> None:
    (node,) = rig.add_nodes(rig.k8s.unique("zn"))
    central = rig.server(mode="central")
    local = rig.server(mode="node-local", node=node)
    stranger = "0123456789abcdef0123456789abcdef"
    assert zincati(central.port, "pre-reboot", stranger) == (404, "unknown_node")
    assert zincati(central.port, "steady-state", stranger) == (200, "ok")  # unlock-if-held: nothing held
    assert zincati(local.port, "pre-reboot", stranger) == (404, "unknown_node")
    assert zincati(local.port, "steady-state", stranger) == (404, "unknown_node")
    assert zincati(local.port, "pre-reboot", zincati_id(node), group="workers") == (400, "unknown_group")
    assert rig.holders() == []


def test_node_local_refuses_a_non_loopback_address(rig: Rig) -> None:
    from pykured.core.errors import ConfigError

    (node,) = rig.add_nodes(rig.k8s.unique("zn"))
    with pytest.raises(ConfigError, match="loopback"):
        rig.server(mode="node-local", node=node, host="0.0.0.0")
    with pytest.raises(ConfigError, match="machine id"):
        rig.server(mode="node-local", node=node, machine_id_file="/nonexistent/machine-id")


def test_drain_failure_releases_and_uncordons(rig: Rig) -> None:
    (node,) = rig.add_nodes(rig.k8s.unique("zn"))
    rig.k8s.create_pod(rig.namespace, "guarded", node=node, labels={"app": "g"})
    rig.k8s.create_pdb(rig.namespace, "pdb", {"app": "g"}, min_available=1)
    rig.k8s.set_pdb_status(rig.namespace, "pdb", disruptions_allowed=0)
    server = rig.server(mode="central", drain_timeout=1.0)
    zid = zincati_id(node)
    kinds = rig.until(lambda: zincati(server.port, "pre-reboot", zid), status=503)
    assert kinds[-1] == "drain_failed" and "ok" not in kinds
    assert rig.holders() == [] and not rig.cordoned(node)
    assert not set(STATE_KEYS) & set(rig.annotations(node))
    assert zincati(server.port, "pre-reboot", zid) == (503, "drain_failed")  # back-off, no cordon churn
    assert not rig.cordoned(node)


def test_drain_failure_with_force_reboot_grants(rig: Rig) -> None:
    (node,) = rig.add_nodes(rig.k8s.unique("zn"))
    rig.k8s.create_pod(rig.namespace, "guarded", node=node, labels={"app": "g"})
    rig.k8s.create_pdb(rig.namespace, "pdb", {"app": "g"}, min_available=1)
    rig.k8s.set_pdb_status(rig.namespace, "pdb", disruptions_allowed=0)
    server = rig.server(mode="central", drain_timeout=1.0, force_reboot=True)
    rig.until(lambda: zincati(server.port, "pre-reboot", zincati_id(node)))
    assert rig.holders() == [node] and rig.cordoned(node)


def test_steady_state_while_draining_releases_without_reboot(rig: Rig) -> None:
    (node,) = rig.add_nodes(rig.k8s.unique("zn"))
    rig.k8s.create_pod(rig.namespace, "slow", node=node, grace=2)
    server = rig.server(mode="central", long_poll_s=10.0)
    zid = zincati_id(node)
    server.service.long_poll_s = 0.1
    assert zincati(server.port, "pre-reboot", zid) == (423, "drain_in_progress")
    server.service.long_poll_s = 10.0
    assert zincati(server.port, "steady-state", zid) == (200, "ok")  # Zincati restarted mid-drain
    assert rig.holders() == [] and not rig.cordoned(node)
    assert rig.count("cycle", "released_without_reboot") == 1


def test_admin_cordon_is_kept(rig: Rig) -> None:
    (node,) = rig.add_nodes(rig.k8s.unique("zn"))
    rig.kube.patch_node(node, {"spec": {"unschedulable": True}})
    server = rig.server(mode="central")
    zid = zincati_id(node)
    rig.until(lambda: zincati(server.port, "pre-reboot", zid))
    assert rig.annotations(node)[UNSCHEDULABLE_BEFORE_ANNOTATION] == "true"
    rig.k8s.reboot_node(node)
    assert zincati(server.port, "steady-state", zid) == (200, "ok")
    assert rig.cordoned(node)  # the administrator's cordon survives the cycle
    assert rig.holders() == []


def test_release_delay_is_kept_on_the_node(rig: Rig) -> None:
    (node,) = rig.add_nodes(rig.k8s.unique("zn"))
    server = rig.server(mode="central", release_delay_s=600.0)
    zid = zincati_id(node)
    rig.until(lambda: zincati(server.port, "pre-reboot", zid))
    rig.k8s.reboot_node(node)
    assert zincati(server.port, "steady-state", zid) == (200, "ok")
    assert not rig.cordoned(node)
    assert rig.holders() == [node] and RELEASE_AFTER_ANNOTATION in rig.annotations(node)
    server.service.reconcile_once()
    assert rig.holders() == [node]  # not yet
    past = {
        RELEASE_AFTER_ANNOTATION: "2000-01-01T00:00:00Z"
    }  # the delay has passed (it is read from the Node)
    rig.kube.patch_node(node, {"metadata": {"annotations": past}})
    server.service.reconcile_once()
    assert rig.holders() == []
    assert not set(STATE_KEYS) & set(rig.annotations(node))


def test_reconcile_releases_a_rebooted_node_without_steady_state(rig: Rig) -> None:
    (node,) = rig.add_nodes(rig.k8s.unique("zn"))
    server = rig.server(mode="central", ready_grace=datetime.timedelta(0))
    zid = zincati_id(node)
    rig.until(lambda: zincati(server.port, "pre-reboot", zid))
    server.service.reconcile_once()
    assert rig.holders() == [node]  # same bootID: granted, waiting for Zincati
    rig.k8s.reboot_node(node)
    rig.wait_for(lambda: node in server.service.resolver.fleetlock_nodes())  # the index's watch saw it
    server.service.reconcile_once()
    assert rig.holders() == [] and not rig.cordoned(node)
    assert rig.count("cycle", "released_no_steady_state") == 1
    assert "FleetLockNoSteadyState" in event_reasons(rig, node)


def test_reconcile_alerts_on_stuck_finalization_without_releasing(rig: Rig) -> None:
    (node,) = rig.add_nodes(rig.k8s.unique("zn"))
    server = rig.server(mode="node-local", node=node, stuck_after=datetime.timedelta(0))
    rig.until(lambda: zincati(server.port, "pre-reboot", zincati_id(node)))
    server.service.reconcile_once()
    server.service.reconcile_once()
    assert rig.holders() == [node] and rig.cordoned(node)
    assert rig.count("cycle", "stuck_finalization") == 1  # alerted once per boot, not per pass
    assert event_reasons(rig, node).count("FleetLockStuck") == 1


class Gate:
    def __init__(self, reason: Reason | None) -> None:
        self.reason = reason

    def check(self, *, now: object) -> Reason | None:
        return self.reason


class Closed:
    def contains(self, now: object) -> bool:
        return False

    def next_open(self, now: object) -> None:
        return None

    def __str__(self) -> str:
        return "never"


@pytest.mark.parametrize(
    ("overrides", "kind"),
    [
        ({"window": Closed()}, "outside_window"),
        ({"blockers": (Gate(Reason("pods", "pod x is running")),)}, "blocked"),
    ],
    ids=["window", "blocker"],
)
def test_gates_answer_423_without_taking_a_slot(rig: Rig, overrides: dict[str, Any], kind: str) -> None:
    (node,) = rig.add_nodes(rig.k8s.unique("zn"))
    server = rig.server(mode="central", **overrides)
    assert zincati(server.port, "pre-reboot", zincati_id(node)) == (423, kind)
    assert rig.holders() == [] and not rig.cordoned(node)


def test_foreign_cycle_is_left_alone(rig: Rig) -> None:
    (node,) = rig.add_nodes(rig.k8s.unique("zn"))
    server = rig.server(mode="node-local", node=node)
    assert rig.lock.acquire(
        unschedulable=False, now_ns=time.time_ns(), node_id=node
    ).acquired  # its own daemon
    assert zincati(server.port, "pre-reboot", zincati_id(node)) == (423, "lock_held")
    assert zincati(server.port, "steady-state", zincati_id(node)) == (200, "ok")
    assert rig.holders() == [node]  # the sentinel-driven cycle keeps its slot


def test_next_update_after_the_release_delay_starts_a_new_cycle(rig: Rig) -> None:
    (node,) = rig.add_nodes(rig.k8s.unique("zn"))
    server = rig.server(mode="central", release_delay_s=600.0)
    zid = zincati_id(node)
    rig.until(lambda: zincati(server.port, "pre-reboot", zid))
    rig.k8s.reboot_node(node)
    assert zincati(server.port, "steady-state", zid) == (200, "ok")
    assert zincati(server.port, "pre-reboot", zid) == (423, "lock_held")  # still in its release delay
    past = {RELEASE_AFTER_ANNOTATION: "2000-01-01T00:00:00Z"}  # the delay has passed (read from the Node)
    rig.kube.patch_node(node, {"metadata": {"annotations": past}})
    rig.until(lambda: zincati(server.port, "pre-reboot", zid))  # released, then a fresh grant
    assert rig.annotations(node)[REBOOT_BOOT_ID_ANNOTATION] == rig.k8s.boot_id(node)
    assert RELEASE_AFTER_ANNOTATION not in rig.annotations(node)


def test_reconcile_resumes_a_drain_after_restart(rig: Rig) -> None:
    (node,) = rig.add_nodes(rig.k8s.unique("zn"))
    rig.k8s.create_pod(rig.namespace, "work", node=node, grace=2)
    server = rig.server(mode="central")
    zid = zincati_id(node)
    assert zincati(server.port, "pre-reboot", zid) == (423, "drain_in_progress")
    server.stop()
    rig.servers.clear()
    server = rig.server(mode="central")
    server.service.reconcile_once()  # no Zincati call needed: the drain resumes
    assert rig.wait_for(lambda: REBOOT_BOOT_ID_ANNOTATION in rig.annotations(node))
    assert pods_on(rig, node) == []
    assert zincati(server.port, "pre-reboot", zid) == (200, "ok")


def test_central_ambiguous_and_late_nodes(rig: Rig) -> None:
    a, b = rig.add_nodes(rig.k8s.unique("za"), rig.k8s.unique("zb"))
    server = rig.server(mode="central")
    # A node that joins after the index was built is found (watch, or a re-list on a miss).
    (late,) = rig.add_nodes(rig.k8s.unique("zl"))
    rig.until(lambda: zincati(server.port, "pre-reboot", zincati_id(late)))
    assert zincati(server.port, "steady-state", zincati_id(late)) == (200, "ok")
    # Two Nodes with one machine id (a cloned image): refused, no slot taken.
    machine = rig.node(a)["status"]["nodeInfo"]["machineID"]
    rig.kube.patch_node_status(b, {"status": {"nodeInfo": {"machineID": machine}}})
    assert rig.wait_for(
        lambda: server.service.resolver.resolve(zincati_id(a))[0] is None, timeout=60
    )  # watched
    assert "several Nodes" in server.service.resolver.resolve(zincati_id(a))[1]
    status, kind = zincati(server.port, "pre-reboot", zincati_id(a))
    assert (status, kind) == (404, "unknown_node")
    assert rig.holders() == []


def test_reconcile_thread_releases_after_the_delay(rig: Rig) -> None:
    (node,) = rig.add_nodes(rig.k8s.unique("zn"))
    server = rig.server(mode="node-local", node=node, release_delay_s=1.0, reconcile_interval_s=0.3)
    zid = zincati_id(node)
    rig.until(lambda: zincati(server.port, "pre-reboot", zid))
    rig.k8s.reboot_node(node)
    assert zincati(server.port, "steady-state", zid) == (200, "ok")
    assert rig.wait_for(lambda: not rig.holders(), timeout=60), "the reconcile thread never released the slot"
    # The slot is released first and the Node's memory cleared by the next write: wait for that one too.
    assert rig.wait_for(lambda: not set(STATE_KEYS) & set(rig.annotations(node)), timeout=60)


def test_steady_state_from_a_node_whose_kubelet_is_not_back_yet(rig: Rig) -> None:
    (node,) = rig.add_nodes(rig.k8s.unique("zn"))
    server = rig.server(mode="central")
    zid = zincati_id(node)
    rig.until(lambda: zincati(server.port, "pre-reboot", zid))
    not_ready = {"type": "Ready", "status": "False", "reason": "NodeStatusUnknown", "message": "rebooting"}
    rig.kube.patch_node_status(node, {"status": {"conditions": [not_ready]}})
    # Same bootID but not Ready: rebooting, not "released without reboot" — wait for the kubelet.
    assert zincati(server.port, "steady-state", zid) == (503, "node_not_ready")
    assert rig.holders() == [node] and rig.cordoned(node)
    rig.k8s.reboot_node(node)
    assert zincati(server.port, "steady-state", zid) == (200, "ok")
    assert rig.holders() == [] and not rig.cordoned(node)
    assert rig.count("cycle", "rebooted") == 1 and rig.count("cycle", "released_without_reboot") == 0


def test_the_freeze_a_halt_sets_and_a_node_pause_answer_423(rig: Rig) -> None:
    """FleetLock honours the halt (as the freeze) and the per-node pause, as wiring builds its blockers."""
    (node,) = rig.add_nodes(rig.k8s.unique("zn"))
    source = PolicySource(rig.kube, namespace=rig.namespace, name="kured-policy", zone=datetime.UTC)
    source.refresh()
    server = rig.server(
        mode="central", blockers=lambda name: [FreezeBlocker(source), PauseBlocker(rig.kube, name)]
    )
    found = halt.Overdue("zn-gone", utcnow(), "not Ready")
    five = datetime.timedelta(minutes=5)
    record = halt.halt_record(found, deadline=five, by="pykured on zn-1", now=utcnow())
    where = {"namespace": rig.namespace, "name": "kured-policy"}
    assert add_halt(rig.kube, record=record, now=utcnow(), **where) is None
    again = add_halt(rig.kube, record=record, now=utcnow(), **where)
    assert again is not None and again.to_json() == record.to_json()  # idempotent: the halt in force stays
    source.refresh()
    assert zincati(server.port, "pre-reboot", zincati_id(node)) == (423, "blocked")
    assert rig.holders() == [] and not rig.cordoned(node)
    unfreeze(rig.kube, namespace=rig.namespace, name="kured-policy")
    source.refresh()
    pause_nodes(rig.kube, [node], reason="disk", until=None, now=utcnow())
    assert zincati(server.port, "pre-reboot", zincati_id(node)) == (423, "blocked")
    assert rig.holders() == []
    unpause_nodes(rig.kube, [node])
    # no longer blocked: granted once its drain is done (a long poll or more on a loaded machine)
    seen = rig.until(lambda: zincati(server.port, "pre-reboot", zincati_id(node)))
    assert "blocked" not in seen, seen


# -- only the node itself is answered ---------------------------------------------------------------------


def test_a_granted_nodes_steady_state_from_another_address_is_refused_and_the_slot_kept(rig: Rig) -> None:
    (a,) = rig.add_nodes(rig.k8s.unique("za"), address="127.0.0.2")
    (b,) = rig.add_nodes(rig.k8s.unique("zb"), address="127.0.0.3")
    server = rig.server(mode="central")
    rig.until(lambda: zincati(server.port, "pre-reboot", zincati_id(a), source="127.0.0.2"))
    assert rig.holders() == [a]
    before = rig.annotations(a)
    for source in ("127.0.0.3", "127.0.0.1"):  # node b's address, and an address no Node has
        assert zincati(server.port, "steady-state", zincati_id(a), source=source) == (403, "forbidden")
    assert rig.count("steady-state", "forbidden") == 2
    assert rig.holders() == [a]
    assert rig.cordoned(a)
    assert {k: rig.annotations(a).get(k) for k in STATE_KEYS} == {k: before.get(k) for k in STATE_KEYS}
    # The second node cannot go down while the first holds the slot, whoever asks for it.
    assert zincati(server.port, "pre-reboot", zincati_id(b), source="127.0.0.3") == (423, "lock_held")
    # From its own address the steady-state is answered.
    rig.until(lambda: zincati(server.port, "steady-state", zincati_id(a), source="127.0.0.2"))
    assert rig.holders() == []


def test_pre_reboot_from_a_wrong_address_does_not_cordon(rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    (x,) = rig.add_nodes(rig.k8s.unique("zx"), address="127.0.0.2")
    server = rig.server(mode="central")
    for _ in range(3):
        assert zincati(server.port, "pre-reboot", zincati_id(x), source="127.0.0.4") == (403, "forbidden")
    assert rig.holders() == []
    assert not rig.cordoned(x)
    assert FLEETLOCK_ID_ANNOTATION not in rig.annotations(x)
    refusals = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert refusals[0] == (
        f"FleetLock refused pre-reboot for node {x} from address 127.0.0.4: not an address of that Node"
    )
    assert len(refusals) == 3  # one line per refused request
