"""Holder liveness: a lock slot held by a Node that no longer exists is freed.

kured has no such check: a holder removed by the cluster autoscaler or a hardware failure keeps the lock
until ``--lock-ttl`` expires or an operator deletes the annotation, and every other node logs
``Lock already held: <gone-node>`` each period (kured issues #137, #822, #847).

pykured asks the API server for the holder's Node (``GET``, which kured's RBAC grants) while it waits for a
full lock. Only a definite 404 counts as gone; any other answer (403, 5xx, timeout) keeps the holder. The
``manual`` lock and an unreadable value's unknown holder are never freed here. Each holder is checked at most
once per ``recheck_interval`` seconds per process: an agent's is :data:`LIVENESS_INTERVAL` (5 minutes), so a
waiting node costs at most ``--concurrency`` GETs per 5 minutes (a Lease waiter looks only at its
``--period`` pass), and a gone holder's slot is freed within about 5 minutes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from pykured.core.errors import KubeError, NotFoundError
from pykured.lock.base import GoneHolderHook
from pykured.lock.record import MANUAL_HOLDER, UNKNOWN_HOLDER, LockEntry

logger = logging.getLogger(__name__)

LIVENESS_INTERVAL = 300.0
"""An agent's recheck interval per holder (seconds): every waiting node GETs each holder's Node at most this
often, so the check costs a 5,000-node fleet's waiters a few requests per second, not hundreds."""

NEVER_FREED = frozenset({"", MANUAL_HOLDER, UNKNOWN_HOLDER})


class NodeReader(Protocol):
    """The one call liveness needs (``pykured.kube.client.Kube`` has it)."""

    def get_node(self, name: str) -> dict[str, Any]: ...


class HolderLiveness:
    """Finds holders whose Node is gone, rate-limited per holder, and reports the ones freed."""

    def __init__(
        self,
        kube: NodeReader,
        *,
        recheck_interval: float | None = 30.0,
        on_gone_holder: GoneHolderHook | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._kube = kube
        self._interval = recheck_interval
        self._hook = on_gone_holder
        self._clock = clock
        self._checked: dict[str, float] = {}
        self._mutex = threading.Lock()

    def gone(self, entries: Iterable[LockEntry], *, exclude: str) -> frozenset[str]:
        """The holders among ``entries`` whose Node answered 404 (``exclude`` and NEVER_FREED are skipped).

        Always empty when the check is disabled (``recheck_interval=None``).
        """
        result: set[str] = set()
        if self._interval is None:
            return frozenset()
        for name in {e.node_id for e in entries} - NEVER_FREED - {exclude}:
            now = self._clock()
            with self._mutex:
                last = self._checked.get(name)
                if last is not None and now - last < self._interval:
                    continue
                self._checked[name] = now
            try:
                self._kube.get_node(name)
            except NotFoundError:
                result.add(name)
            except KubeError as exc:
                logger.debug("Could not check whether lock holder %s exists: %s", name, exc)
        return frozenset(result)

    def report(self, name: str, *, backend: str) -> None:
        """Log (and count) a freed slot of a gone holder."""
        logger.warning(
            "Lock held by node %s which no longer exists: releasing",
            name,
            extra={"holder": name, "backend": backend},
        )
        with self._mutex:
            self._checked.pop(name, None)
        if self._hook is not None:
            try:
                self._hook(name)
            except Exception:
                logger.exception("on_gone_holder hook failed")
