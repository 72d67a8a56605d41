"""The daemon's side of ``--resume-rolls``: its place in the roll, its lock queue entry, its turn.

The rule is :mod:`pykured.roll.rule`, the entry :mod:`pykured.roll.queue`; this adapter feeds them what the
pass saw. The node's place comes from the roll record its agent published on the Node
(:mod:`pykured.roll.record`: ``lastReboot``, ``waitingSince``), so a restarted agent keeps its place.
"""

from __future__ import annotations

import datetime
import logging

from pykured.cycle.state import NodeState, unix_ns
from pykured.lock.base import Lock
from pykured.roll import record as rollrecord
from pykured.roll import rule as turns
from pykured.roll.order import Member
from pykured.roll.queue import RollQueue

logger = logging.getLogger(__name__)


class RollTurns:
    """One node taking its turn in the roll."""

    def __init__(self, queue: RollQueue, lock: Lock, node: str) -> None:
        self.queue = queue
        self._lock = lock
        self._node = node

    def member(self, view: NodeState, now: datetime.datetime) -> Member:
        """This node's place (``waitingSince`` starts now when no roll record says otherwise)."""
        place = rollrecord.read(view.annotations)
        last = place.last_reboot if place else None
        since = place.waiting_since if place and place.waiting_since else now.replace(microsecond=0)
        return Member(self._node, last_reboot=last, waiting_since=since)

    def after_pass(self, view: NodeState, *, required: bool, in_window: bool, now: datetime.datetime) -> None:
        """Keep the entry while the node waits outside the lock; clear it once it has a slot or needs none."""
        if required and not view.holding and view.reboot_boot_id is None:
            state = turns.WINDOW if not in_window else turns.HELD
            self.queue.note(state, self.member(view, now), now_ns=unix_ns(now))
        else:
            self.queue.leave()

    def take(self, view: NodeState, now: datetime.datetime) -> turns.Turn:
        """Renew the entry as waiting and ask whether this node may try to take a slot now."""
        holders = [h.node_id for h in self._lock.holders(now_ns=unix_ns(now))]
        turn = self.queue.turn(self.member(view, now), holders=holders, concurrency=self._lock.concurrency)
        if turn.skipped:
            logger.info(
                "Nodes ahead in the roll left the free lock slot alone for %ss: taking a turn (%s)",
                int(self.queue.grace),
                ", ".join(turn.ahead),
            )
        elif not turn.go:
            logger.info(
                "Waiting for the nodes ahead in the roll (%d free lock slot(s)): %s",
                turn.free,
                ", ".join(turn.ahead),
            )
        return turn

    def taken(self) -> None:
        """The node holds a slot: its entry goes."""
        self.queue.leave()
