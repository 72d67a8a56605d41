"""Gates in the reboot cycle: conditions the lock holder waits for, each bounded by a timeout.

A gate (:class:`CycleGate`) answers ``check(node, now) -> Reason | None`` (``node``: the Node object as last
read; None: open). It is not a :class:`~pykured.blockers.base.Blocker`: a blocker says whether a node may
take a slot at all, before any lock is taken, reads what it needs itself and never times out; a gate is
what the lock holder waits for inside its own cycle (before the drain, before the release), evaluated on
the Node object the cycle has just read (so one read serves every gate of a phase) and bounded by its
phase's timeout.

A :class:`GatePhase` is an ordered list of gates with one timeout, measured from ``since`` (an instant stored
on the Node, so a restarted agent keeps counting). :func:`evaluate` is pure: it asks each gate in order and
says whether to pass, wait (and why) or give up waiting (timed out, with the last reason).

The phases pykured uses:

* ``before-reboot`` (:mod:`pykured.gates.hooks`): after the lock is taken, before cordon and drain; on timeout
  the cycle is aborted (a hook that never answers must not let the node reboot).
* ``after-reboot`` hooks and the settle gates (:mod:`pykured.gates.settle`): after the node is back and
  uncordoned, before the lock is released; on timeout the lock is released with a warning and an Event, so
  one stuck gate cannot stop the whole cluster's rollout forever.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from pykured.core.model import GateResult, Reason, Verdict


class CycleGate(Protocol):
    """One condition the lock holder waits for in its own cycle, on its Node as last read; None = open."""

    name: str

    def check(self, node: Mapping[str, Any], now: datetime.datetime) -> Reason | None: ...


@dataclasses.dataclass(frozen=True, slots=True)
class GatePhase:
    """Gates checked together, with one timeout (``timeout <= 0``: wait forever)."""

    name: str
    gates: Sequence[CycleGate]
    timeout: datetime.timedelta

    def __bool__(self) -> bool:
        return bool(self.gates)


def evaluate(
    phase: GatePhase, node: Mapping[str, Any], *, since: datetime.datetime, now: datetime.datetime
) -> GateResult:
    """Pass when every gate is open; otherwise wait, or time out once ``since + timeout`` has passed."""
    deadline = since + phase.timeout if phase.timeout > datetime.timedelta(0) else None
    for gate in phase.gates:
        try:
            reason = gate.check(node, now)
        except Exception as exc:  # a failing check holds, like kured's blockers (fail safe)
            reason = Reason(gate.name, f"{gate.name}: check failed: {exc}")
        if reason is not None:
            if deadline is not None and now >= deadline:
                return GateResult(Verdict.TIMED_OUT, reason, deadline)
            return GateResult(Verdict.WAIT, reason, deadline)
    return GateResult(Verdict.OPEN, None, deadline)
