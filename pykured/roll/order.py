"""The current roll: which nodes it has rebooted, and in which order the rest go (kured #620).

A *roll* is the fleet working through the nodes that need a reboot. It began when the longest-waiting of the
nodes that still need one started to need it; a node whose last reboot is at or after that moment was
rebooted in this roll. When no node needs a reboot, no roll is in progress.

The order of a roll is *least recently rebooted first*: a node that was rebooted in this roll and needs a
reboot again (new updates arrived while the maintenance window was closed) goes after every node the roll
has not reached yet, so a large pool finishes over several windows instead of starting over. Ties go to the
node that has waited longest, then by name. A node pykured never saw reboot sorts first.

Both facts come from the roll's record each agent writes on its Node (:mod:`pykured.roll.record`,
``pykured.dev/roll``: ``lastReboot``, ``waitingSince``), so ``pykured status`` and the agents' lock queue
(:mod:`pykured.roll.queue`) read the same order. Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable, Sequence

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


@dataclasses.dataclass(frozen=True, slots=True)
class Member:
    """One node as the roll sees it."""

    node: str
    last_reboot: datetime.datetime | None = None
    """The node's last reboot (None: pykured never saw one)."""
    waiting_since: datetime.datetime | None = None
    """When the node began to need its pending reboot (None: it needs none)."""

    @property
    def waiting(self) -> bool:
        return self.waiting_since is not None


def order_key(member: Member) -> tuple[datetime.datetime, datetime.datetime, str]:
    """The roll's order: least recently rebooted, then longest waiting, then the name."""
    return (member.last_reboot or _EPOCH, member.waiting_since or _EPOCH, member.node)


def start(members: Iterable[Member]) -> datetime.datetime | None:
    """When the current roll began; ``None`` when no node needs a reboot."""
    return min((m.waiting_since for m in members if m.waiting_since is not None), default=None)


@dataclasses.dataclass(frozen=True, slots=True)
class Roll:
    """The current roll, as ``pykured status`` shows it."""

    since: datetime.datetime | None
    rebooted: tuple[str, ...] = ()
    """Nodes rebooted in this roll, in the order they rebooted."""
    waiting: tuple[str, ...] = ()
    """Nodes that need a reboot, in the roll's order (the next one first)."""

    def place(self, node: str, *, numbered: bool = True) -> str:
        """``rebooted``, ``rebooted, waiting 3/4``, ``waiting 1/4`` or ``""`` for the status table.

        ``numbered``: show the place in the order (only true for an agent that follows it).
        """
        parts = []
        if node in self.rebooted:
            parts.append("rebooted")
        if node in self.waiting:
            parts.append(
                f"waiting {self.waiting.index(node) + 1}/{len(self.waiting)}" if numbered else "waiting"
            )
        return ", ".join(parts)


def current(members: Sequence[Member]) -> Roll:
    """The roll in progress (``since`` None and nothing listed when no node needs a reboot)."""
    began = start(members)
    if began is None:
        return Roll(None)
    rebooted = sorted(
        (m for m in members if m.last_reboot is not None and m.last_reboot >= began),
        key=lambda m: (m.last_reboot, m.node),
    )
    waiting = sorted((m for m in members if m.waiting), key=order_key)
    return Roll(began, tuple(m.node for m in rebooted), tuple(m.node for m in waiting))
