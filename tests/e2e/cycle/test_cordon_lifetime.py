"""A cordon never outlives its cycle: each way the lock can go while pykured's cordon is on the node, on the
real API server, with real agents on simulated nodes, on both lock backends.

The ways: an operator frees the slot (``pykured lock release``) while the drain is held; ``--lock-ttl``
runs out while the holder drains (and another node takes the slot, or none does); the agent is down while
its slot is freed or expires and another node takes it; the drain fails (``--drain-timeout``); the drain is
escalated to a quarantine that ``pykured unquarantine`` ends. In each, a cordon pykured set is undone
exactly once, and an administrator's cordon set before the cycle is never undone. What is counted is what
the API server committed: every transition of ``spec.unschedulable`` replayed with a watch from a
resourceVersion read before the cycle (:mod:`tests.revisions`), never snapshots or timing.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pykured.cycle.state import STATE_ANNOTATIONS
from pykured.fleet.locks import lock_status
from pykured.policy.quarantine import QUARANTINED_ANNOTATION
from pykured_dev.testenv.fleet import Fleet
from tests.e2e.fleet.test_freeze import run
from tests.fleets import MakeFleet, fleet_factory, since_last_start
from tests.revisions import (
    LOCK_ANNOTATION,
    Flips,
    flips,
    lock_freed,
    lock_names,
    lock_path,
    lock_taken,
    version_of,
)
from tests.testenv import TestEnv

pytestmark = [pytest.mark.k8s, pytest.mark.slow]

BACKENDS = ["lease", "daemonset"]
"""The Lease lock (kustomize/base's) and kured's DaemonSet annotation lock."""
OWNERS = ["pykured", "operator"]
"""Whose cordon: pykured's (the node was schedulable before the cycle) or an administrator's, set before."""
LEAVING = "Leaving node"
"""The agent's line when it keeps a cordon that was not its own."""
BLOCKED = "error when evicting pods"
"""The drain's line while a PodDisruptionBudget refuses the eviction."""


@pytest.fixture
def make_fleet(k8s: TestEnv, tmp_path: Path) -> Iterator[MakeFleet]:
    with fleet_factory(k8s, tmp_path, period="10s") as make:
        yield make


def guard(k8s: TestEnv, node: str) -> Callable[[], None]:
    """A pod on ``node`` under a PodDisruptionBudget that allows no disruption: the drain is held. Returns
    what lets the pod go."""
    apps = k8s.new_namespace()
    k8s.create_pod(apps, "guarded", node=node, labels={"app": "guarded"})
    k8s.create_pdb(apps, "guard", {"app": "guarded"}, min_available=1)
    k8s.set_pdb_status(apps, "guard", disruptions_allowed=0)

    def let_go() -> None:
        k8s.set_pdb_status(apps, "guard", disruptions_allowed=1)

    return let_go


def before_cycle(k8s: TestEnv, node: str, owner: str) -> dict[str, Any]:
    """The administrator's cordon, if the test has one; then the Node as it is before the cycle (the watch
    replays from its resourceVersion)."""
    if owner == "operator":
        k8s.kube().patch_node(node, {"spec": {"unschedulable": True}})
    obj: dict[str, Any] = k8s.kube().get_node(node)
    return obj


def notes(obj: dict[str, Any]) -> dict[str, str]:
    annotations: dict[str, str] = obj["metadata"].get("annotations") or {}
    return annotations


def unschedulable(k8s: TestEnv, node: str) -> bool:
    return bool(k8s.kube().get_node(node)["spec"].get("unschedulable"))


def memory(k8s: TestEnv, node: str) -> set[str]:
    """The cycle's memory on the Node (and a quarantine)."""
    annotations = notes(k8s.kube().get_node(node))
    return {k for k in (*STATE_ANNOTATIONS, QUARANTINED_ANNOTATION) if k in annotations}


def holders(k8s: TestEnv, backend: str, ns: str) -> set[str]:
    """The nodes the lock names now (an expired slot's holder too)."""
    items = k8s.kube().get(lock_path(backend, ns))["items"]
    return {name for obj in items for name in lock_names(backend, obj)}


def expired(k8s: TestEnv, ns: str, node: str) -> bool:
    """``pykured lock status`` shows ``node``'s slot with its TTL run out."""
    out = io.StringIO()
    lock_status(
        k8s.kube(),
        namespace=ns,
        ds_name="kured",
        annotation=LOCK_ANNOTATION,
        lease_prefix="kured-lock",
        out=out,
    )
    rows = [line.split() for line in out.getvalue().splitlines()]
    return any(len(row) == 6 and row[1] == node and row[4] == "yes" for row in rows)


def ended(
    k8s: TestEnv, fleet: Fleet, backend: str, ns: str, node: str, owner: str, reboots: int = 1
) -> Callable[[], bool]:
    """The node rebooted, its cycle is over (no memory, no slot) and its cordon is as it was before."""

    def check() -> bool:
        return (
            fleet.slots[node].reboots >= reboots
            and not memory(k8s, node)
            and node not in holders(k8s, backend, ns)
            and unschedulable(k8s, node) is (owner == "operator")
        )

    return check


def draining(
    k8s: TestEnv, fleet: Fleet, backend: str, ns: str, node: str, *, since_start: bool = False
) -> Callable[[], bool]:
    """The node holds the slot, is cordoned and its drain is held by the PodDisruptionBudget."""

    def check() -> bool:
        log = since_last_start(fleet, node) if since_start else fleet.log_text(node)
        return BLOCKED in log and node in holders(k8s, backend, ns) and unschedulable(k8s, node)

    return check


def assert_kept_or_undone_once(seen: Flips, owner: str, *, cycles: int) -> None:
    """pykured's cordon: each of the ``cycles`` cordons undone once, the node schedulable at the end; an
    administrator's: never undone."""
    if owner == "operator":
        assert seen.before and not seen.uncordons and not seen.cordons, seen
    else:
        assert not seen.before and not seen.after, seen
        assert len(seen.cordons) == len(seen.uncordons) == cycles, seen


def release_by_hand(k8s: TestEnv, ns: str, node: str) -> None:
    """``pykured lock release NODE``, as an operator runs it (every backend)."""
    kubeconfig = k8s.kubeconfig_for("carol", ["system:masters"])
    done = run("lock", "release", node, f"--ds-namespace={ns}", kubeconfig=kubeconfig)
    assert done.returncode == 0, (done.stdout, done.stderr)


@pytest.mark.parametrize("owner", OWNERS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_slot_freed_by_hand_while_the_drain_is_held(
    k8s: TestEnv, make_fleet: MakeFleet, backend: str, owner: str
) -> None:
    fleet, ns, (node,) = make_fleet(args=(f"--lock-backend={backend}",))
    let_go = guard(k8s, node)
    start = before_cycle(k8s, node, owner)
    fleet.touch(node)
    assert fleet.wait_for(draining(k8s, fleet, backend, ns, node), timeout=90), fleet.log_text(node)
    release_by_hand(k8s, ns, node)
    let_go()  # the drain ends without the slot: no reboot; the next pass ends the cycle, then a new one runs
    assert fleet.wait_for(ended(k8s, fleet, backend, ns, node, owner), timeout=120), fleet.log_text(node)
    assert fleet.requests(node) == 1, "one reboot: the cycle that held its slot"
    kube = k8s.kube()
    seen = flips(kube, start)
    assert_kept_or_undone_once(seen, owner, cycles=2)
    if owner == "pykured":  # the first cordon was undone after the operator freed the slot
        freed = lock_freed(kube, backend, ns, node, version_of(start))
        assert seen.cordons[0] < freed < seen.uncordons[0], (freed, seen)
    else:
        assert LEAVING in fleet.log_text(node)


@pytest.mark.parametrize("owner", OWNERS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_the_holders_ttl_runs_out_while_it_drains_and_another_node_takes_the_slot(
    k8s: TestEnv, make_fleet: MakeFleet, backend: str, owner: str
) -> None:
    fleet, ns, (first, second) = make_fleet(2, args=(f"--lock-backend={backend}", "--lock-ttl=5s"))
    let_go = guard(k8s, first)
    start = before_cycle(k8s, first, owner)
    fleet.touch(first)
    assert fleet.wait_for(draining(k8s, fleet, backend, ns, first), timeout=90), fleet.log_text(first)
    fleet.touch(second)  # it takes the slot once the first node's TTL has run out, and reboots
    assert fleet.wait_for(ended(k8s, fleet, backend, ns, second, "pykured"), timeout=120), fleet.log_text(
        second
    )
    assert fleet.slots[first].reboots == 0 and unschedulable(k8s, first)
    let_go()
    assert fleet.wait_for(ended(k8s, fleet, backend, ns, first, owner), timeout=120), fleet.log_text(first)
    assert fleet.requests(first) == 1, "no reboot without the slot"
    kube = k8s.kube()
    seen = flips(kube, start)
    assert_kept_or_undone_once(seen, owner, cycles=2)
    if owner == "pykured":  # the first cordon was undone after the other node took the slot
        taken = lock_taken(kube, backend, ns, second, version_of(start))
        assert seen.cordons[0] < taken < seen.uncordons[0], (taken, seen)
    else:
        assert LEAVING in fleet.log_text(first)


@pytest.mark.parametrize("owner", OWNERS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_the_holders_ttl_runs_out_while_it_drains_and_nobody_takes_the_slot(
    k8s: TestEnv, make_fleet: MakeFleet, backend: str, owner: str
) -> None:
    fleet, ns, (node,) = make_fleet(args=(f"--lock-backend={backend}", "--lock-ttl=3s"))
    let_go = guard(k8s, node)
    start = before_cycle(k8s, node, owner)
    fleet.touch(node)
    assert fleet.wait_for(draining(k8s, fleet, backend, ns, node), timeout=90), fleet.log_text(node)
    assert fleet.wait_for(lambda: expired(k8s, ns, node), timeout=90)  # as `pykured lock status` says
    let_go()  # the holder finishes its own cycle on its expired slot
    assert fleet.wait_for(ended(k8s, fleet, backend, ns, node, owner), timeout=120), fleet.log_text(node)
    assert fleet.requests(node) == 1
    assert_kept_or_undone_once(flips(k8s.kube(), start), owner, cycles=1)


@pytest.mark.parametrize("owner", OWNERS)
@pytest.mark.parametrize("how", ["freed", "expired"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_an_agent_restarted_mid_cycle_finds_another_node_holding_its_slot(
    k8s: TestEnv, make_fleet: MakeFleet, backend: str, how: str, owner: str
) -> None:
    ttl = ("--lock-ttl=20s",) if how == "expired" else ()
    fleet, ns, (first, second) = make_fleet(2, args=(f"--lock-backend={backend}", *ttl))
    let_first_go, let_second_go = guard(k8s, first), guard(k8s, second)
    start = before_cycle(k8s, first, owner)
    fleet.touch(first)
    assert fleet.wait_for(draining(k8s, fleet, backend, ns, first), timeout=90), fleet.log_text(first)
    fleet.kill(first)  # the agent is down, its node cordoned
    if how == "freed":
        release_by_hand(k8s, ns, first)
    fleet.touch(second)  # it takes the slot (freed, or once the TTL has run out) and holds it, draining
    assert fleet.wait_for(draining(k8s, fleet, backend, ns, second), timeout=120), fleet.log_text(second)
    fleet.start(first)  # finds its cycle's memory on the Node and another node holding the slot
    if owner == "pykured":
        assert fleet.wait_for(lambda: not unschedulable(k8s, first), timeout=90), fleet.log_text(first)
    else:
        assert fleet.wait_for(lambda: LEAVING in since_last_start(fleet, first), timeout=90), fleet.log_text(
            first
        )
    let_second_go()
    let_first_go()
    assert fleet.wait_for(ended(k8s, fleet, backend, ns, second, "pykured"), timeout=120), fleet.log_text(
        second
    )
    assert fleet.wait_for(ended(k8s, fleet, backend, ns, first, owner), timeout=120), fleet.log_text(first)
    assert fleet.requests(first) == 1, "no reboot without the slot"
    kube = k8s.kube()
    seen = flips(kube, start)
    assert_kept_or_undone_once(seen, owner, cycles=2)
    if owner == "pykured":  # undone by the restarted agent, after the other node took the slot
        taken = lock_taken(kube, backend, ns, second, version_of(start))
        freed = lock_freed(kube, backend, ns, second, version_of(start))
        assert seen.cordons[0] < taken < seen.uncordons[0] < freed, (taken, freed, seen)


@pytest.mark.parametrize("owner", OWNERS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_failed_drain(k8s: TestEnv, make_fleet: MakeFleet, backend: str, owner: str) -> None:
    fleet, ns, (node,) = make_fleet(args=(f"--lock-backend={backend}", "--drain-timeout=3s"))
    let_go = guard(k8s, node)
    start = before_cycle(k8s, node, owner)
    fleet.touch(node)
    assert fleet.wait_for(
        lambda: "Unable to cordon or drain" in fleet.log_text(node) and node not in holders(k8s, backend, ns),
        timeout=90,
    ), fleet.log_text(node)
    let_go()  # the next cycle (after one period) drains and reboots
    assert fleet.wait_for(ended(k8s, fleet, backend, ns, node, owner), timeout=120), fleet.log_text(node)
    kube = k8s.kube()
    seen = flips(kube, start)
    freed = lock_freed(kube, backend, ns, node, version_of(start))
    if owner == "pykured":  # each cycle (failed ones, then the one that rebooted) undid its cordon once
        assert_kept_or_undone_once(seen, owner, cycles=len(seen.cordons))
        assert len(seen.cordons) >= 2, seen
        # the failed cycle: one cordon, one uncordon, both before its slot was freed
        assert [r for r in seen.cordons if r < freed] == [seen.cordons[0]], (freed, seen)
        assert [r for r in seen.uncordons if r < freed] == [seen.uncordons[0]], (freed, seen)
    else:
        assert_kept_or_undone_once(seen, owner, cycles=0)
        assert "Performing a best-effort uncordon" in fleet.log_text(node) and LEAVING in fleet.log_text(node)


@pytest.mark.parametrize("owner", OWNERS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_quarantine_ended_by_unquarantine(
    k8s: TestEnv, make_fleet: MakeFleet, backend: str, owner: str
) -> None:
    args = (f"--lock-backend={backend}", "--drain-timeout=3s", "--drain-escalation=quarantine")
    fleet, ns, (node,) = make_fleet(args=args)
    let_go = guard(k8s, node)
    start = before_cycle(k8s, node, owner)
    fleet.touch(node)
    assert fleet.wait_for(
        lambda: memory(k8s, node) == {QUARANTINED_ANNOTATION} and node not in holders(k8s, backend, ns),
        timeout=90,
    ), fleet.log_text(node)
    assert unschedulable(k8s, node), "a quarantined node stays cordoned"
    let_go()
    kubeconfig = k8s.kubeconfig_for("carol", ["system:masters"])
    done = run("unquarantine", node, kubeconfig=kubeconfig)
    assert done.returncode == 0, done.stderr
    said = "uncordoned" if owner == "pykured" else "left cordoned (not cordoned by pykured)"
    assert done.stdout.startswith(f"node {node}: quarantine ended") and said in done.stdout, done.stdout
    # back in the roll: the node still needs its reboot, so a new cycle drains and reboots it
    assert fleet.wait_for(ended(k8s, fleet, backend, ns, node, owner), timeout=120), fleet.log_text(node)
    kube = k8s.kube()
    seen = flips(kube, start)
    assert_kept_or_undone_once(seen, owner, cycles=2)
    if owner == "pykured":  # undone once by unquarantine (the same write removed the record), never before
        ended_at = seen.node_at(seen.uncordons[0])
        assert QUARANTINED_ANNOTATION not in (ended_at["metadata"].get("annotations") or {}), seen
        quarantined = [
            r
            for r, _v, o in seen.changes
            if QUARANTINED_ANNOTATION in (o["metadata"].get("annotations") or {})
        ]
        assert quarantined and seen.cordons[0] < quarantined[0] < seen.uncordons[0], (quarantined, seen)
