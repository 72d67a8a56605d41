"""The Lease lock's logic: its format and watched copy (pure), and on FakeKube its takes, releases, faults and
liveness (tests/e2e/lock/test_lease.py: watched hand-overs, 410 Gone, races, kured's RBAC on the real API
server)."""

from __future__ import annotations

import logging
import re
import threading
import time
from typing import TYPE_CHECKING, Any, cast

import pytest

from pykured.core.errors import KubeError
from pykured.gocompat.goflags import Duration
from pykured.lock.budget import Budget
from pykured.lock.lease import (
    LOCK_LABEL,
    MANAGED_BY,
    UNSCHEDULABLE_ANNOTATION,
    LeaseLock,
    format_micro_time,
    lease_body,
    lease_duration_seconds,
    lease_entry,
)
from pykured_dev.eventually import eventually
from tests.fakes import FakeKube
from tests.lock.conftest import T_NS, FaultyKube, OwnNodeOnly, make_lease_lock

if TYPE_CHECKING:
    from pykured.kube.client import Kube

MICRO_RE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


# -- pure helpers --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (1_782_818_956_917_242_595, "2026-06-30T11:29:16.917242Z"),
        (1_782_818_956_000_000_000, "2026-06-30T11:29:16.000000Z"),
        (0, "1970-01-01T00:00:00.000000Z"),
    ],
    ids=["truncates-to-micros", "zero-fraction-kept", "epoch"],
)
def test_format_micro_time(ns: int, text: str) -> None:
    assert format_micro_time(ns) == text


@pytest.mark.parametrize(
    ("ttl", "seconds"),
    [("0s", None), ("1ns", 1), ("1s", 1), ("1.5s", 2), ("30m", 1800)],
    ids=["zero-unset", "rounds-up-ns", "one-second", "rounds-up", "thirty-minutes"],
)
def test_lease_duration_seconds(ttl: str, seconds: int | None) -> None:
    assert lease_duration_seconds(Duration.parse(ttl)) == seconds


@pytest.mark.parametrize(
    ("spec", "annotations", "expected"),
    [
        ({}, {}, None),
        ({"holderIdentity": ""}, {}, None),
        (
            {"holderIdentity": "n", "acquireTime": "2026-06-30T11:29:16.917242Z", "leaseDurationSeconds": 60},
            {UNSCHEDULABLE_ANNOTATION: "true"},
            ("n", True, 1_782_818_956_917_242_000, 60_000_000_000),
        ),
        (
            {"holderIdentity": "n", "renewTime": "2026-06-30T11:29:16.000001Z"},
            {},
            ("n", False, 1_782_818_956_000_001_000, 0),
        ),
    ],
    ids=["empty-spec", "empty-holder", "held-with-ttl", "renew-time-only"],
)
def test_lease_entry(
    spec: dict[str, Any], annotations: dict[str, str], expected: tuple[Any, ...] | None
) -> None:
    entry = lease_entry({"metadata": {"annotations": annotations}, "spec": spec})
    got = None if entry is None else (entry.node_id, entry.unschedulable, entry.created_ns, entry.ttl_ns)
    assert got == expected


def test_the_watched_copy_never_goes_back_to_an_older_version() -> None:
    """Our write's answer and the watch's events race: whichever comes second, the copy keeps the newer
    version of each Lease (resourceVersions are etcd's revisions), and events older than the last LIST are
    skipped."""
    lock = LeaseLock(
        cast("Kube", None), namespace="ns", prefix="p", node_id="a", concurrency=1, ttl=Duration(0)
    )
    lock._copy = {}

    def lease(rv: str, holder: str | None) -> dict[str, Any]:
        return {"metadata": {"name": "p-0", "resourceVersion": rv}, "spec": {"holderIdentity": holder}}

    def version() -> str:
        assert lock._copy is not None
        return str(lock._copy["p-0"]["metadata"]["resourceVersion"])

    lock._keep(lease("12", "a"))  # our take's answer came before the watch's older "free"
    assert lock._apply({"type": "MODIFIED", "object": lease("11", None)})
    assert version() == "12"
    assert lock._apply({"type": "MODIFIED", "object": lease("12", "a")})  # its echo
    assert lock._apply({"type": "MODIFIED", "object": lease("13", None)})  # a newer write (a release)
    assert version() == "13"
    lock._keep(lease("12", "a"))  # an answer that comes after the watch brought a newer version
    assert version() == "13"
    lock._floor = 20  # a LIST at 20: the watch's events up to it are older
    assert lock._apply({"type": "MODIFIED", "object": lease("19", "b")})
    assert version() == "13"
    assert lock._rv == "19"  # the watch goes on from where it is


