"""The ``Lock`` protocol: the daemon's (and FleetLock's) only view of the reboot lock.

A lock has ``concurrency`` slots; each slot is held by a node id (or ``manual``). Every backend — kured's
DaemonSet annotation (:mod:`pykured.lock.annotation`) and one Lease per slot (:mod:`pykured.lock.lease`),
registered by their ``--lock-backend`` names in :mod:`pykured.lock.registry` — implements it, and so does
every wrapper (:class:`pykured.lock.switch.GuardedLock`, :class:`pykured.lock.paced.GroupPacedLock`), which
forwards what it does not change, ``watched`` included. :class:`LockView` is a backend opened for an
operator's inspection; the operator commands see it through its view (:mod:`pykured.lock.operator`).

Invariants every implementation keeps:

* ``acquire`` never lets more than ``concurrency`` unexpired holders exist (with ``--max-unavailable``, the
  limit computed at that ``acquire``, never above ``--concurrency``); it is reentrant (a holder
  re-acquiring gets ``acquired=True`` without a write) and never overwrites a value it cannot read.
* ``holding(honour_ttl=False)`` returns the entry even after its TTL expired, so the holder always finishes
  its own post-reboot cycle (uncordon from its ``unschedulable`` memory) — kured #63 fixed. The daemon's
  other checks use the default ``honour_ttl=True`` (kured's ``Holding``).
* ``release`` does not sleep: the ``--lock-release-delay`` belongs to the daemon (stored on the Node, so a
  pod restart does not restart it). It returns whether an entry was removed.
* Methods take ``node_id`` so FleetLock can hold slots for nodes other than the one it runs on; ``None``
  means the lock's own node.
* ``wait_for_change`` blocks until the lock may have changed or ``timeout`` passed (a watch for Leases, and
  for the annotation where RBAC grants it; else a GET poll, as kured's RBAC grants no watch); it never
  raises. ``watched`` says which:
  true when a freed slot ends the wait by itself, so the daemon need not look again before ``--period``
  (false: it looks at least every minute).
* API failures that outlast the backend's retries raise :class:`~pykured.core.errors.LockError`.
* Implementations may be shared between threads (FleetLock serves requests concurrently): every decision is
  made on freshly read state and written conditionally; the cached ``resourceVersion`` used to start a
  watch is only a hint.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Protocol

from pykured.core.errors import ForbiddenError
from pykured.lock.record import LockEntry


def forbidden(exc: BaseException | None) -> bool:
    """Whether ``exc`` (a ``LockError``) was caused by RBAC denying the request (HTTP 403)."""
    while exc is not None:
        if isinstance(exc, ForbiddenError):
            return True
        exc = exc.__cause__
    return False


GoneHolderHook = Callable[[str], None]
"""Called with the node id when a lock held by a deleted Node is freed (the metric hook)."""


@dataclasses.dataclass(frozen=True, slots=True)
class AcquireResult:
    """The outcome of one acquire attempt: whether we hold a slot, and the unexpired holders seen.

    ``reentrant`` is true when the node already held its slot and nothing was written.
    """

    acquired: bool
    holders: tuple[LockEntry, ...] = ()
    reentrant: bool = False

    @property
    def holder_names(self) -> str:
        """The holders as kured logs them (``Lock already held: <names>``)."""
        return ", ".join(h.node_id for h in self.holders)


class Lock(Protocol):
    """The reboot lock, whatever stores it."""

    @property
    def backend(self) -> str:
        """The word the backend is printed as in logs, metrics and ``pykured lock status`` (its registry
        entry's ``label``: ``annotation``, ``lease``)."""
        ...

    @property
    def node_id(self) -> str:
        """The node this lock acts for when a method gets ``node_id=None``."""
        ...

    @property
    def concurrency(self) -> int:
        """The number of slots (``--concurrency``, at least 1), lowered by a ``--max-unavailable`` budget as
        the last ``acquire`` computed it (:mod:`pykured.lock.budget`)."""
        ...

    def acquire(self, *, unschedulable: bool, now_ns: int, node_id: str | None = None) -> AcquireResult:
        """Take a free (or expired, or gone-holder) slot; ``unschedulable`` is remembered with it."""
        ...

    def holding(
        self, *, now_ns: int, honour_ttl: bool = True, node_id: str | None = None
    ) -> LockEntry | None:
        """The node's entry if it holds a slot (an expired one too when ``honour_ttl`` is false)."""
        ...

    def release(self, *, node_id: str | None = None) -> bool:
        """Free the node's slot; ``False`` when it held none."""
        ...

    def holders(self, *, now_ns: int) -> tuple[LockEntry, ...]:
        """The unexpired holders (an unreadable value counts as one
        :data:`~pykured.lock.record.UNKNOWN_HOLDER`)."""
        ...

    @property
    def watched(self) -> bool:
        """Whether a freed slot ends :meth:`wait_for_change` by itself (a watch), rather than a poll."""
        ...

    def wait_for_change(self, timeout: float) -> None:
        """Block until the lock may have changed, or ``timeout`` seconds passed."""
        ...


class LockView(Lock, Protocol):
    """A backend opened for an operator's inspection (``pykured lock status``, the fleet views) and release:
    :func:`pykured.lock.registry.open_read_only` opens every registered backend so, and a
    :class:`~pykured.lock.operator.PlainView` wraps one for the operator commands. It acts for no node
    (``node_id`` is empty) and takes no slot."""

    @property
    def where(self) -> str:
        """Where the backend keeps its slots, for messages (``namespace/name``)."""
        ...

    def entries(self) -> Sequence[LockEntry]:
        """Every holder, expired or not. ``LockError`` when the lock cannot be read, or (the annotation) its
        value cannot be decoded (``__cause__`` is then no ``KubeError``)."""
        ...
