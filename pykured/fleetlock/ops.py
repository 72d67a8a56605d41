"""The side effects of a FleetLock cycle on one node: mark, grant, uncordon, release, forget.

Concept: the small idempotent steps :mod:`pykured.fleetlock.service` strings together, each one write (or a
few) against the Node, the lock, notifications and Events. They mirror the daemon's post-reboot steps
(kured.md §5.3) so a Zincati node and a sentinel-driven node end their cycles alike.

Invariants:
* A node is uncordoned only when ``pykured.dev/unschedulable-before`` (or, failing that, the lock entry's
  ``unschedulable``) says it was schedulable before the cycle: an administrator's cordon is never undone.
* The slot is released before FleetLock's memory is cleared from the Node, so a crash in between leaves a
  ``STALE`` node that the reconcile loop cleans up, never a slot nobody will free.
* Nothing here reboots anything.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import threading
from collections.abc import Callable, Mapping

from pykured.drain import Drainer
from pykured.events import EventRecorder
from pykured.fleetlock.cycle import FLEETLOCK_ID_ANNOTATION
from pykured.kube import MERGE_PATCH, Kube
from pykured.lock.base import Lock
from pykured.metrics import Metrics
from pykured.node import NodeBook
from pykured.nodeinfo import NodeView, state_patch
from pykured.notify import Notifier

logger = logging.getLogger(__name__)

DrainerFactory = Callable[[str, threading.Event], Drainer]
"""``(node, cancel) -> Drainer``: the cancel event stops a drain that is no longer wanted."""


@dataclasses.dataclass(frozen=True, slots=True)
class Behaviour:
    """kured's flags that shape the cycle."""

    force_reboot: bool = False
    release_delay_s: float = 0.0
    pre_labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    post_labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    annotate_nodes: bool = False


class NodeOps:
    """The steps, over the adapters the lead wires in."""

    def __init__(
        self,
        *,
        kube: Kube,
        lock: Lock,
        drainer_factory: DrainerFactory,
        book_factory: Callable[[str], NodeBook],
        notifier: Notifier,
        events_factory: Callable[[str], EventRecorder],
        metrics: Metrics | None,
        behaviour: Behaviour,
    ) -> None:
        self.kube = kube
        self.lock = lock
        self.drainer_factory = drainer_factory
        self.book_factory = book_factory
        self.notifier = notifier
        self._events_factory = events_factory
        self._events: dict[str, EventRecorder] = {}
        self.metrics = metrics
        self.b = behaviour

    def event(self, node: str, reason: str, message: str, *, warning: bool = False) -> None:
        """Post an Event on the node (never raises)."""
        recorder = self._events.get(node)
        if recorder is None:
            recorder = self._events[node] = self._events_factory(node)
        recorder.record(reason, message, warning=warning)

    def count(self, outcome: str) -> None:
        """``pykured_fleetlock_requests_total{api="cycle", kind=outcome}``: cycle outcomes, bounded."""
        if self.metrics is not None:
            self.metrics.fleetlock_request("cycle", outcome)

    def mark(self, node: str, ident: str | None) -> None:
        """Set (or, with ``None``, remove) :data:`FLEETLOCK_ID_ANNOTATION`."""
        patch = {"metadata": {"annotations": {FLEETLOCK_ID_ANNOTATION: ident}}}
        self.kube.patch_node(node, patch, patch_type=MERGE_PATCH)

    def begin(self, node: str, *, unschedulable: bool) -> None:
        """After the slot was taken: remember whether the node was cordoned already; no grant yet."""
        self.book_factory(node).update_state(
            unschedulable_before=unschedulable, reboot_boot_id=None, reboot_triggered_at=None,
            release_after=None,
        )  # fmt: skip

    def grant(self, node: str, *, now: datetime.datetime) -> None:
        """Drained: record the bootID Zincati will reboot out of, then notify (the 200 follows)."""
        book = self.book_factory(node)
        view = book.view()
        if self.b.annotate_nodes:
            book.add_reboot_annotations(now)
        book.update_state(reboot_boot_id=view.boot_id, reboot_triggered_at=now)
        self.notifier.notify_reboot(node)
        self.event(node, "Rebooting", "drained; FleetLock granted Zincati's pre-reboot (Zincati reboots)")
        self.count("granted")
        logger.info("FleetLock granted node %s its reboot (bootID %s)", node, view.boot_id)

    def uncordon_if_ours(self, node: str, view: NodeView, entry_unschedulable: bool | None) -> bool:
        """Uncordon and apply post-reboot labels, unless the node was unschedulable before the cycle."""
        before = view.unschedulable_before
        if before is None:
            before = entry_unschedulable
        if before is not False:
            if view.unschedulable:
                logger.info("Leaving node %s cordoned: it was unschedulable before the reboot cycle", node)
            return False
        if view.unschedulable:
            self.drainer_factory(node, threading.Event()).uncordon()
            logger.info("Uncordoned node %s", node)
        self.book_factory(node).apply_labels(self.b.post_labels)
        return True

    def finish_reboot(
        self, node: str, view: NodeView, entry_unschedulable: bool | None, *, now: datetime.datetime
    ) -> bool:
        """The node came back: uncordon, labels, notify; release now or set ``release-after``.

        Returns whether the slot was released.
        """
        logger.info("Node %s rebooted (bootID %s -> %s)", node, view.reboot_boot_id, view.boot_id)
        uncordoned = self.uncordon_if_ours(node, view, entry_unschedulable)
        if self.b.annotate_nodes and view.in_progress:
            self.book_factory(node).remove_in_progress_annotation()
        if uncordoned:
            self.notifier.notify_uncordon(node)
            self.event(node, "Uncordoned", "node rebooted and uncordoned")
        if self.b.release_delay_s > 0:
            after = now + datetime.timedelta(seconds=self.b.release_delay_s)
            self.book_factory(node).update_state(release_after=after)
            return False
        self.release(node)
        return True

    def abandon(self, node: str, view: NodeView, entry_unschedulable: bool | None) -> None:
        """End a cycle without a reboot: uncordon if we cordoned, release, forget."""
        self.uncordon_if_ours(node, view, entry_unschedulable)
        self.release(node)

    def release(self, node: str) -> None:
        """Free the node's slot, then forget the cycle."""
        if self.lock.release(node_id=node):
            logger.info("Released the reboot lock of node %s", node)
            self.event(node, "LockReleased", "FleetLock released the reboot lock")
        self.forget(node)

    def forget(self, node: str) -> None:
        """Clear ``pykured.dev/*`` cycle state and the FleetLock mark in one merge patch."""
        changes: dict[str, str | None] = dict(
            state_patch(
                unschedulable_before=None, reboot_boot_id=None, reboot_triggered_at=None,
                release_after=None, reboot_attempts=None,
            )
        )  # fmt: skip
        changes[FLEETLOCK_ID_ANNOTATION] = None
        self.kube.patch_node(node, {"metadata": {"annotations": changes}}, patch_type=MERGE_PATCH)