def test_a_lease_to_write_leaves_the_lease_it_was_read_as_alone() -> None:
    """The body of a take is built on a copy: the lease as read (it may be the watched copy's) stays as read,
    so a take that loses its race (409) never leaves "held by me" in the copy."""
    read = {
        "metadata": {"name": "pykured-lock-0", "namespace": "ns", "resourceVersion": "7", "labels": {}},
        "spec": {"holderIdentity": "other", "acquireTime": "2026-01-01T00:00:00.000000Z"},
    }
    before = repr(read)
    body = lease_body(
        "ns", "pykured-lock-0", read, labels={LOCK_LABEL: "pykured-lock"}, holder="me", now_ns=0
    )
    assert body["spec"]["holderIdentity"] == "me" and body["metadata"]["resourceVersion"] == "7"
    assert repr(read) == before


def test_a_take_that_loses_its_race_is_not_held_on_the_next_look(kube: FakeKube, nodes: Any) -> None:
    """A waiter whose copy still shows the slot free (the taker's news not yet in) writes, gets 409, and its
    next acquire from the same copy must not find itself holding: the copy never took the lost write."""
    namespace = "kube-system"
    first, second = nodes(2)
    taker = make_lease_lock(kube, namespace, first)
    assert taker.acquire(unschedulable=False, now_ns=T_NS).acquired
    assert taker.release()  # the slot's Lease exists, free
    late = make_lease_lock(kube, namespace, second)
    assert late.holding(now_ns=T_NS) is None  # the pass's read: the slot is free in this copy
    assert taker.acquire(unschedulable=False, now_ns=T_NS).acquired
    with late._changed:  # the stale copy, as a watch that has not yet brought the take would leave it
        late._fresh_until = time.monotonic() + 60
    assert not late.acquire(unschedulable=False, now_ns=T_NS).acquired  # its write: 409
    with late._changed:
        late._fresh_until = time.monotonic() + 60  # the same copy again
        held = [lease_entry(lease) for lease in (late._copy or {}).values()]
        assert all(entry is None or entry.node_id != second for entry in held)
    assert not late.acquire(unschedulable=False, now_ns=T_NS).acquired
    entry = lease_entry(kube.get_lease(namespace, "pykured-lock-0"))
    assert entry is not None and entry.node_id == first


def test_acquire_creates_a_labelled_lease(kube: FakeKube, nodes: Any) -> None:
    namespace = "kube-system"
    (node,) = nodes(1)
    lock = make_lease_lock(kube, namespace, node, concurrency=2, ttl=Duration.parse("1.5s"))
    result = lock.acquire(unschedulable=True, now_ns=T_NS)
    assert result.acquired and not result.reentrant
    lease = kube.get_lease(namespace, "pykured-lock-0")
    spec, meta = lease["spec"], lease["metadata"]
    assert spec["holderIdentity"] == node
    assert MICRO_RE.fullmatch(spec["acquireTime"]) and spec["renewTime"] == spec["acquireTime"]
    assert spec["leaseDurationSeconds"] == 2
    assert meta["labels"] == {MANAGED_BY: "pykured", LOCK_LABEL: "pykured-lock"}
    assert meta["annotations"] == {UNSCHEDULABLE_ANNOTATION: "true"}
    again = lock.acquire(unschedulable=False, now_ns=T_NS)
    assert again.acquired and again.reentrant
    assert (
        kube.get_lease(namespace, "pykured-lock-0")["metadata"]["resourceVersion"] == meta["resourceVersion"]
    )
    entry = lock.holding(now_ns=T_NS)
    assert entry is not None and entry.unschedulable


