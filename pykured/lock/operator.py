"""One lock backend as the operator commands see it: its holders, a value it cannot read, its release.

``pykured lock status|release``, ``pykured status`` and ``pykured plan`` loop over one
:class:`OperatorView` per registered backend (:func:`pykured.lock.registry.open_views`) and never ask which
backend a view is: what differs between backends — the order holders are listed in, a stored value that
cannot be decoded, the words of its messages, whether a caller may lack the right to read it — is said by the
view. A backend whose every stored value decodes (the Leases, a new backend) needs no view of its own:
:class:`PlainView` wraps the :class:`~pykured.lock.base.LockView` it is opened as. kured's annotation, which
may hold text no one can decode, has its own (:class:`pykured.lock.annotation.AnnotationView`).

Invariants every view keeps:

* ``read`` never raises for the API or the stored value: it answers a :class:`Reading` (holders, an
  unreadable value, or the error), and reads once.
* ``release`` writes its messages to ``out`` as it goes (one line each) and answers a :class:`Released`; a
  failure it reports is ``FAILED``, a failure it tolerates (see :attr:`OperatorView.optional`) ``NOT_HELD``.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Protocol, TextIO

from pykured.core.errors import KubeError, LockError
from pykured.lock.base import LockView, forbidden
from pykured.lock.record import LockEntry


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Unreadable:
    """A stored value that cannot be decoded: it counts as held until it is deleted."""

    error: LockError
    """Why it cannot be decoded."""
    note: str
    """What ``pykured lock status`` prints about it (whole lines: the value, how to fix it)."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Reading:
    """One read of a backend: its holders (expired ones too), in the order they are listed."""

    holders: tuple[LockEntry, ...] = ()
    unreadable: Unreadable | None = None
    """The stored value cannot be decoded (then ``holders`` is empty)."""
    error: LockError | KubeError | None = None
    """The backend could not be read (then ``holders`` is empty)."""


class Released(enum.Enum):
    """What an operator's release did on one backend."""

    FREED = "freed"
    """Something was freed: the node's slots, or an unreadable value."""
    NOT_HELD = "not held"
    """The node held nothing there (or the backend could not be read and that is tolerated)."""
    FAILED = "failed"
    """The release failed; the view said why on ``out``."""


class OperatorView(Protocol):
    """One backend opened for an operator: acting for no node, taking no slot."""

    @property
    def backend(self) -> str:
        """The word printed for the backend (its locks' ``backend``: logs, metrics, ``pykured lock
        status``)."""
        ...

    @property
    def subject(self) -> str:
        """The backend and where it keeps its slots, starting a message (``lease lock ns/prefix-*``)."""
        ...

    @property
    def optional(self) -> bool:
        """Whether a caller may lack the right to read it (kured's RBAC grants only kured's DaemonSet): a 403
        is then only noted, unless the operator named this backend."""
        ...

    def read(self) -> Reading:
        """The holders as stored now (one read)."""
        ...

    def release(self, node: str, *, out: TextIO, named: bool) -> Released:
        """Free ``node``'s slots; ``named``: the operator chose this backend (no failure is tolerated)."""
        ...


class PlainView:
    """The view of a backend whose every stored value decodes, over the :class:`LockView` it is opened as:
    the holders sorted by node, a release freeing the node's slots."""

    def __init__(self, lock: LockView, *, optional: bool = True) -> None:
        self._lock = lock
        self._optional = optional
        """By default a backend of pykured's own: kured's RBAC grants nothing on it."""

    @property
    def optional(self) -> bool:
        return self._optional

    @property
    def backend(self) -> str:
        return self._lock.backend

    @property
    def subject(self) -> str:
        return f"{self._lock.backend} lock {self._lock.where}"

    def read(self) -> Reading:
        try:
            entries = self._lock.entries()
        except (LockError, KubeError) as exc:
            return Reading(error=exc)
        return Reading(holders=tuple(sorted(entries, key=lambda e: e.node_id)))

    def release(self, node: str, *, out: TextIO, named: bool) -> Released:
        try:
            if not self._lock.release(node_id=node):
                return Released.NOT_HELD
        except LockError as exc:
            if named or not (self.optional and forbidden(exc)):
                out.write(f"{self.subject}: {exc}\n")
                return Released.FAILED
            return Released.NOT_HELD
        out.write(f"Released the {self._lock.backend} lock of {node} in {self._lock.where}\n")
        return Released.FREED
