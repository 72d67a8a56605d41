"""Whose turn it is to take a free lock slot when rolls resume (``--resume-rolls``): the pure rule.

With ``--resume-rolls`` every agent whose node needs a reboot keeps an *entry* in the lock queue (a Lease
per node, :mod:`pykured.roll.queue`): its place in the roll (:func:`pykured.roll.order.order_key`: least
recently rebooted first, then longest waiting) and its state:

* ``waiting``: it is trying to take a slot now;
* ``window``: it waits for its maintenance window to open (it will contend as soon as it does);
* ``held``: something else holds it back (a blocker, a back-off): it does not contend.

A node may take a free slot when fewer contenders are ahead of it than there are free slots. Contenders are
the other entries in ``waiting`` or ``window`` state, renewed within ``stale`` (an agent that stopped
renewing is gone), whose node holds no slot. The lock itself still decides who gets a slot (compare and
swap); the queue only makes the nodes behind hold back.

So that a contender that cannot take the slot (its zone is full, its agent hangs, its window differs) never
stalls the roll, a node that was held back for ``grace`` while the same slots stayed free and the same
contenders stayed ahead goes anyway. A contender ahead that took a slot and freed it again while this node
was not looking (a waiting agent wakes when a slot frees, not when one is taken) has left the queue: the
grace starts again, so the next contender in line is not passed for the time the previous one took.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
from collections.abc import Collection, Iterable

from pykured.core import boundedjson
from pykured.core.times import format_rfc3339, parse_rfc3339
from pykured.kube.node import PYKURED_PREFIX
from pykured.roll import order as roll

QUEUE_LABEL = PYKURED_PREFIX + "lock-queue"
ENTRY_ANNOTATION = PYKURED_PREFIX + "queue-entry"
WAITING, WINDOW, HELD = "waiting", "window", "held"
CONTENDING = (WAITING, WINDOW)
_NS = 1_000_000_000


@dataclasses.dataclass(frozen=True, slots=True)
class Entry:
    """One node's place in the lock queue."""

    member: roll.Member
    state: str = WAITING
    seen_ns: int = 0
    """When its agent last renewed it."""

    @property
    def node(self) -> str:
        return self.member.node


def encode(entry: Entry) -> str:
    """The entry's annotation value (the node and ``seen`` live in the Lease's spec)."""
    data = {"state": entry.state}
    if entry.member.last_reboot is not None:
        data["lastReboot"] = format_rfc3339(entry.member.last_reboot)
    if entry.member.waiting_since is not None:
        data["waitingSince"] = format_rfc3339(entry.member.waiting_since)
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def decode(node: str, text: str | None, seen_ns: int) -> Entry | None:
    """An entry from its Lease's holder, annotation and renew time; ``None`` when unreadable (never raises:
    the annotation is bounded before it is decoded, :mod:`pykured.core.boundedjson`)."""
    try:
        data = boundedjson.loads(text or "")
    except boundedjson.UnreadableJSON:
        return None
    if not node or not isinstance(data, dict) or data.get("state") not in (WAITING, WINDOW, HELD):
        return None

    def when(key: str) -> datetime.datetime | None:
        value = data.get(key)
        return parse_rfc3339(value) if isinstance(value, str) else None

    member = roll.Member(node, last_reboot=when("lastReboot"), waiting_since=when("waitingSince"))
    return Entry(member, str(data["state"]), seen_ns)


def contenders(
    entries: Iterable[Entry], *, me: str, holders: Collection[str], now_ns: int, stale_ns: int
) -> list[Entry]:
    """The other nodes that contend for a slot now, in the roll's order."""
    found = [
        e
        for e in entries
        if e.node != me and e.node not in holders and e.state in CONTENDING and now_ns - e.seen_ns < stale_ns
    ]
    return sorted(found, key=lambda e: roll.order_key(e.member))


def ahead_of(
    me: roll.Member, entries: Iterable[Entry], *, holders: Collection[str], now_ns: int, stale_ns: int
) -> tuple[str, ...]:
    """The contenders ahead of ``me`` in the roll's order."""
    mine = roll.order_key(me)
    found = contenders(entries, me=me.node, holders=holders, now_ns=now_ns, stale_ns=stale_ns)
    return tuple(e.node for e in found if roll.order_key(e.member) < mine)


@dataclasses.dataclass(frozen=True, slots=True)
class Turn:
    """The outcome of :func:`may_go`."""

    go: bool
    ahead: tuple[str, ...] = ()
    """Contenders ahead of this node (when it holds back, or when it goes after the grace)."""
    free: int = 0
    wait_s: float = 0.0
    """How long to hold back before looking again (the rest of the grace)."""

    @property
    def skipped(self) -> bool:
        """It goes although contenders are ahead (they left the free slots alone for the grace)."""
        return self.go and len(self.ahead) >= self.free > 0


def may_go(
    me: roll.Member,
    entries: Iterable[Entry],
    *,
    holders: Collection[str],
    concurrency: int,
    now_ns: int,
    stale_ns: int,
    held_back_since_ns: int | None,
    grace_ns: int,
) -> Turn:
    """May ``me`` try to take a slot now? ``held_back_since_ns``: since when it has held back while the
    same slots were free and the same contenders ahead of it (None: it was not)."""
    free = max(concurrency, 1) - len(holders)
    if free <= 0:
        return Turn(True)  # no free slot: the lock says so, and its watch wakes us when one frees
    ahead = ahead_of(me, entries, holders=holders, now_ns=now_ns, stale_ns=stale_ns)
    if len(ahead) < free:
        return Turn(True, ahead, free)
    waited = 0 if held_back_since_ns is None else now_ns - held_back_since_ns
    if waited >= grace_ns:
        return Turn(True, ahead, free)
    return Turn(False, ahead, free, wait_s=max((grace_ns - waited) / _NS, 0.5))