def test_release_keeps_the_lease_and_counts_transitions(kube: FakeKube, nodes: Any) -> None:
    namespace = "kube-system"
    a, b = nodes(2)
    lock_a, lock_b = make_lease_lock(kube, namespace, a), make_lease_lock(kube, namespace, b)
    assert lock_a.acquire(unschedulable=False, now_ns=T_NS).acquired
    assert lock_a.release() is True
    lease = kube.get_lease(namespace, "pykured-lock-0")
    assert "holderIdentity" not in lease["spec"] and "leaseDurationSeconds" not in lease["spec"]
    assert UNSCHEDULABLE_ANNOTATION not in (lease["metadata"].get("annotations") or {})
    assert lock_b.acquire(unschedulable=False, now_ns=T_NS).acquired
    assert kube.get_lease(namespace, "pykured-lock-0")["spec"]["leaseTransitions"] == 1
    assert lock_a.release() is False


@pytest.mark.parametrize(
    ("method", "when", "status", "acquired"),
    [
        ("create_lease", "before", 500, False),
        ("create_lease", "after", 0, True),
        ("replace_lease", "after", 504, True),
        ("replace_lease", "before", 0, False),
    ],
    ids=["create-500", "create-timeout-landed", "update-504-landed", "update-timeout-not-sent"],
)
def test_ambiguous_write_is_settled_by_relisting(
    kube: FakeKube,
    nodes: Any,
    caplog: pytest.LogCaptureFixture,
    method: str,
    when: str,
    status: int,
    acquired: bool,
) -> None:
    namespace = "kube-system"
    node, other = nodes(2)
    if method == "replace_lease":  # make the slot exist, free
        first = make_lease_lock(kube, namespace, other)
        assert first.acquire(unschedulable=False, now_ns=T_NS).acquired
        assert first.release()
    faulty = FaultyKube(kube)
    faulty.fail(method, when, KubeError("injected", status=status))
    with caplog.at_level(logging.WARNING):
        result = make_lease_lock(faulty, namespace, node).acquire(unschedulable=False, now_ns=T_NS)
    assert result.acquired is acquired
    assert "re-reading" in caplog.text
    holders = [lease_entry(item) for item in kube.list_leases(namespace)["items"]]
    assert [h.node_id for h in holders if h] == ([node] if acquired else [])


def test_lock_of_a_deleted_node_is_freed(
    kube: FakeKube, nodes: Any, caplog: pytest.LogCaptureFixture
) -> None:
    namespace = "kube-system"
    gone, waiting = nodes(2)
    assert make_lease_lock(kube, namespace, gone).acquire(unschedulable=False, now_ns=T_NS).acquired
    freed: list[str] = []
    assert not make_lease_lock(kube, namespace, waiting).acquire(unschedulable=False, now_ns=T_NS).acquired
    kube.delete_node(gone)
    lock = make_lease_lock(kube, namespace, waiting, on_gone_holder=freed.append)
    with caplog.at_level(logging.WARNING):
        assert lock.acquire(unschedulable=False, now_ns=T_NS).acquired
    assert freed == [gone]
    assert f"Lock held by node {gone} which no longer exists: releasing" in caplog.text


def test_manual_holder_is_never_freed(kube: FakeKube, nodes: Any) -> None:
    namespace = "kube-system"
    (node,) = nodes(1)
    manual = make_lease_lock(kube, namespace, "manual")
    assert manual.acquire(unschedulable=False, now_ns=T_NS).acquired
    result = make_lease_lock(kube, namespace, node).acquire(unschedulable=False, now_ns=T_NS)
    assert not result.acquired and result.holder_names == "manual"


def test_lowered_concurrency_counts_leftover_slots(kube: FakeKube, nodes: Any) -> None:
    namespace = "kube-system"
    *holders, late = nodes(3)
    for name in holders:
        assert (
            make_lease_lock(kube, namespace, name, concurrency=2)
            .acquire(unschedulable=False, now_ns=T_NS)
            .acquired
        )
    make_lease_lock(kube, namespace, holders[0], concurrency=2).release()
    # slot 1 is still held; with --concurrency=1 only slot 0 exists, but the holder of slot 1 counts
    result = make_lease_lock(kube, namespace, late, concurrency=1).acquire(unschedulable=False, now_ns=T_NS)
    assert not result.acquired and result.holder_names == holders[1]


