"""Zone pacing's logic on FakeKube: unlabelled nodes, group slots freed, a crashed group slot's grace (the
race of 3 zones x 3 nodes on the real API server: tests/e2e/lock/test_paced.py)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pytest

from pykured.lock.budget import Budget
from pykured.lock.paced import RECHECK_MARGIN, GroupPacedLock, node_label_lookup
from tests.fakes import FakeKube
from tests.lock.conftest import T_NS, FaultyKube, OwnNodeOnly, make_annotation_lock, make_lease_lock

ZONE = "topology.kubernetes.io/zone"
S = 1_000_000_000


def add_nodes(kube: FakeKube, *names: str, labels: Mapping[str, str] | None = None) -> tuple[str, ...]:
    for name in names:
        kube.add_node(name, labels=labels)
    return names


def labelled(kube: FakeKube, zone: str, n: int) -> tuple[str, ...]:
    """``n`` Nodes of ``zone``."""
    return add_nodes(kube, *(f"{zone}-{i}" for i in range(n)), labels={ZONE: zone})


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


def test_the_cluster_locks_watched_is_forwarded(kube: Any, lock_ns: str) -> None:
    """A node refused by its group waits as the cluster lock does: on the Lease watch (the daemon then looks
    again only at ``--period``), or polling kured's annotation."""
    assert paced(kube, lock_ns, "a1", concurrency=1).watched is True
    over_annotation = GroupPacedLock(
        make_annotation_lock(kube, lock_ns, "a1"),
        kube,
        namespace=lock_ns,
        prefix="pykured-lock",
        label=ZONE,
        limit=1,
        group_of=node_label_lookup(kube, ZONE),
    )
    assert over_annotation.watched is False


def waits(lock: GroupPacedLock, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The timeouts of the cluster lock's waits (which return at once)."""
    seen: list[float] = []
    monkeypatch.setattr(lock.inner, "wait_for_change", seen.append)
    return seen


def test_a_waiter_refused_by_a_holder_of_a_cluster_slot_waits_the_whole_wait(
    kube: FakeKube, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The holder frees its cluster slot first: that change ends the wait, nothing else need."""
    ns = "kube-system"
    a1, a2 = add_nodes(kube, "a1", "a2", labels={ZONE: "zone-a"})
    lock_a1, lock_a2 = (paced(kube, ns, n, concurrency=2) for n in (a1, a2))
    assert lock_a1.acquire(unschedulable=False, now_ns=T_NS).acquired
    assert not lock_a2.acquire(unschedulable=False, now_ns=T_NS + 40 * S).acquired
    seen = waits(lock_a2, monkeypatch)
    lock_a2.wait_for_change(3600.0)
    assert seen == [3600.0]


def test_a_waiter_refused_by_a_group_holder_without_a_cluster_slot_looks_again_when_it_is_stale(
    kube: FakeKube, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its slot goes stale after the grace (30 s) with no change of the cluster lock: the wait ends by then,
    and the next pass takes the slot over."""
    ns = "kube-system"
    a1, a2 = add_nodes(kube, "a1", "a2", labels={ZONE: "zone-a"})
    lock_a1, lock_a2 = (paced(kube, ns, n, concurrency=1) for n in (a1, a2))
    slot, fresh, _ = lock_a1._take_group_slot(a1, "zone-a", T_NS)  # crashed before its cluster slot
    assert slot is not None and fresh
    assert not lock_a2.acquire(unschedulable=False, now_ns=T_NS + 10 * S).acquired
    seen = waits(lock_a2, monkeypatch)
    lock_a2.wait_for_change(3600.0)
    (bound,) = seen
    assert 19.0 < bound <= 20.0 + RECHECK_MARGIN  # the 20 s of grace left, and the margin
    assert lock_a2.acquire(unschedulable=False, now_ns=T_NS + 31 * S).acquired
    lock_a2.wait_for_change(3600.0)
    assert seen[1:] == [3600.0]  # taken: no bound left over


def test_a_share_per_label_value_is_taken_of_that_values_nodes(kube: FakeKube) -> None:
    """``--concurrency-per-label=50%``: each zone's limit is half of its Nodes (at least one), counted from
    the Nodes carrying the value; a zone that cannot be counted allows one."""
    big = labelled(kube, "big", 4)
    small = labelled(kube, "small", 1)
    counted: list[str] = []

    def count(value: str) -> int | None:
        counted.append(value)
        return len(kube.list_nodes(label_selector=f"{ZONE}={value}")["items"])

    def shared(node: str) -> GroupPacedLock:
        return GroupPacedLock(
            make_lease_lock(kube, "kube-system", node, concurrency=5), kube, namespace="kube-system",
            prefix="pykured-lock", label=ZONE, limit=50, group_of=node_label_lookup(kube, ZONE),
            share=Budget(50, percent=True), group_count=count,
        )  # fmt: skip

    assert [shared(n).acquire(unschedulable=False, now_ns=T_NS).acquired for n in big] == [
        True,
        True,
        False,
        False,
    ]
    assert shared(small[0]).acquire(unschedulable=False, now_ns=T_NS).acquired
    assert shared(big[0]).group_limit("big") == 2 and shared(big[0]).group_limit("small") == 1
    assert set(counted) == {"big", "small"}


def test_a_share_of_an_uncountable_group_allows_one(kube: FakeKube) -> None:
    a, b = labelled(kube, "z", 2)

    def shared(node: str) -> GroupPacedLock:
        return GroupPacedLock(
            make_lease_lock(kube, "kube-system", node, concurrency=5), kube, namespace="kube-system",
            prefix="pykured-lock", label=ZONE, limit=100, group_of=node_label_lookup(kube, ZONE),
            share=Budget(100, percent=True), group_count=lambda _value: None,
        )  # fmt: skip

    assert shared(a).acquire(unschedulable=False, now_ns=T_NS).acquired
    assert not shared(b).acquire(unschedulable=False, now_ns=T_NS).acquired


def test_under_the_policies_a_stale_group_slot_of_another_node_stays_its_holders(
    kube: FakeKube, caplog: pytest.LogCaptureFixture
) -> None:
    """The take of another node's stale group slot is refused by the Lease policy: it counts as held (said
    once, not written again) until its holder frees it; a group slot is owned by its holder's Node."""
    ns = "kube-system"
    a1, a2 = add_nodes(kube, "a1", "a2", labels={ZONE: "zone-a"})
    lock_a1 = paced(OwnNodeOnly(kube, a1), ns, a1, concurrency=1)
    counted = FaultyKube(OwnNodeOnly(kube, a2))
    lock_a2 = paced(counted, ns, a2, concurrency=1)
    slot, fresh, _ = lock_a1._take_group_slot(a1, "zone-a", T_NS)  # a1 crashes between its two writes
    assert slot is not None and fresh
    owners = kube.get_lease(ns, slot)["metadata"]["ownerReferences"]
    assert [(o["kind"], o["name"], o["uid"]) for o in owners] == [("Node", a1, "uid-a1")]
    later = T_NS + 31 * S
    caplog.set_level(logging.INFO)
    for _ in range(3):
        result = lock_a2.acquire(unschedulable=False, now_ns=later)
        assert not result.acquired and result.holder_names == a1
    assert counted.calls.get("replace_lease") == 1
    lines = [r.getMessage() for r in caplog.records if "the admission policy" in r.getMessage()]
    assert len(lines) == 1 and f"take the stale group slot {slot}, held by node {a1}" in lines[0], lines
    lock_a1._free_group_slots(a1)  # its holder frees it (its next take, or its release)
    assert lock_a2.acquire(unschedulable=False, now_ns=later).acquired
