"""Drain workers: one background drain per node, so a FleetLock request never waits for a drain to end.

Concept: Zincati's pre-reboot request is answered 423 ``drain_in_progress`` while the drain runs (optionally
after a bounded long-poll), and 200 only once the worker has drained and recorded the grant. The worker
owns nothing: its progress is the Node (cordoned, ``reboot-boot-id`` unset → still draining), so a restarted
pykured simply starts a new worker, and a cancelled one writes nothing.

Invariants: at most one live worker per node; ``cancel`` makes the drainer stop early and the worker skip
its final step; the final step runs under the node's lock (passed in as ``finish``).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class Worker:
    """One drain of one node."""

    node: str
    cancel: threading.Event = dataclasses.field(default_factory=threading.Event)
    done: threading.Event = dataclasses.field(default_factory=threading.Event)
    error: str | None = None
    thread: threading.Thread | None = None

    @property
    def live(self) -> bool:
        """Still draining (or finishing)."""
        return not self.done.is_set()


class Workers:
    """The live drain workers of this process, by node."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_node: dict[str, Worker] = {}

    def live(self, node: str) -> Worker | None:
        """The node's running worker, if any."""
        with self._lock:
            worker = self._by_node.get(node)
            return worker if worker is not None and worker.live else None

    def start(
        self,
        node: str,
        drain: Callable[[Worker], str | None],
        finish: Callable[[Worker], None],
        *,
        cancel: threading.Event | None = None,
    ) -> Worker:
        """Start ``drain`` (returns an error text or ``None``), then ``finish``, unless one already runs;
        ``cancel``: the event that stops it (a new one by default)."""
        with self._lock:
            current = self._by_node.get(node)
            if current is not None and current.live:
                return current
            worker = Worker(node) if cancel is None else Worker(node, cancel=cancel)
            self._by_node[node] = worker

        def run() -> None:
            try:
                try:
                    worker.error = drain(worker)
                except Exception as exc:  # an unexpected failure is a failed drain, not a silent retry loop
                    logger.exception("FleetLock drain of node %s failed unexpectedly", node)
                    worker.error = f"internal error while draining: {type(exc).__name__}: {exc}"
                if not worker.cancel.is_set():
                    finish(worker)
            except Exception:  # the final step failed (API down): the next request or pass retries
                logger.exception("FleetLock could not finish the drain of node %s", node)
            finally:
                worker.done.set()

        worker.thread = threading.Thread(target=run, name=f"fleetlock-drain-{node}", daemon=True)
        worker.thread.start()
        return worker

    def stop(self, timeout: float = 5.0) -> None:
        """Cancel every worker and wait a little for them to end."""
        with self._lock:
            workers = list(self._by_node.values())
        for worker in workers:
            worker.cancel.set()
        for worker in workers:
            worker.done.wait(timeout)