def test_the_pass_after_a_release_reads_the_released_copy(kube: FakeKube, nodes: Any) -> None:
    """An agent after its reboot has no watch: its pass lists the slots once (``holding``), releases its slot
    from that read, and the pass right after the release reads the answer to that write: one LIST."""
    namespace = "kube-system"
    (node,) = nodes(1)
    make_lease_lock(kube, namespace, node).acquire(unschedulable=False, now_ns=T_NS)
    faulty = FaultyKube(kube)
    after_reboot = make_lease_lock(faulty, namespace, node)
    assert after_reboot.holding(now_ns=T_NS, honour_ttl=False) is not None
    assert after_reboot.release()
    assert after_reboot.holding(now_ns=T_NS, honour_ttl=False) is None
    assert lease_calls(faulty) == {"list_leases": 1, "replace_lease": 1}
    assert lease_entry(kube.get_lease(namespace, "pykured-lock-0")) is None


def lease_calls(faulty: FaultyKube) -> dict[str, int]:
    """The Lease calls a lock made (the liveness check's GETs of Nodes left out)."""
    return {k: v for k, v in faulty.calls.items() if "lease" in k}


# -- the watched copy on FakeKube's watch (the real API server's watch: tests/e2e/lock/test_lease.py) --------


def test_a_compacted_watch_version_relists_and_the_wait_ends_at_the_release(
    kube: FakeKube, nodes: Any
) -> None:
    """The watch call ends, its next call's version was compacted (410 Gone as an ERROR event): the watch
    lists again once and watches on from the new version; the wait goes on and ends when the slot frees."""
    namespace = "kube-system"
    holder, waiter = nodes(2)
    holding = make_lease_lock(kube, namespace, holder)
    assert holding.acquire(unschedulable=False, now_ns=T_NS).acquired
    faulty = FaultyKube(kube)
    waiting = make_lease_lock(faulty, namespace, waiter)
    assert not waiting.acquire(unschedulable=False, now_ns=T_NS).acquired
    assert lease_calls(faulty) == {"list_leases": 1}
    waited = threading.Thread(target=waiting.wait_for_change, args=(30,), daemon=True)
    waited.start()
    assert kube.wait_for_watches(1)
    nodes(1)  # a write the Lease watch does not see, then compacted: the watch's version is too old
    kube.compact()
    kube.end_watches()
    assert eventually(lambda: faulty.calls.get("watch_leases") == 3 and kube.open_watches == 1, timeout=10)
    assert faulty.calls["list_leases"] == 2  # one LIST after the 410
    assert waited.is_alive()  # the slot is still held: the wait goes on
    holding.release()
    waited.join(timeout=10)
    assert not waited.is_alive()
    assert waiting.acquire(unschedulable=False, now_ns=T_NS).acquired
    # the take read the watched copy
    assert lease_calls(faulty) == {"list_leases": 2, "watch_leases": 3, "replace_lease": 1}
    kube.end_watches()


def test_a_freed_slot_ends_the_wait_of_a_watching_waiter(kube: FakeKube, nodes: Any) -> None:
    """The release reaches the waiter through its watch: no LIST, and its take reads the watched copy."""
    namespace = "kube-system"
    holder, waiter = nodes(2)
    holding = make_lease_lock(kube, namespace, holder)
    faulty = FaultyKube(kube)
    waiting = make_lease_lock(faulty, namespace, waiter)
    assert holding.acquire(unschedulable=False, now_ns=T_NS).acquired
    assert not waiting.acquire(unschedulable=False, now_ns=T_NS).acquired
    waited = threading.Thread(target=waiting.wait_for_change, args=(30,), daemon=True)
    waited.start()
    assert kube.wait_for_watches(1)
    holding.release()
    waited.join(timeout=10)
    assert not waited.is_alive()
    assert waiting.acquire(unschedulable=False, now_ns=T_NS).acquired
    assert lease_calls(faulty) == {"list_leases": 1, "watch_leases": 1, "replace_lease": 1}
    entry = lease_entry(kube.get_lease(namespace, "pykured-lock-0"))
    assert entry is not None and entry.node_id == waiter
    kube.end_watches()


