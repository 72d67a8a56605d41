"""The per-node plumbing FleetLock's operations share: observation, node locks and drain workers.

Concept: :class:`Core` reads one node's cycle (its :class:`~pykured.cycle.state.NodeState`: the Node and its
lock entry) and runs the background drain that turns ``DRAINING`` into ``GRANTED`` (or, on failure,
releases the slot as kured does). :mod:`pykured.fleetlock.service` builds the requests and the reconcile
loop on it.

Invariants:
* Everything a node's cycle does happens under that node's lock (requests, reconcile, a worker's final
  step); waiting for a drain happens outside it.
* The only memory kept here is the live workers and recent drain failures (a retry back-off); the cycle
  itself is on the Node and the lock, so a restart resumes it.
"""

from __future__ import annotations

import datetime
import logging
import threading
from collections.abc import Callable

from pykured.core import errors
from pykured.cycle.state import NodeState, unix_ns
from pykured.fleetlock.ops import NodeOps
from pykured.fleetlock.worker import Worker, Workers

logger = logging.getLogger(__name__)


def utcnow() -> datetime.datetime:
    """The wall clock (the default ``clock``)."""
    return datetime.datetime.now(datetime.UTC)


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

    def observe(self, node: str, now: datetime.datetime) -> NodeState:
        """The node's state: the Node and its lock entry (an expired one too)."""
        entry = self.ops.lock.holding(now_ns=unix_ns(now), honour_ttl=False, node_id=node)
        return self.ops.view(node, entry)

    def draining_here(self, node: str) -> bool:
        """A drain worker for ``node`` runs in this process."""
        return self.workers.live(node) is not None

    def failure(self, node: str, now: datetime.datetime) -> str | None:
        """The last drain failure of ``node`` while its retry back-off lasts."""
        failed = self._failures.get(node)
        return failed[1] if failed is not None and now < failed[0] else None

    def start_drain(self, node: str) -> Worker:
        return self.workers.start(node, lambda w: self._drain(node, w), lambda w: self._finish(node, w))

    def _drain(self, node: str, worker: Worker) -> str | None:
        self._failures.pop(node, None)
        steps = self.ops.steps(node, worker.cancel)
        try:
            failure = steps.drain(event="cordoning and draining the node for Zincati's reboot")
        except errors.PykuredError as exc:
            return str(exc) or type(exc).__name__
        if failure is None or self.ops.policy.force_reboot:
            steps.pause_before_reboot()
        return failure

    def _finish(self, node: str, worker: Worker) -> None:
        with self.node_lock(node):
            if worker.cancel.is_set():
                return
            now = self._clock()
            entry = self.ops.lock.holding(now_ns=unix_ns(now), honour_ttl=False, node_id=node)
            if entry is None:
                logger.warning("Node %s lost its reboot slot while draining", node)
                return
            if worker.error is not None and not self.ops.policy.force_reboot:
                logger.error("Unable to cordon or drain %s: %s, releasing the lock", node, worker.error)
                self.ops.event(node, "DrainFailed", worker.error, warning=True)
                self.ops.count("drain_failed")
                until = now + datetime.timedelta(seconds=self.drain_retry_s)
                self._failures[node] = (until, worker.error)
                self.ops.abandon(node, self.ops.view(node, entry))
                return
            if worker.error is not None:
                logger.warning(
                    "Unable to cordon or drain %s: %s; granting anyway (--force-reboot)", node, worker.error
                )
            self.ops.grant(node, now=now)

    def stop(self) -> None:
        """Cancel the drains (a restarted pykured resumes them)."""
        self.workers.stop()
