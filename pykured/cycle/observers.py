"""The moments of one node's reboot cycle, and the observers that act at them: one protocol for every feature.

Concept: the runner and the steps (:mod:`pykured.cycle.run`, :mod:`pykured.cycle.steps`) do what every cycle
does — the lock, the drain, the reboot or hand-off, notifications, Events. What the cycle is watched by or
only some cycles do (its metrics, the PreferNoSchedule taint while a node waits, reboot hooks and settle
gates, the fleet-wide count of failed drains, a silence in Alertmanager) is a :class:`CycleObserver`: the
cycle announces each moment to :class:`CycleObservers`, the list the composition root
(:mod:`pykured.agent.wiring`) registered, and knows none of them. A new feature is one class that answers the
moments it cares about, and one registration line.

The moments, in the order a cycle passes them (every method receives the node's name):

* :meth:`~CycleObserver.waiting` — the node needs a reboot and waits: for its turn
  (``--prefer-no-schedule-early``), or for a lock others hold. :meth:`~CycleObserver.not_waiting` — it no
  longer does: no reboot is needed, or the maintenance window closed. :meth:`~CycleObserver.marked` says
  whether the Node carries an observer's mark of waiting, so the decision marks and unmarks only on change.
* :meth:`~CycleObserver.blocked` — a pass was blocked (the block's kind), or went on (``None``).
* :meth:`~CycleObserver.lock_tried` — the node asked for a slot: taken or not, and how many hold the lock.
* :meth:`~CycleObserver.slot_taken` — the node took its lock slot (its memory recorded, ``LockAcquired``).
* :meth:`~CycleObserver.hold` — a point the cycle may be held at (``before-drain``, ``before-release``):
  an observer answers a :class:`~pykured.core.model.GateResult` (``None``: it has nothing to say there). A
  phase not begun yet (:attr:`GateResult.start`) is begun by :meth:`~CycleObserver.begin`.
  :meth:`~CycleObserver.holding` — the cycle is held there (the gate's kind), or no longer is (``None``).
* :meth:`~CycleObserver.drain_starting` — the gate before the drain passed; the drain begins (also when a
  restarted agent resumes the cycle). :meth:`~CycleObserver.drain_timed` — a drain (or its escalation's
  deletion) took so long. :meth:`~CycleObserver.drained` — the drain (and its escalation) ended.
  :meth:`~CycleObserver.quarantined` — the drain failed for good and the node is left cordoned.
* :meth:`~CycleObserver.rebooting` — the reboot (or hand-off, or FleetLock's grant) is about to be triggered.
  :meth:`~CycleObserver.reboot_outcome` — what became of it: ``triggered``, ``handoff``, ``failed``, and
  later ``completed`` (the node is back) or ``failed`` (the cycle gave up on a node that did not reboot).
  :meth:`~CycleObserver.withdrawn` — the node is back and its hand-off withdrawn.
* :meth:`~CycleObserver.back` — the node is back from its reboot and uncordoned if the cordon was ours.
* :meth:`~CycleObserver.releasing` — the node's lock slot is about to be freed (on every path that frees it:
  the cycle's release, an abort, a failed drain, a quarantine, giving up): what must end before another node
  may take the slot ends here. :meth:`~CycleObserver.released` — the node's lock slot was freed.
  :meth:`~CycleObserver.release_tried` — the node no longer asks for a slot (it released one, or had none to
  release).
  :meth:`~CycleObserver.lock_counted` — the lock's holders counted again after a release.
* :meth:`~CycleObserver.forgetting` — the cycle ends (released, aborted, given up, cleaned up): the moment
  before the cycle's memory is cleared from the Node.

And one moment outside the cycle's order: :meth:`~CycleObserver.observed` — a pass (the daemon's, or
FleetLock's for a Zincati node) read the Node, whether or not a cycle runs: an observer picks up work the Node
records as left over (a silence whose expiry failed, after a restart too).

Invariants:
* Observers are told in registration order, and only at the moments above: the order of API requests is the
  order of registration within each moment. What an observer raises ends the step as any failed write does
  (the next pass repeats it); an observer that must never stop the cycle (the silence, the streak) catches
  its own errors.
* At a hold point the first observer whose answer is not ``OPEN`` holds the cycle, and those after it are not
  asked; when every observer answers ``None`` the cycle passes without looking.
"""

from __future__ import annotations

import datetime
from typing import Protocol

from pykured.core.model import GateResult, Verdict
from pykured.cycle.state import NodeState