@pytest.mark.parametrize(
    ("count", "budget", "allowed"),
    [(8, Budget(25, percent=True), 2), (100, Budget(50, percent=True), 3),
     (None, Budget(50, percent=True), 1), (0, Budget(50, percent=True), 1), (None, Budget(2), 2)],
    ids=["quarter-of-8", "concurrency-lower", "unknown", "zero", "a-number"],
)  # fmt: skip
def test_max_unavailable_on_the_lease_lock(
    kube: FakeKube, nodes: Any, count: int | None, budget: Budget, allowed: int
) -> None:
    """``--max-unavailable``: the lower of --concurrency and the budget of the count read at each acquire; an
    unknown count allows one, never --concurrency."""
    namespace = "kube-system"
    names = nodes(allowed + 1)
    reads: list[int] = []

    def counted() -> int | None:
        reads.append(1)
        return count

    locks = [make_lease_lock(kube, namespace, n, concurrency=3, budget=budget, count=counted) for n in names]
    for lock in locks[:allowed]:
        assert lock.acquire(unschedulable=False, now_ns=T_NS).acquired
    refused = locks[-1].acquire(unschedulable=False, now_ns=T_NS)
    assert not refused.acquired and len(refused.holders) == allowed
    assert locks[-1].concurrency == allowed
    assert sorted(lease["metadata"]["name"] for lease in kube.list_leases(namespace)["items"]) == [
        f"pykured-lock-{i}" for i in range(allowed)
    ]
    assert bool(reads) is budget.percent  # a number of nodes needs no count
    assert locks[0].release()
    assert locks[-1].acquire(unschedulable=False, now_ns=T_NS).acquired


def test_a_lower_budget_counts_the_holders_of_every_slot(kube: FakeKube, nodes: Any) -> None:
    """The count shrank (or the budget was lowered): holders of slots above the new limit still count."""
    namespace = "kube-system"
    *holders, late = nodes(3)
    sizes = iter([8, 8, 4])
    for name in holders:
        lock = make_lease_lock(kube, namespace, name, concurrency=4, budget=Budget(25, percent=True),
                               count=lambda: next(sizes))  # fmt: skip
        assert lock.acquire(unschedulable=False, now_ns=T_NS).acquired
    make_lease_lock(kube, namespace, holders[0], concurrency=4).release()
    shrunk = make_lease_lock(kube, namespace, late, concurrency=4, budget=Budget(25, percent=True),
                             count=lambda: next(sizes))  # fmt: skip
    result = shrunk.acquire(unschedulable=False, now_ns=T_NS)
    assert not result.acquired and result.holder_names == holders[1]


def test_a_list_older_than_our_own_take_never_rolls_the_copy_back(kube: FakeKube) -> None:
    """One agent, two drivers, one lock: the daemon's pass lists the slots while FleetLock takes one. The
    LIST answers as of a version before the take; its answer must not replace the take in the copy (the next
    look would call the slot lost, clean the cycle's memory up and leave the slot held by nobody's cycle)."""
    namespace = "kube-system"
    kube.add_node("n1")
    faulty = FaultyKube(kube)
    lock = make_lease_lock(faulty, namespace, "n1")
    before = kube.list_leases(
        namespace, label_selector=f"{LOCK_LABEL}=pykured-lock"
    )  # the daemon's LIST, begun
    assert lock.acquire(unschedulable=False, now_ns=time.time_ns()).acquired  # FleetLock's take lands
    faulty.replaced["list_leases"] = lambda *_a, **_kw: before  # …and the LIST's answer comes back after it
    lock._list(keep=True)
    entry = lock.holding(now_ns=time.time_ns())
    assert entry is not None and entry.node_id == "n1"
    # a LIST as of a later version is the truth again (here: the slot freed by someone else)
    assert lock.release()
    faulty.replaced.pop("list_leases")
    assert lock._list(keep=True) and lock.holding(now_ns=time.time_ns()) is None


# -- owners and the admission policies ---------------------------------------------------------------------


