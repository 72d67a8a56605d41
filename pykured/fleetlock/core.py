"""The per-node plumbing FleetLock's operations share: observation, node locks, drain workers, cleanup.

Concept: :class:`Core` reads one node's cycle (:class:`Observed`: the Node, its lock entry, its
:class:`~pykured.fleetlock.cycle.CycleView`) and runs the background drain that turns ``DRAINING`` into
``GRANTED`` (or, on failure, releases the slot as kured does). :mod:`pykured.fleetlock.service` builds
the requests and the reconcile loop on it.

Invariants:
* Everything a node's cycle does happens under that node's lock (requests, reconcile, a worker's final
  step); waiting for a drain happens outside it.
* The only memory kept here is the live workers and recent drain failures (a retry back-off); the cycle
  itself is on the Node and the lock, so a restart resumes it.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import threading
from collections.abc import Callable

from pykured import errors
from pykured.fleetlock.cycle import FLEETLOCK_ID_ANNOTATION, CycleView, Phase, phase_of, ready_since
from pykured.fleetlock.ops import NodeOps
from pykured.fleetlock.worker import Worker, Workers
from pykured.lock.record import LockEntry
from pykured.nodeinfo import NodeView

logger = logging.getLogger(__name__)


def utcnow() -> datetime.datetime:
    """The wall clock (the default ``clock``)."""
    return datetime.datetime.now(datetime.UTC)


def ns(moment: datetime.datetime) -> int:
    """Unix nanoseconds, as the lock takes them."""
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1_000


@dataclasses.dataclass(frozen=True, slots=True)
class Observed:
    """One read of a node's cycle."""

    view: NodeView
    entry: LockEntry | None
    cycle: CycleView

    @property
    def phase(self) -> Phase:
        return phase_of(self.cycle)

    @property
    def entry_unschedulable(self) -> bool | None:
        return self.entry.unschedulable if self.entry is not None else None


class Core:
    """Observation, per-node serialization and drains over :class:`~pykured.fleetlock.ops.NodeOps`."""

    def __init__(
        self, *, ops: NodeOps, drain_retry_s: float, clock: Callable[[], datetime.datetime] = utcnow
    ) -> None:
        self.ops = ops
        self.drain_retry_s = drain_retry_s
        self._clock = clock
        self.workers = Workers()
        self._failures: dict[str, tuple[datetime.datetime, str]] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()

    def node_lock(self, node: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(node, threading.Lock())

    def observe(self, node: str, now: datetime.datetime) -> Observed:
        raw = self.ops.kube.get_node(node)
        view = NodeView.from_obj(raw)
        entry = self.ops.lock.holding(now_ns=ns(now), honour_ttl=False, node_id=node)
        cycle = CycleView(
            holding=entry is not None,
            fleetlock=FLEETLOCK_ID_ANNOTATION in view.annotations,
            boot_id=view.boot_id,
            reboot_boot_id=view.reboot_boot_id,
            granted_at=view.reboot_triggered_at,
            release_after=view.release_after,
            ready=view.ready,
            ready_since=ready_since(raw),
            draining_here=self.workers.live(node) is not None,
        )
        return Observed(view, entry, cycle)

    def failure(self, node: str, now: datetime.datetime) -> str | None:
        """The last drain failure of ``node`` while its retry back-off lasts."""
        failed = self._failures.get(node)
        return failed[1] if failed is not None and now < failed[0] else None

    def start_drain(self, node: str) -> Worker:
        return self.workers.start(node, lambda w: self._drain(node, w), lambda w: self._finish(node, w))

    def _drain(self, node: str, worker: Worker) -> str | None:
        self._failures.pop(node, None)
        book = self.ops.book_factory(node)
        drainer = self.ops.drainer_factory(node, worker.cancel)
        try:
            book.apply_labels(self.ops.b.pre_labels)
            self.ops.notifier.notify_drain(node)
            self.ops.event(node, "Draining", "cordoning and draining the node for Zincati's reboot")
            logger.info("Draining node %s", node)
            drainer.cordon()
            drainer.drain()
        except errors.PykuredError as exc:
            return str(exc) or type(exc).__name__
        return None

    def _finish(self, node: str, worker: Worker) -> None:
        with self.node_lock(node):
            if worker.cancel.is_set():
                return
            now = self._clock()
            entry = self.ops.lock.holding(now_ns=ns(now), honour_ttl=False, node_id=node)
            if entry is None:
                logger.warning("Node %s lost its reboot slot while draining", node)
                return
            if worker.error is not None and not self.ops.b.force_reboot:
                logger.error("Unable to cordon or drain %s: %s, releasing the lock", node, worker.error)
                self.ops.event(node, "DrainFailed", worker.error, warning=True)
                self.ops.count("drain_failed")
                until = now + datetime.timedelta(seconds=self.drain_retry_s)
                self._failures[node] = (until, worker.error)
                self.ops.abandon(node, self.ops.book_factory(node).view(), entry.unschedulable)
                return
            if worker.error is not None:
                logger.warning(
                    "Unable to cordon or drain %s: %s; granting anyway (--force-reboot)", node, worker.error
                )
            self.ops.grant(node, now=now)

    def cleanup(self, node: str, obs: Observed) -> None:
        """FleetLock memory without a slot: uncordon unless already done, then forget."""
        logger.info("Node %s no longer holds its FleetLock slot: cleaning up", node)
        if obs.cycle.release_after is None:
            self.ops.uncordon_if_ours(node, obs.view, None)
        self.ops.forget(node)

    def stop(self) -> None:
        """Cancel the drains (a restarted pykured resumes them)."""
        self.workers.stop()
