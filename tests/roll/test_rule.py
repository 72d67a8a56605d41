"""The lock queue's rule: who may take a free slot when rolls resume (pure)."""

from __future__ import annotations

import datetime

from pykured.roll import order as roll
from pykured.roll import rule as turns

T = datetime.datetime(2026, 11, 28, 2, 0, tzinfo=datetime.UTC)
S = 1_000_000_000
NOW = 10_000 * S
STALE = 180 * S
GRACE = 15 * S


def entry(node: str, state: str = turns.WAITING, *, rebooted: bool = False, seen: int = NOW) -> turns.Entry:
    last = T + datetime.timedelta(hours=1) if rebooted else None
    return turns.Entry(roll.Member(node, last_reboot=last, waiting_since=T), state, seen)


def may_go(me: turns.Entry, others: list[turns.Entry], *, holders: tuple[str, ...] = (), concurrency: int = 1,
           held_back_since: int | None = None) -> turns.Turn:  # fmt: skip
    return turns.may_go(
        me.member, [me, *others], holders=holders, concurrency=concurrency, now_ns=NOW, stale_ns=STALE,
        held_back_since_ns=held_back_since, grace_ns=GRACE,
    )  # fmt: skip


def test_a_node_rebooted_in_the_roll_holds_back_for_one_that_was_not() -> None:
    behind, first = entry("a-again", rebooted=True), entry("z-first")
    turn = may_go(behind, [first])
    assert not turn.go and turn.ahead == ("z-first",) and turn.free == 1 and 0 < turn.wait_s <= 15
    assert may_go(first, [behind]).go


def test_as_many_go_as_slots_are_free() -> None:
    others = [entry("b"), entry("c"), entry("d")]
    assert may_go(entry("e"), others, concurrency=4).go  # 3 ahead, 4 free
    assert not may_go(entry("e"), others, concurrency=3).go
    assert may_go(entry("e"), others, concurrency=4, holders=("x",)).go is False  # 3 free now


def test_no_free_slot_leaves_the_answer_to_the_lock() -> None:
    assert may_go(entry("z", rebooted=True), [entry("a")], holders=("h",)).go


def test_held_stale_and_holding_nodes_do_not_contend() -> None:
    me = entry("me", rebooted=True)
    assert may_go(me, [entry("a", turns.HELD)]).go
    assert may_go(me, [entry("a", seen=NOW - STALE)]).go
    assert not may_go(me, [entry("a", seen=NOW - STALE + S)]).go
    assert may_go(me, [entry("a")], holders=("a",), concurrency=2).go


def test_a_node_waiting_for_its_window_still_contends() -> None:
    assert not may_go(entry("me", rebooted=True), [entry("a", turns.WINDOW)]).go


def test_after_the_grace_a_held_back_node_goes_anyway() -> None:
    me, ahead = entry("me", rebooted=True), entry("a")
    assert not may_go(me, [ahead], held_back_since=NOW - GRACE + S).go
    turn = may_go(me, [ahead], held_back_since=NOW - GRACE)
    assert turn.go and turn.skipped and turn.ahead == ("a",)
    assert not may_go(entry("a"), [me]).skipped


def test_entries_round_trip_and_garbage_reads_as_none() -> None:
    e = entry("n", turns.WINDOW, rebooted=True, seen=5)
    assert turns.decode("n", turns.encode(e), 5) == e
    assert turns.decode("n", "{", 0) is None
    assert turns.decode("n", '{"state":"bogus"}', 0) is None
    assert turns.decode("", turns.encode(e), 0) is None
    assert turns.decode("n", None, 0) is None
