"""The steps of one node's reboot cycle, shared by the sentinel-driven daemon and FleetLock.

Concept: each step is one small, idempotent piece of work against the Node, the lock, notifications and
Events — begin, drain (cordon + drain), reboot or hand-off, finish (post-reboot), uncordon, release,
forget — and tells the cycle's observers (:mod:`pykured.cycle.observers`) the moments it passes.
:class:`pykured.cycle.run.CycleRunner` strings them together for every driver (the daemon and FleetLock); no
driver writes a step of its own. The steps decide nothing: whether the cordon is ours,
whether to remove kured's in-progress annotation and which back-off to write come in as arguments from
:mod:`pykured.cycle.decide`.

Invariants:
* The slot is released before the cycle's memory is cleared from the Node, so a crash in between leaves
  stale memory that the next pass cleans up, never a slot nobody will free.
* Every path that frees the slot goes through :meth:`Steps.release`, which tells the observers
  ``releasing`` before the lock is written (the silence in Alertmanager is expired there, before another
  node can take the slot).
* The autoscalers' annotations (:func:`~pykured.cycle.state.autoscaler_marks_patch`) go on in the write that
  begins the cycle and come off in the write that forgets it, with the record of which are pykured's: every
  path that takes a slot begins the cycle, and every end of it (done, aborted, given up, a failed drain, a
  quarantine, a slot lost or freed by an operator, found by a restarted agent) forgets it.
* ``--drain-delay`` and ``--reboot-delay`` are waits on the cancel event: a stop (SIGTERM) ends them at once.
* Nothing here reboots anything but :meth:`Steps.reboot`, through the configured
  :class:`~pykured.host.reboot.Rebooter` (whose every path is guarded by :mod:`pykured.host.guard`).

kured mirrored (``rebootAsRequired`` in kured 1.23.0's ``cmd/kured/main.go``): pre-reboot labels, drain
delay, drain notification, cordon and drain, reboot delay, reboot notification and command; after the
reboot: uncordon (only if kured cordoned), post-reboot labels, uncordon notification, lock release.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import threading
import time
from collections.abc import Callable, Mapping

from pykured.core import errors
from pykured.cycle.book import NodeBook
from pykured.cycle.observers import CycleObservers
from pykured.cycle.state import KEEP, Keep, NodeState, autoscaler_marks_patch, autoscaler_unmarks_patch
from pykured.drain import Drainer
from pykured.host.reboot import Rebooter
from pykured.kube.events import EventRecorder
from pykured.lock.base import Lock
from pykured.notify import Notifier
from pykured.policy.quarantine import QuarantineRecord

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, slots=True)
class Behaviour:
    """kured's flags that shape what the steps do (the decisions:
    :class:`~pykured.cycle.decide.CyclePolicy`)."""

    drain_delay_s: float = 0.0
    reboot_delay_s: float = 0.0
    pre_labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    post_labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    autoscaler_annotations: tuple[str, ...] = ()
    """The autoscalers' annotations the Node carries, as ``"true"``, while its cycle runs
    (``--cluster-autoscaler-annotation``, ``--karpenter-annotation``)."""


@dataclasses.dataclass
class Hands:
    """The adapters the steps act through, for one node: what every cycle needs, and the observers of its
    moments (the features only some cycles have)."""

    book: NodeBook
    drainer: Drainer
    lock: Lock
    rebooter: Rebooter
    notifier: Notifier
    events: EventRecorder
    observers: CycleObservers = dataclasses.field(default_factory=CycleObservers)
    """Told the cycle's moments, in this order (:mod:`pykured.cycle.observers`)."""


@dataclasses.dataclass(frozen=True, slots=True)
class DrainFailure:
    """Why a cordon, drain or escalation step failed."""

    text: str
    pods: tuple[str, ...] = ()
    """For a timeout: the pods that would not leave (``namespace/name``)."""
    timed_out: bool = False
    """``--drain-timeout`` ran out (what ``--drain-escalation`` acts on)."""

    @classmethod
    def of(cls, exc: errors.PykuredError) -> DrainFailure:
        text = str(exc) or type(exc).__name__
        if isinstance(exc, errors.DrainTimeout):
            return cls(text, exc.pods, timed_out=True)
        return cls(text)


