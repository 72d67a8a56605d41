"""Shared value types: the reasons decisions are made for, and a gate's verdict (pass, wait or timed out)."""

from __future__ import annotations

import dataclasses
import datetime
import enum


@dataclasses.dataclass(frozen=True, slots=True)
class Reason:
    """Why something is blocked or skipped; ``message`` is the operator-facing text kured would log."""

    kind: str
    message: str

    def __str__(self) -> str:
        return self.message


class Verdict(enum.Enum):
    """A gate's answer: pass, wait, or give up waiting (its timeout passed)."""

    OPEN = "open"
    WAIT = "wait"
    TIMED_OUT = "timed-out"


@dataclasses.dataclass(frozen=True, slots=True)
class GateResult:
    """What a gate of the reboot cycle answers (the hooks and settle gates of :mod:`pykured.gates`): the cycle
    passes, waits (``reason``; until ``deadline``, when one is set) or gives up waiting."""

    verdict: Verdict
    reason: Reason | None = None
    deadline: datetime.datetime | None = None
    start: str = ""
    """A phase that has not begun (``before``, ``after``, ``settle``): the wait's step begins it (labels
    the Node, stamps its start); evaluating never writes."""