def test_a_taken_slot_is_owned_by_its_holders_node_and_a_free_one_by_none(kube: FakeKube, nodes: Any) -> None:
    """The garbage collector deletes a slot with its holder's Node (the owner's uid, read at the take); a Node
    that cannot be read leaves the slot without an owner, as before."""
    namespace = "kube-system"
    (node,) = nodes(1)
    lock = make_lease_lock(kube, namespace, node)
    assert lock.acquire(unschedulable=False, now_ns=T_NS).acquired
    owners = kube.get_lease(namespace, "pykured-lock-0")["metadata"]["ownerReferences"]
    assert owners == [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": f"uid-{node}"}]
    assert lock.release()
    assert "ownerReferences" not in kube.get_lease(namespace, "pykured-lock-0")["metadata"]
    ghost = make_lease_lock(kube, namespace, "not-a-node")
    assert ghost.acquire(unschedulable=False, now_ns=T_NS).acquired
    assert "ownerReferences" not in kube.get_lease(namespace, "pykured-lock-0")["metadata"]


def policy_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "the admission policy" in r.getMessage()]


def test_an_expired_slot_of_another_node_refused_by_the_policy_counts_as_held(
    kube: FakeKube, nodes: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """--lock-ttl under the policies: the take of another node's expired slot is refused (403); the slot then
    counts as held (in the result, the holders, the wait's copy), the refusal is said once and not written
    again, until an operator frees the slot (or its holder does, or takes it anew)."""
    namespace = "kube-system"
    holder, waiter = nodes(2)
    ttl = Duration.parse("10s")
    theirs = make_lease_lock(OwnNodeOnly(kube, holder), namespace, holder, ttl=ttl)
    assert theirs.acquire(unschedulable=False, now_ns=T_NS).acquired
    later = T_NS + 60 * 1_000_000_000
    counted = FaultyKube(OwnNodeOnly(kube, waiter))
    mine = make_lease_lock(counted, namespace, waiter, ttl=ttl)
    caplog.set_level(logging.INFO)
    for _ in range(3):
        result = mine.acquire(unschedulable=False, now_ns=later)
        assert not result.acquired and result.holder_names == holder
    assert counted.calls.get("replace_lease") == 1  # one write, refused; then none
    (line,) = policy_lines(caplog)
    assert f"take the expired slot pykured-lock-0, held by node {holder}" in line
    assert "pykured-agent-leases" in line and f"pykured lock release {holder}" in line
    assert [e.node_id for e in mine.holders(now_ns=later)] == [holder]
    assert not mine._free_in_copy()
    # an operator's release (not an agent's token): the slot is free, and taken
    assert make_lease_lock(kube, namespace, "").release(node_id=holder)
    assert mine.acquire(unschedulable=False, now_ns=later).acquired
    # without the policies the same take succeeds, as kured's TTL
    assert mine.release()
    assert theirs.acquire(unschedulable=False, now_ns=T_NS).acquired
    assert (
        make_lease_lock(kube, namespace, waiter, ttl=ttl).acquire(unschedulable=False, now_ns=later).acquired
    )


def test_a_deleted_holders_slot_refused_by_the_policy_waits_for_the_garbage_collector(
    kube: FakeKube, nodes: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Under the policies the liveness check's free of a deleted Node's slot is refused: the slot stays held
    (said once, not written again) until the garbage collector deletes it (its owner is that Node)."""
    namespace = "kube-system"
    holder, waiter = nodes(2)
    assert make_lease_lock(kube, namespace, holder).acquire(unschedulable=False, now_ns=T_NS).acquired
    del kube.nodes[holder]
    counted = FaultyKube(OwnNodeOnly(kube, waiter))
    mine = make_lease_lock(counted, namespace, waiter, liveness_interval=0.0)
    caplog.set_level(logging.INFO)
    for _ in range(3):
        result = mine.acquire(unschedulable=False, now_ns=T_NS)
        assert not result.acquired and result.holder_names == holder
    assert counted.calls.get("replace_lease") == 1
    (line,) = policy_lines(caplog)
    assert f"free the deleted Node's slot pykured-lock-0, held by node {holder}" in line
    kube.delete_lease(namespace, "pykured-lock-0")  # the garbage collector
    assert mine.acquire(unschedulable=False, now_ns=T_NS).acquired