class Steps:
    """The steps for one node."""

    def __init__(
        self,
        node: str,
        hands: Hands,
        behaviour: Behaviour,
        *,
        cancel: threading.Event,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.node = node
        self.hands = hands
        self.behaviour = behaviour
        self.cancel = cancel
        self._monotonic = monotonic

    def begin(self, node: NodeState, *, unschedulable_before: bool) -> None:
        """The slot is ours: remember whether the node was cordoned already (before any cordon of ours),
        and put the autoscalers' annotations the Node does not carry on it, with their record, in the same
        write."""
        marks = autoscaler_marks_patch(node.annotations, self.behaviour.autoscaler_annotations)
        self.hands.book.update_state(
            unschedulable_before=unschedulable_before, reboot_boot_id=None, reboot_triggered_at=None,
            release_after=None, also=marks,
        )  # fmt: skip
        if marks:
            added = sorted(key for key in marks if key in self.behaviour.autoscaler_annotations)
            logger.info("Annotated node %s for the autoscalers until its cycle ends: %s", self.node, added)

    def annotate(self, now: datetime.datetime) -> None:
        """kured's ``--annotate-nodes``: reboot in progress, most recent reboot needed."""
        self.hands.book.add_reboot_annotations(now)

    def drain(self, *, event: str) -> DrainFailure | None:
        """Pre-reboot labels, ``--drain-delay``, drain notification, cordon and drain; the failure, if any."""
        self.hands.book.apply_labels(self.behaviour.pre_labels)
        self._sleep(self.behaviour.drain_delay_s)
        if self.cancel.is_set():
            return DrainFailure("cancelled before the drain")
        logger.info("Draining node %s", self.node)
        self.hands.notifier.notify_drain(self.node)
        self.hands.events.record("Draining", event)
        started = self._monotonic()
        try:
            self.hands.drainer.cordon()
            self.hands.drainer.drain()
        except errors.PykuredError as exc:
            return DrainFailure.of(exc)
        finally:
            self.hands.observers.drain_timed(self.node, self._monotonic() - started)
        return None

    def delete_remaining(self, failure: DrainFailure) -> DrainFailure | None:
        """``--drain-escalation=delete``: delete the pods the drain left, without the eviction API (the
        drainer logs the one line naming them); the failure, if any."""
        self.hands.events.record(
            "DrainEscalated",
            f"drain timed out: deleting {len(failure.pods)} pods without the eviction API",
            warning=True,
        )
        started = self._monotonic()
        try:
            self.hands.drainer.delete_remaining()
        except errors.PykuredError as exc:
            return DrainFailure.of(exc)
        finally:
            self.hands.observers.drain_timed(self.node, self._monotonic() - started)
        return None

    def quarantine(self, node: NodeState, record: QuarantineRecord, *, message: str) -> None:
        """Leave the node cordoned and not rebooted: the record on the Node (before the slot goes, so the
        node never takes it again unmarked), an Event, a notification, the metric; then release and forget."""
        self.hands.book.quarantine(record)
        self.hands.events.record("Quarantined", message, warning=True)
        self.hands.notifier.send(f"Node {self.node} quarantined: {message}")
        self.hands.observers.quarantined(self.node)
        self.release(event="released the reboot lock: node quarantined")
        self.forget(node, backoff_until=None)

    def pause_before_reboot(self) -> None:
        """``--reboot-delay`` between the drain and the reboot (or the grant)."""
        self._sleep(self.behaviour.reboot_delay_s)

    def reboot(
        self,
        node: NodeState,
        now: datetime.datetime,
        *,
        attempts: int | Keep = KEEP,
        event: str,
        announce: str,
    ) -> bool:
        """Record the bootID the node reboots out of, notify, reboot or hand off; ``False`` on failure."""
        self.hands.book.update_state(
            reboot_boot_id=node.boot_id, reboot_triggered_at=now, reboot_attempts=attempts
        )
        self.hands.notifier.notify_reboot(self.node)
        self.hands.events.record("Rebooting", event)
        logger.info("%s", announce)
        self.hands.observers.rebooting(self.node)
        try:
            self.hands.rebooter.reboot()
        except errors.PykuredError as exc:
            logger.error("Error rebooting node %s: %s", self.node, exc)
            self.hands.events.record("RebootFailed", str(exc), warning=True)
            self.hands.observers.reboot_outcome(self.node, "failed")
            return False
        self.hands.observers.reboot_outcome(
            self.node, "handoff" if self.hands.rebooter.hands_off else "triggered"
        )
        return True

    def finish(self, node: NodeState, *, uncordon: bool, remove_in_progress: bool) -> bool:
        """The node is back: withdraw a hand-off, uncordon if ours, labels, the observers told, notify;
        uncordoned?"""
        if self.hands.rebooter.hands_off:
            self.hands.rebooter.withdraw()
            self.hands.observers.withdrawn(self.node)
        uncordoned = self.uncordon(node, ours=uncordon)
        self.hands.observers.back(self.node)
        if remove_in_progress:
            self.hands.book.remove_in_progress_annotation()
        if uncordoned:
            self.hands.notifier.notify_uncordon(self.node)
            self.hands.events.record("Uncordoned", "node rebooted and uncordoned")
        return uncordoned

    def uncordon(self, node: NodeState, *, ours: bool) -> bool:
        """Uncordon and apply the post-reboot labels when the cordon is ours; never undo an admin's cordon."""
        if not ours:
            if node.unschedulable:
                logger.info(
                    "Leaving node %s cordoned: it was unschedulable before the reboot cycle", self.node
                )
            return False
        if node.unschedulable:
            self.hands.drainer.uncordon()
            logger.info("Uncordoned node %s", self.node)
        self.hands.book.apply_labels(self.behaviour.post_labels)
        return True

    def release(self, *, event: str = "") -> bool:
        """Free the node's slot (an Event with ``event`` as its message, when given); was one held? The
        observers are told first (``releasing``): what must end before another node takes the slot ends
        before it is freed."""
        self.hands.observers.releasing(self.node)
        released = self.hands.lock.release(node_id=self.node)
        if released:
            logger.info("Released the reboot lock of node %s", self.node)
            if event:
                self.hands.events.record("LockReleased", event)
            self.hands.observers.released(self.node)
        self.hands.observers.release_tried(self.node, released=released)
        return released

    def end(
        self,
        node: NodeState,
        *,
        ours: bool,
        backoff_until: datetime.datetime | Keep | None = KEEP,
        fleetlock_id: Keep | None = None,
        backoff_reason: str | Keep | None = KEEP,
    ) -> None:
        """End the cycle without (or after a failed) reboot: uncordon if ours, release the slot, forget."""
        self.uncordon(node, ours=ours)
        self.release()
        self.forget(
            node, backoff_until=backoff_until, fleetlock_id=fleetlock_id, backoff_reason=backoff_reason
        )

    def forget(
        self,
        node: NodeState,
        *,
        backoff_until: datetime.datetime | Keep | None = KEEP,
        fleetlock_id: Keep | None = None,
        backoff_reason: str | Keep | None = KEEP,
    ) -> None:
        """The observers told, then the cycle's memory cleared from the Node, FleetLock's mark and the
        autoscalers' annotations ``node``'s record names with it (and the back-off set or cleared, with its
        reason)."""
        self.hands.observers.forgetting(self.node)
        unmarks = autoscaler_unmarks_patch(node.annotations)
        self.hands.book.forget(
            backoff_until=backoff_until, fleetlock_id=fleetlock_id, backoff_reason=backoff_reason,
            also=unmarks,
        )  # fmt: skip
        if len(unmarks) > 1:
            removed = sorted(key for key in unmarks if key in node.autoscaler_marks)
            logger.info("Removed the autoscalers' annotations from node %s: %s", self.node, removed)

    def _sleep(self, seconds: float) -> None:
        if seconds > 0:
            self.cancel.wait(seconds)
