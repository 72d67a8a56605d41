"""The one question every blocker answers: may this node take a slot now?

Mirrors kured's ``pkg/blockers``. A :class:`Blocker` answers ``check(now=...) -> Reason | None`` before a
node takes the lock: ``None`` lets it go, a :class:`~pykured.core.model.Reason` holds it back for this pass.
The drivers (the daemon, FleetLock) ask them in their declared order (:mod:`pykured.blockers.registry`) with
:func:`first_block`, which stops at the first block; the daemon logs ``Reboot blocked: <reason.message>``
and skips the iteration. Errors block too (fail safe).

Not a :class:`~pykured.gates.phase.CycleGate`: a gate is what the lock holder waits for inside its own
cycle, evaluated on the Node object it has just read and bounded by its phase's timeout; a blocker is asked
before any slot is taken, reads what it needs itself and never times out.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from typing import Protocol

from pykured.core.model import Reason


class Blocker(Protocol):
    """One reason not to reboot; ``None`` means "not blocked"."""

    def check(self, *, now: datetime.datetime) -> Reason | None: ...


def first_block(blockers: Iterable[Blocker], *, now: datetime.datetime) -> Reason | None:
    """kured's ``RebootBlocked``: ask each blocker in order and stop at the first block."""
    for blocker in blockers:
        reason = blocker.check(now=now)
        if reason is not None:
            return reason
    return None
