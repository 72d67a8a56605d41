"""Switching lock backends safely: hold the primary lock only if the other backends agree.

During a rolling change of ``--lock-backend`` some pods use one backend (the DaemonSet annotation) and others
another (the Leases). Each backend alone keeps its own limit, but together they could let ``n × concurrency``
nodes reboot. :class:`GuardedLock` wraps the primary backend and, *after* a successful primary acquire, reads
the holders of the primary and of every other backend; if together they exceed ``concurrency`` it releases
the primary slot and reports "not acquired" (the other backends' holders included). A reentrant acquire (the
node already held its slot, e.g. mid-cycle) is never undone.

Why it is safe: every guarded acquire writes first and reads afterwards (Dekker's pattern on one
linearizable store, etcd). Of any set of nodes that would pass together, the one that wrote last reads
after all the others wrote, sees them all and backs off. Two contenders may both back off; they retry on
the next attempt (the backends' jitter breaks the tie).

The wait is the primary's: after a back-off for another backend's holders, whose release it does not see,
the lock does not count as ``watched``, so the daemon looks again within a minute.

Only other holders that are unexpired and whose Node still exists (``node_exists``, when given) count; a
node holding slots on several backends counts once. An unreadable other backend (RBAC: kured's role grants
no Leases → 403) is skipped with a debug log, so the guard costs nothing where that backend was never used.
kured itself does not check Leases, so a migration from kured should first run pykured on the annotation
backend (identical to kured), then switch.

This module knows only the ``Lock`` protocol; :mod:`pykured.lock.registry` builds the backends.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from pykured.core.errors import LockError
from pykured.lock.base import AcquireResult, Lock, forbidden
from pykured.lock.record import LockEntry

logger = logging.getLogger(__name__)


class GuardedLock:
    """A ``Lock`` that defers to ``others`` (the backends being switched from or to) before holding."""

    def __init__(
        self,
        primary: Lock,
        *others: Lock,
        node_exists: Callable[[str], bool] | None = None,
    ) -> None:
        self._primary = primary
        self._others = others
        self._node_exists = node_exists
        self._backed_off = False
        """The last acquire backed off for another backend's holders, whose changes the wait does not see."""

    @property
    def backend(self) -> str:
        return self._primary.backend

    @property
    def node_id(self) -> str:
        return self._primary.node_id

    @property
    def concurrency(self) -> int:
        return self._primary.concurrency

    def _other_holders(self, other: Lock, now_ns: int) -> tuple[LockEntry, ...] | None:
        """``other``'s live holders, or ``None`` when it may not be read (that backend is not checked)."""
        try:
            found = other.holders(now_ns=now_ns)
        except LockError as exc:
            if forbidden(exc):
                logger.debug("Not checking the %s lock: %s", other.backend, exc)
                return None
            raise
        if self._node_exists is None:
            return found
        return tuple(h for h in found if self._node_exists(h.node_id))

    def acquire(self, *, unschedulable: bool, now_ns: int, node_id: str | None = None) -> AcquireResult:
        me = node_id or self.node_id
        result = self._primary.acquire(unschedulable=unschedulable, now_ns=now_ns, node_id=me)
        self._backed_off = False
        if not result.acquired or result.reentrant or not self._others:
            return result
        try:
            read = {other.backend: self._other_holders(other, now_ns) for other in self._others}
            others = {backend: found for backend, found in read.items() if found is not None}
            if not others:  # none may be read: the guard is off
                return result
            mine = self._primary.holders(now_ns=now_ns)
        except LockError:
            self._primary.release(node_id=me)
            raise
        everyone = {h.node_id: h for h in (*mine, *(h for found in others.values() for h in found))}
        if len(everyone) <= self.concurrency:
            return result
        logger.info(
            "Lock on the %s backend taken, but the %s backend is held too (%s): backing off",
            self._primary.backend,
            ", ".join(backend for backend, found in others.items() if found),
            ", ".join(dict.fromkeys(h.node_id for found in others.values() for h in found)),
        )
        self._primary.release(node_id=me)
        self._backed_off = True
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
        """The primary backend's, except after a back-off for another backend's holders: the wait (the
        primary's) does not see those go, so the daemon looks again within a minute."""
        return self._primary.watched and not self._backed_off

    def wait_for_change(self, timeout: float) -> None:
        self._primary.wait_for_change(timeout)
