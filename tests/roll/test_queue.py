"""The lock queue of ``--resume-rolls`` on FakeKube's Leases with an injected clock: entries, the order, the
grace, leaving (tests/e2e/roll/test_queue.py: the same queue without rights on Leases, on the real server)."""

from __future__ import annotations

import datetime

from pykured.roll import rule as turns
from pykured.roll.order import Member
from pykured.roll.queue import RollQueue, queue_lease_name
from tests.fakes import FakeClock, FakeKube

PREFIX = "kured-lock"
NS = "kube-system"
T = datetime.datetime(2026, 11, 28, 2, 0, tzinfo=datetime.UTC)
SECOND = datetime.timedelta(seconds=1)


def ns_of(clock: FakeClock) -> int:
    return int(clock().timestamp() * 1_000_000_000)


def queue(
    kube: FakeKube, clock: FakeClock, node: str, *, grace: float = 15.0, refresh: float = 60.0
) -> RollQueue:
    return RollQueue(
        kube,
        namespace=NS,
        prefix=PREFIX,
        node=node,
        period=3600,
        grace=grace,
        refresh=refresh,
        clock_ns=lambda: ns_of(clock),
    )


def fresh(node: str) -> Member:
    return Member(node, last_reboot=None, waiting_since=T)


def again(node: str) -> Member:  # rebooted in this roll, needs a reboot again
    return Member(
        node, last_reboot=T + datetime.timedelta(hours=2), waiting_since=T + datetime.timedelta(hours=30)
    )


def setup() -> tuple[FakeKube, FakeClock]:
    return FakeKube(), FakeClock(T + datetime.timedelta(hours=31))


def test_a_node_rebooted_in_the_roll_waits_for_one_that_was_not() -> None:
    kube, clock = setup()
    a, b = queue(kube, clock, "node-a"), queue(kube, clock, "node-b")
    b.note(turns.WINDOW, fresh("node-b"), now_ns=ns_of(clock))  # b waits for its window: still ahead
    turn = a.turn(again("node-a"), holders=[], concurrency=1)
    assert not turn.go and turn.ahead == ("node-b",)
    assert b.turn(fresh("node-b"), holders=[], concurrency=1).go
    # b took the lock (holds a slot) and left the queue: a's turn
    b.leave()
    assert a.turn(again("node-a"), holders=["node-b"], concurrency=2).go
    lease = kube.get_lease(NS, queue_lease_name(PREFIX, "node-b"))
    assert not lease["spec"].get("holderIdentity") and turns.ENTRY_ANNOTATION not in lease["metadata"].get(
        "annotations", {}
    )
    assert lease["metadata"]["labels"][turns.QUEUE_LABEL] == PREFIX


