"""Zone pacing's logic on FakeKube: unlabelled nodes, group slots freed, a crashed group slot's grace (the
race of 3 zones x 3 nodes on the real API server: tests/e2e/lock/test_paced.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pykured.lock.paced import GroupPacedLock, node_label_lookup
from tests.fakes import FakeKube
from tests.lock.conftest import T_NS, make_lease_lock

ZONE = "topology.kubernetes.io/zone"


def add_nodes(kube: FakeKube, *names: str, labels: Mapping[str, str] | None = None) -> tuple[str, ...]:
    for name in names:
        kube.add_node(name, labels=labels)
    return names


def paced(kube: Any, ns: str, node: str, *, concurrency: int, limit: int = 1) -> GroupPacedLock:
    return GroupPacedLock(
        make_lease_lock(kube, ns, node, concurrency=concurrency),
        kube,
        namespace=ns,
        prefix="pykured-lock",
        label=ZONE,
        limit=limit,
        group_of=node_label_lookup(kube, ZONE),
    )


def test_unlabelled_nodes_are_paced_by_the_cluster_limit_only_and_slots_are_freed(kube: FakeKube) -> None:
    ns = "kube-system"
    a1, a2 = add_nodes(kube, "a1", "a2", labels={ZONE: "zone-a"})
    (plain,) = add_nodes(kube, "plain")
    lock_a1, lock_a2, lock_plain = (paced(kube, ns, n, concurrency=3) for n in (a1, a2, plain))
    now = T_NS
    assert lock_a1.acquire(unschedulable=False, now_ns=now).acquired
    assert lock_a1.acquire(unschedulable=False, now_ns=now).reentrant
    refused = lock_a2.acquire(unschedulable=False, now_ns=now)
    assert not refused.acquired and refused.holder_names == a1
    assert lock_plain.acquire(unschedulable=False, now_ns=now).acquired
    assert lock_a1.group_holders() == {"zone-a": [a1]}
    assert lock_a1.release()
    assert lock_a1.group_holders() == {}
    assert lock_a2.acquire(unschedulable=False, now_ns=T_NS + 1).acquired


def test_a_group_slot_left_by_a_crash_is_stale_after_the_grace(kube: FakeKube) -> None:
    ns = "kube-system"
    a1, a2 = add_nodes(kube, "a1", "a2", labels={ZONE: "zone-a"})
    lock_a1, lock_a2 = (paced(kube, ns, n, concurrency=1) for n in (a1, a2))
    now = T_NS
    # a1 takes its group slot and "crashes" before the cluster slot: simulate with the cluster slot taken by
    # someone else so a1's cluster acquire fails and it gives the group slot back
    slot, fresh, _ = lock_a1._take_group_slot(a1, "zone-a", now)
    assert slot is not None and fresh
    assert not lock_a2.acquire(unschedulable=False, now_ns=now).acquired  # within the grace: counts
    later = now + 31 * 1_000_000_000
    assert lock_a2.acquire(unschedulable=False, now_ns=later).acquired  # stale: taken over
