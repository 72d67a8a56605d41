"""Switching lock backends safely: hold the primary lock only if the other backend agrees.

During a rolling change of ``--lock-backend`` some pods use the DaemonSet annotation and others the Leases.
Each backend alone keeps its own limit, but together they could let ``2 × concurrency`` nodes reboot.
:class:`GuardedLock` wraps the primary backend and, *after* a successful primary acquire, reads the holders
of both backends again; if together they exceed ``concurrency`` it releases the primary slot and reports
"not acquired" (holders of the other backend included). A reentrant acquire (the node already held its slot,
e.g. mid-cycle) is never undone.

Why it is safe: every guarded acquire writes first and reads afterwards (Dekker's pattern on one
linearizable store, etcd). Of any set of nodes that would pass together, the one that wrote last reads
after all the others wrote, sees them all and backs off. Two contenders may both back off; they retry on
the next attempt (the backends' jitter breaks the tie).

Only other holders that are unexpired and whose Node still exists (``node_exists``, when given) count.
An unreadable other backend (RBAC: kured's role grants no Leases → 403) is skipped with a debug log, so the
guard costs nothing where the other backend was never used. kured itself does not check Leases, so a
migration from kured should first run pykured on the annotation backend (identical to kured), then switch.

This module knows only the ``Lock`` protocol; ``__main__`` builds the two backends.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from pykured.core.errors import LockError
from pykured.lock.base import AcquireResult, Lock, forbidden
from pykured.lock.record import LockEntry

logger = logging.getLogger(__name__)


class GuardedLock:
    """A ``Lock`` that defers to ``other`` (the backend being switched from or to) before holding."""

    def __init__(
        self,
        primary: Lock,
        other: Lock | None,
        *,
        node_exists: Callable[[str], bool] | None = None,
    ) -> None:
        self._primary = primary
        self._other = other
        self._node_exists = node_exists

    @property
    def backend(self) -> str:
        return self._primary.backend

    @property
    def node_id(self) -> str:
        return self._primary.node_id

    @property
    def concurrency(self) -> int:
        return self._primary.concurrency

    def _other_holders(self, now_ns: int) -> tuple[LockEntry, ...] | None:
        """The other backend's live holders, or ``None`` when it cannot be read (skip the guard)."""
        if self._other is None:
            return None
        try:
            found = self._other.holders(now_ns=now_ns)
        except LockError as exc:
            if forbidden(exc):
                logger.debug("Not checking the %s lock: %s", self._other.backend, exc)
                return None
            raise
        if self._node_exists is None:
            return found
        return tuple(h for h in found if self._node_exists(h.node_id))

    def acquire(self, *, unschedulable: bool, now_ns: int, node_id: str | None = None) -> AcquireResult:
        me = node_id or self.node_id
        result = self._primary.acquire(unschedulable=unschedulable, now_ns=now_ns, node_id=me)
        if not result.acquired or result.reentrant or self._other is None:
            return result
        try:
            others = self._other_holders(now_ns)
            if others is None:
                return result
            mine = self._primary.holders(now_ns=now_ns)
        except LockError:
            self._primary.release(node_id=me)
            raise
        everyone = {h.node_id: h for h in (*mine, *others)}
        if len(everyone) <= self.concurrency:
            return result
        logger.info(
            "Lock on the %s backend taken, but the %s backend is held too (%s): backing off",
            self._primary.backend,
            self._other.backend,
            ", ".join(h.node_id for h in others),
        )
        self._primary.release(node_id=me)
        return AcquireResult(False, tuple(h for h in everyone.values() if h.node_id != me))

    def holding(
        self, *, now_ns: int, honour_ttl: bool = True, node_id: str | None = None
    ) -> LockEntry | None:
        return self._primary.holding(now_ns=now_ns, honour_ttl=honour_ttl, node_id=node_id)

    def release(self, *, node_id: str | None = None) -> bool:
        return self._primary.release(node_id=node_id)

    def holders(self, *, now_ns: int) -> tuple[LockEntry, ...]:
        return self._primary.holders(now_ns=now_ns)

    @property
    def watched(self) -> bool:
        """Whether the primary backend's wait ends by itself when a slot frees (the others are only read)."""
        return self._primary.watched

    def wait_for_change(self, timeout: float) -> None:
        self._primary.wait_for_change(timeout)