def test_the_entry_is_written_once_and_renewed_only_when_due() -> None:
    kube, clock = setup()
    q = queue(kube, clock, "node-a", refresh=60.0)
    name = queue_lease_name(PREFIX, "node-a")
    q.note(turns.WAITING, fresh("node-a"), now_ns=ns_of(clock))
    first = kube.get_lease(NS, name)
    assert first["spec"]["holderIdentity"] == "node-a"
    assert first["spec"]["acquireTime"].startswith("2026-11-28T02:00:00")  # waiting since
    clock.advance(59 * SECOND)
    q.note(turns.WAITING, fresh("node-a"), now_ns=ns_of(clock))
    assert kube.get_lease(NS, name)["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    clock.advance(SECOND)
    q.note(turns.WAITING, fresh("node-a"), now_ns=ns_of(clock))
    renewed = kube.get_lease(NS, name)
    assert renewed["metadata"]["resourceVersion"] != first["metadata"]["resourceVersion"]
    assert renewed["spec"]["renewTime"] > first["spec"]["renewTime"]
    q.note(turns.HELD, fresh("node-a"), now_ns=ns_of(clock))  # a change is written at once
    (entry,) = q.entries()
    assert entry.state == turns.HELD and entry.member == fresh("node-a")


def test_an_entry_replaced_under_the_agent_is_read_again_and_written() -> None:
    """A stale known copy (409) is re-read and the entry written over it, never lost."""
    kube, clock = setup()
    q = queue(kube, clock, "node-a", refresh=60.0)
    q.note(turns.WAITING, fresh("node-a"), now_ns=ns_of(clock))
    name = queue_lease_name(PREFIX, "node-a")
    other = kube.get_lease(NS, name)
    other["metadata"].setdefault("annotations", {})["x"] = "y"
    kube.replace_lease(NS, name, other)
    q.note(turns.HELD, fresh("node-a"), now_ns=ns_of(clock))
    (entry,) = q.entries()
    assert entry.state == turns.HELD
    assert kube.calls("PUT", name) == 3  # ours, the other writer's, ours after the 409 and a re-read


def test_a_contender_that_leaves_the_free_slot_alone_is_passed_after_the_grace() -> None:
    kube, clock = setup()
    queue(kube, clock, "node-b").note(turns.WAITING, fresh("node-b"), now_ns=ns_of(clock))  # never goes
    a = queue(kube, clock, "node-a", grace=15.0)
    first = a.turn(again("node-a"), holders=[], concurrency=1)
    assert not first.go and first.wait_s <= 15.0
    clock.advance(14 * SECOND)
    assert not a.turn(again("node-a"), holders=[], concurrency=1).go
    clock.advance(SECOND)
    turn = a.turn(again("node-a"), holders=[], concurrency=1)
    assert turn.go and turn.skipped and turn.ahead == ("node-b",)


def test_the_grace_starts_again_when_a_contender_ahead_took_and_freed_a_slot_unseen() -> None:
    """A waiting agent wakes when a slot frees, not when one is taken: between two of its looks the node
    ahead took the slot, rebooted and freed it. The next node in line is not passed for the time the
    previous one took."""
    kube, clock = setup()
    b, c = queue(kube, clock, "node-b"), queue(kube, clock, "node-c")
    b.note(turns.WAITING, fresh("node-b"), now_ns=ns_of(clock))
    c.note(turns.WAITING, Member("node-c", last_reboot=None, waiting_since=T + SECOND), now_ns=ns_of(clock))
    a = queue(kube, clock, "node-a", grace=15.0)
    assert a.turn(again("node-a"), holders=[], concurrency=1).ahead == ("node-b", "node-c")
    b.leave()  # b takes the slot, reboots, frees it: a did not look meanwhile
    clock.advance(20 * SECOND)
    turn = a.turn(again("node-a"), holders=[], concurrency=1)
    assert not turn.go and turn.ahead == ("node-c",)
    clock.advance(15 * SECOND)
    turn = a.turn(again("node-a"), holders=[], concurrency=1)
    assert turn.go and turn.skipped and turn.ahead == ("node-c",)  # c left the slot alone for the grace


def test_a_restarted_agent_clears_the_entry_its_previous_process_left() -> None:
    kube, clock = setup()
    queue(kube, clock, "node-a").note(turns.WAITING, fresh("node-a"), now_ns=ns_of(clock))
    restarted = queue(kube, clock, "node-a")
    assert [e.node for e in restarted.entries()] == ["node-a"]
    restarted.leave()
    assert restarted.entries() == []
    restarted.leave()  # nothing to clear, no error


def test_an_entry_is_named_after_its_node() -> None:
    """The name the admission policy checks against the writer's node: ``<prefix>-q-<node>``; a name too long
    for a Lease falls back to the node's slug."""
    assert queue_lease_name(PREFIX, "ip-10-0-1-23.eu-west-1.compute.internal") == (
        "kured-lock-q-ip-10-0-1-23.eu-west-1.compute.internal"
    )
    long = "n" * 250
    name = queue_lease_name(PREFIX, long)
    assert name.startswith("kured-lock-q-nnn") and len(name) <= 253 and name != f"kured-lock-q-{long}"