class CycleObserver(Protocol):
    """A feature of the reboot cycle: it acts at the moments it cares about. Subclass it to inherit a
    no-op for every other moment."""

    def waiting(self, node: str) -> None:
        """The node needs a reboot and waits (for its turn, or for a lock others hold)."""
        return None

    def not_waiting(self, node: str) -> None:
        """The node no longer waits: no reboot is needed, or the maintenance window closed."""
        return None

    def marked(self, view: NodeState) -> bool:
        """Does the Node carry this observer's mark of waiting (read into the pass's observation)?"""
        return False

    def blocked(self, node: str, kind: str | None) -> None:
        """A pass was blocked, by a block of ``kind`` (``lock``: others hold it); ``None``: it went on."""
        return None

    def lock_tried(self, node: str, backend: str, *, acquired: bool, holders: int) -> None:
        """The node asked ``backend``'s lock for a slot: ``acquired`` or not; ``holders`` hold it now."""
        return None

    def slot_taken(self, node: str) -> None:
        """The node took its lock slot."""
        return None

    def hold(self, node: str, point: str, now: datetime.datetime) -> GateResult | None:
        """May the cycle pass ``point`` (``before-drain``, ``before-release``)? ``None``: nothing to say."""
        return None

    def begin(self, node: str, phase: str, now: datetime.datetime) -> None:
        """Begin ``phase``, which a hold found not begun (:attr:`GateResult.start`); ignore another's."""
        return None

    def holding(self, node: str, kind: str | None) -> None:
        """The cycle is held by a gate of ``kind`` (``None``: no longer held)."""
        return None

    def drain_starting(self, node: str) -> None:
        """The drain begins."""
        return None

    def drain_timed(self, node: str, seconds: float) -> None:
        """A drain, or the escalation's deletion of what it left, took ``seconds``."""
        return None

    def drained(self, node: str, failure: str | None) -> None:
        """The drain ended (``failure``: why it failed; ``None``: it completed)."""
        return None

    def quarantined(self, node: str) -> None:
        """The node is quarantined: left cordoned and not rebooted (``--drain-escalation=…,quarantine``)."""
        return None

    def rebooting(self, node: str) -> None:
        """The reboot (or the hand-off, or FleetLock's grant) is about to be triggered."""
        return None

    def reboot_outcome(self, node: str, outcome: str) -> None:
        """What became of the reboot: ``triggered``, ``handoff``, ``failed`` or ``completed``."""
        return None

    def withdrawn(self, node: str) -> None:
        """The node is back and the hand-off to the update agent is withdrawn."""
        return None

    def back(self, node: str) -> None:
        """The node is back from its reboot (uncordoned, when the cordon was ours)."""
        return None

    def releasing(self, node: str) -> None:
        """The node's lock slot is about to be freed."""
        return None

    def released(self, node: str) -> None:
        """The node's lock slot was freed."""
        return None

    def release_tried(self, node: str, *, released: bool) -> None:
        """The node no longer asks for a slot: it ``released`` one, or had none to release."""
        return None

    def lock_counted(self, node: str, backend: str, holders: int) -> None:
        """``holders`` hold ``backend``'s lock, counted after the node released its slot."""
        return None

    def forgetting(self, node: str) -> None:
        """The cycle ends: its memory is about to be cleared from the Node."""
        return None

    def observed(self, view: NodeState) -> None:
        """A pass read the Node (``view``), whether or not a cycle runs."""
        return None


class CycleObservers(list[CycleObserver]):
    """The registered observers, told each moment in registration order (see the module docstring)."""

    def waiting(self, node: str) -> None:
        for observer in self:
            observer.waiting(node)

    def not_waiting(self, node: str) -> None:
        for observer in self:
            observer.not_waiting(node)

    def marked(self, view: NodeState) -> bool:
        return any(observer.marked(view) for observer in self)

    def blocked(self, node: str, kind: str | None) -> None:
        for observer in self:
            observer.blocked(node, kind)

    def lock_tried(self, node: str, backend: str, *, acquired: bool, holders: int) -> None:
        for observer in self:
            observer.lock_tried(node, backend, acquired=acquired, holders=holders)

    def slot_taken(self, node: str) -> None:
        for observer in self:
            observer.slot_taken(node)

    def hold(self, node: str, point: str, now: datetime.datetime) -> GateResult | None:
        """The first answer that is not ``OPEN`` (the observers after it are not asked); else the first
        ``OPEN`` one; ``None`` when no observer has anything to say at ``point``."""
        passed: GateResult | None = None
        for observer in self:
            result = observer.hold(node, point, now)
            if result is None:
                continue
            if result.verdict is not Verdict.OPEN:
                return result
            passed = passed or result
        return passed

    def begin(self, node: str, phase: str, now: datetime.datetime) -> None:
        for observer in self:
            observer.begin(node, phase, now)

    def holding(self, node: str, kind: str | None) -> None:
        for observer in self:
            observer.holding(node, kind)

    def drain_starting(self, node: str) -> None:
        for observer in self:
            observer.drain_starting(node)

    def drain_timed(self, node: str, seconds: float) -> None:
        for observer in self:
            observer.drain_timed(node, seconds)

    def drained(self, node: str, failure: str | None) -> None:
        for observer in self:
            observer.drained(node, failure)

    def quarantined(self, node: str) -> None:
        for observer in self:
            observer.quarantined(node)

    def rebooting(self, node: str) -> None:
        for observer in self:
            observer.rebooting(node)

    def reboot_outcome(self, node: str, outcome: str) -> None:
        for observer in self:
            observer.reboot_outcome(node, outcome)

    def withdrawn(self, node: str) -> None:
        for observer in self:
            observer.withdrawn(node)

    def back(self, node: str) -> None:
        for observer in self:
            observer.back(node)

    def releasing(self, node: str) -> None:
        for observer in self:
            observer.releasing(node)

    def released(self, node: str) -> None:
        for observer in self:
            observer.released(node)

    def release_tried(self, node: str, *, released: bool) -> None:
        for observer in self:
            observer.release_tried(node, released=released)

    def lock_counted(self, node: str, backend: str, holders: int) -> None:
        for observer in self:
            observer.lock_counted(node, backend, holders)

    def forgetting(self, node: str) -> None:
        for observer in self:
            observer.forgetting(node)

    def observed(self, view: NodeState) -> None:
        for observer in self:
            observer.observed(view)
