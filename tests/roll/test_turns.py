"""The daemon's side of ``--resume-rolls``: which entry state each pass leaves (fake queue and lock)."""

from __future__ import annotations

import datetime
from typing import Any, cast

from pykured.cycle.state import NodeState
from pykured.lock.base import Lock
from pykured.lock.record import LockEntry
from pykured.roll import record as rollrecord
from pykured.roll import rule as turns
from pykured.roll.order import Member
from pykured.roll.queue import RollQueue
from pykured.roll.turns import RollTurns
from pykured.status import agent as agentstatus

NOW = datetime.datetime(2026, 12, 1, 2, 0, 0, 500, tzinfo=datetime.UTC)
LAST = datetime.datetime(2026, 11, 28, 3, 0, tzinfo=datetime.UTC)
SINCE = datetime.datetime(2026, 11, 30, 9, 0, tzinfo=datetime.UTC)


class Queue:
    grace = 15.0

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def note(self, state: str, member: Member, *, now_ns: int) -> None:
        self.calls.append(("note", state, member))

    def leave(self) -> None:
        self.calls.append(("leave",))

    def turn(self, member: Member, *, holders: list[str], concurrency: int) -> turns.Turn:
        self.calls.append(("turn", member, tuple(holders), concurrency))
        return turns.Turn(False, ("node-b",), 1, 3.0)


class OneHolder:
    concurrency = 2

    def holders(self, *, now_ns: int) -> tuple[LockEntry, ...]:
        return (LockEntry("node-c"),)


def view(*, status: bool = True, holding: bool = False, in_cycle: bool = False) -> NodeState:
    annotations = {}
    if status:
        annotations[agentstatus.STATUS_ANNOTATION] = agentstatus.encode(
            agentstatus.AgentStatus(boot_id="b", sentinel=True, last_reboot=LAST, waiting_since=SINCE)
        )
    if in_cycle:
        annotations["pykured.dev/reboot-boot-id"] = "b"
    obj = {
        "metadata": {"name": "node-a", "annotations": annotations},
        "status": {"nodeInfo": {"bootID": "b"}},
    }
    return NodeState.from_obj(obj, entry=LockEntry("node-a") if holding else None)


def make() -> tuple[RollTurns, Queue]:
    queue = Queue()
    return RollTurns(cast(RollQueue, queue), cast(Lock, OneHolder()), "node-a"), queue


def test_the_place_comes_from_the_published_status_or_starts_now() -> None:
    rt, _ = make()
    assert rt.member(view(), NOW) == Member("node-a", last_reboot=LAST, waiting_since=SINCE)
    assert rt.member(view(status=False), NOW) == Member("node-a", waiting_since=NOW.replace(microsecond=0))


def test_each_pass_keeps_or_clears_the_entry() -> None:
    rt, queue = make()
    rt.after_pass(view(), required=True, in_window=False, now=NOW)
    rt.after_pass(view(), required=True, in_window=True, now=NOW)  # blocked, backing off, ...
    rt.after_pass(view(holding=True), required=True, in_window=True, now=NOW)
    rt.after_pass(view(in_cycle=True), required=True, in_window=True, now=NOW)
    rt.after_pass(view(), required=False, in_window=True, now=NOW)
    member = Member("node-a", last_reboot=LAST, waiting_since=SINCE)
    assert queue.calls == [
        ("note", turns.WINDOW, member),
        ("note", turns.HELD, member),
        ("leave",),
        ("leave",),
        ("leave",),
    ]


def test_a_turn_asks_with_the_lock_holders_and_a_taken_slot_clears_the_entry() -> None:
    rt, queue = make()
    turn = rt.take(view(), NOW)
    assert not turn.go and turn.ahead == ("node-b",)
    rt.taken()
    member = Member("node-a", last_reboot=LAST, waiting_since=SINCE)
    assert queue.calls == [("turn", member, ("node-c",), 2), ("leave",)]


def test_the_rolls_own_record_wins_over_the_status() -> None:
    rt, _ = make()
    later = SINCE + datetime.timedelta(hours=1)
    annotations = {
        **view().annotations,
        rollrecord.ROLL_ANNOTATION: rollrecord.encode(rollrecord.Place(waiting_since=later)),
    }
    obj = {
        "metadata": {"name": "node-a", "annotations": annotations},
        "status": {"nodeInfo": {"bootID": "b"}},
    }
    assert rt.member(NodeState.from_obj(obj), NOW) == Member("node-a", waiting_since=later)
