"""The lock backends by name: how each is built for the agent and opened for an operator — the one
vocabulary of backend names.

A :class:`Backend` is registered under its ``--lock-backend`` value (``daemonset``: kured's DaemonSet
annotation; ``lease``: one Lease per slot) and its ``label``, the word its locks print in logs, metrics and
the operator commands (``annotation``, ``lease``); nothing outside this module compares either word. It has
``build``, which makes it from the configuration and the API client, either as the agent's lock
(``guard_only=False``) or only to be read by the guard (``guard_only=True``: a missing DaemonSet then holds
no slot, and no group pacing wraps it); ``open``, which makes it for inspection, acting for no node; and
``view``, its :class:`~pykured.lock.operator.OperatorView` (by default a
:class:`~pykured.lock.operator.PlainView` of what ``open`` makes). It names the flags that need it
(``serves``). :data:`BACKENDS` holds the two, kured's first (the default); a :class:`LockRegistry` with more
(tests, a new backend) is passed where the default is taken.

* :func:`build_lock` is the agent's lock: the configured backend, guarded by every other registered one
  (:class:`~pykured.lock.switch.GuardedLock`), so a rolling change of ``--lock-backend`` never double-books.
* :func:`open_views` opens every registered backend for the operator commands (``pykured lock
  status|release``, ``pykured status``, ``pykured plan``), which loop over the views;
  :func:`open_read_only` opens them as :class:`~pykured.lock.base.LockView`.

A new backend is its own module (its :class:`~pykured.lock.base.Lock`, and its view if
:class:`~pykured.lock.operator.PlainView` does not fit) and one :class:`Backend` added to :data:`BACKENDS`.

This layer is below the configuration's, so the flags it reads are the :class:`LockConfig` protocol, which
:class:`pykured.config.Config` satisfies; the operator commands say where the lock is with :class:`LockPlace`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Protocol

from pykured.core.errors import KubeError, LockError, NotFoundError
from pykured.gocompat.goflags import Duration
from pykured.lock.annotation import WAITING_POLL, AnnotationLock, AnnotationView
from pykured.lock.base import GoneHolderHook, Lock, LockView
from pykured.lock.budget import Budget
from pykured.lock.counts import daemonset_count, label_count
from pykured.lock.lease import LeaseLock
from pykured.lock.liveness import LIVENESS_INTERVAL
from pykured.lock.operator import OperatorView, PlainView
from pykured.lock.paced import GroupPacedLock, node_label_lookup
from pykured.lock.switch import GuardedLock

if TYPE_CHECKING:
    from pykured.kube.api import KubeApi


class LockConfig(Protocol):
    """The flags the backends are built from (:class:`pykured.config.Config` has them all)."""

    @property
    def lock_backend(self) -> str: ...
    @property
    def node_id(self) -> str: ...
    @property
    def ds_namespace(self) -> str: ...
    @property
    def ds_name(self) -> str: ...
    @property
    def lock_annotation(self) -> str: ...
    @property
    def lease_name_prefix(self) -> str: ...
    @property
    def concurrency(self) -> int: ...
    @property
    def lock_ttl(self) -> Duration: ...
    @property
    def concurrency_label(self) -> str: ...
    @property
    def concurrency_per_label(self) -> int | str: ...
    @property
    def max_unavailable(self) -> int | str: ...


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class LockHooks:
    """What the agent plugs into every backend it builds."""

    on_gone_holder: GoneHolderHook | None = None
    """Called when a slot held by a deleted Node is freed (the metric)."""
    may_take: Callable[[], bool] | None = None
    """Asked right before a slot is written (the maintenance window)."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class LockPlace:
    """Where the operator commands look for the lock: the DaemonSet and its annotation, the Leases."""

    namespace: str
    ds_name: str
    annotation: str
    lease_prefix: str
    lease_namespace: str | None = None
    """The Leases' namespace when not ``namespace``."""


class Build(Protocol):
    def __call__(self, cfg: LockConfig, kube: KubeApi, *, guard_only: bool, hooks: LockHooks) -> Lock: ...


class Open(Protocol):
    def __call__(self, kube: KubeApi, place: LockPlace) -> LockView: ...


class OpenView(Protocol):
    def __call__(self, kube: KubeApi, place: LockPlace) -> OperatorView: ...


@dataclasses.dataclass(frozen=True, slots=True)
class Backend:
    """One lock backend: its ``--lock-backend`` name, how it is built, how it is opened for inspection, the
    word it is printed as, its view for the operator commands and the flags that need it."""

    name: str
    build: Build
    open: Open
    label: str = ""
    """The word its locks print (their ``backend``: logs, metrics, ``pykured lock status``); default
    ``name``."""
    view: OpenView | None = None
    """Its view for the operator commands; default a :class:`PlainView` of what ``open`` makes."""
    serves: frozenset[str] = frozenset()
    """The flags (without ``--``) that work with this backend and with no backend that does not list them."""
    about: str = ""
    """What it is, for ``--lock-backend``'s help (``daemonset (<about>)``)."""

    def __post_init__(self) -> None:
        if not self.label:
            object.__setattr__(self, "label", self.name)

    def open_view(self, kube: KubeApi, place: LockPlace) -> OperatorView:
        """Its view for the operator commands, acting for no node."""
        return self.view(kube, place) if self.view is not None else PlainView(self.open(kube, place))


@dataclasses.dataclass(frozen=True, slots=True)
class LockRegistry:
    """The backends by name, in order (the guard checks the others in this order)."""

    backends: tuple[Backend, ...] = ()

    def __post_init__(self) -> None:
        names = [b.name for b in self.backends]
        if len(set(names)) != len(names):
            raise ValueError(f"lock backends registered twice: {names}")
        words = [w for b in self.backends for w in {b.name, b.label}]
        if len(set(words)) != len(words):
            raise ValueError(f"lock backend words registered twice: {words}")

    def register(self, backend: Backend) -> LockRegistry:
        """This registry with ``backend`` added (a name registered already raises ``ValueError``)."""
        return LockRegistry((*self.backends, backend))

    @property
    def names(self) -> tuple[str, ...]:
        """The ``--lock-backend`` values."""
        return tuple(b.name for b in self.backends)

    @property
    def labels(self) -> tuple[str, ...]:
        """The words the backends are printed as."""
        return tuple(b.label for b in self.backends)

    @property
    def default(self) -> Backend:
        """The first registered: ``--lock-backend``'s default (kured's)."""
        return self.backends[0]

    def __iter__(self) -> Iterator[Backend]:
        return iter(self.backends)

    def get(self, name: str) -> Backend:
        """The backend registered as ``name``; ``LockError`` when there is none."""
        for backend in self.backends:
            if backend.name == name:
                return backend
        raise LockError(f"unknown lock backend {name!r} (choose from {', '.join(self.names)})")

    def find(self, word: str) -> Backend | None:
        """The backend whose name or label is ``word``; ``None`` when there is none."""
        return next((b for b in self.backends if word in (b.name, b.label)), None)

    def serving(self, flag: str) -> tuple[str, ...]:
        """The names of the backends ``flag`` (without ``--``) works with (see :attr:`Backend.serves`)."""
        return tuple(b.name for b in self.backends if flag in b.serves)


def node_exists_on(kube: KubeApi) -> Callable[[str], bool]:
    """Whether a Node exists (one GET; an API failure counts as existing: the guard then stays on)."""

    def node_exists(name: str) -> bool:
        try:
            kube.get_node(name)
        except NotFoundError:
            return False
        except KubeError:
            return True
        return True

    return node_exists


def build_lock(
    cfg: LockConfig, kube: KubeApi, *, hooks: LockHooks | None = None, registry: LockRegistry | None = None
) -> Lock:
    """The agent's lock: the ``cfg.lock_backend`` backend, guarded by every other one of ``registry``
    (:data:`BACKENDS` by default)."""
    registry = BACKENDS if registry is None else registry
    hooks = LockHooks() if hooks is None else hooks
    chosen = registry.get(cfg.lock_backend)
    primary = chosen.build(cfg, kube, guard_only=False, hooks=hooks)
    others = [b.build(cfg, kube, guard_only=True, hooks=hooks) for b in registry if b.name != chosen.name]
    return GuardedLock(primary, *others, node_exists=node_exists_on(kube))


def open_read_only(
    kube: KubeApi, place: LockPlace, *, registry: LockRegistry | None = None
) -> dict[str, LockView]:
    """Every backend of ``registry`` (:data:`BACKENDS` by default) opened for inspection, by name: each acts
    for no node, takes no slot and gives up a read after a few seconds (an operator is waiting)."""
    registry = BACKENDS if registry is None else registry
    return {b.name: b.open(kube, place) for b in registry}


def open_views(
    kube: KubeApi, place: LockPlace, *, registry: LockRegistry | None = None
) -> tuple[OperatorView, ...]:
    """The view of every backend of ``registry`` (:data:`BACKENDS` by default), in its order: what the
    operator commands loop over. Opening makes no request; each view acts for no node and gives up a read
    after a few seconds (an operator is waiting)."""
    registry = BACKENDS if registry is None else registry
    return tuple(b.open_view(kube, place) for b in registry)


# -- the two backends ----------------------------------------------------------------------------------------


def max_unavailable(cfg: LockConfig) -> Budget | None:
    """``--max-unavailable`` as a budget (``None``: off, kured's ``--concurrency`` alone)."""
    return None if cfg.max_unavailable == "" else Budget.of(cfg.max_unavailable)


_ZERO = Duration(0)


def _build_annotation(cfg: LockConfig, kube: KubeApi, *, guard_only: bool, hooks: LockHooks) -> Lock:
    return AnnotationLock(
        kube,
        namespace=cfg.ds_namespace,
        ds_name=cfg.ds_name,
        annotation=cfg.lock_annotation,
        node_id=cfg.node_id,
        concurrency=cfg.concurrency,
        ttl=cfg.lock_ttl,
        on_gone_holder=hooks.on_gone_holder,
        missing_ok=guard_only,
        may_take=hooks.may_take,
        poll_interval=WAITING_POLL,
        liveness_interval=LIVENESS_INTERVAL,
        budget=None if guard_only else max_unavailable(cfg),
        watch=not guard_only,
    )


def _open_annotation(kube: KubeApi, place: LockPlace) -> AnnotationLock:
    return AnnotationLock(
        kube,
        namespace=place.namespace,
        ds_name=place.ds_name,
        annotation=place.annotation,
        node_id="",
        concurrency=0,
        ttl=_ZERO,
        retry_interval=1.0,
        retry_timeout=5.0,
        watch=False,
    )


def _view_annotation(kube: KubeApi, place: LockPlace) -> OperatorView:
    return AnnotationView(_open_annotation(kube, place))


def _build_lease(cfg: LockConfig, kube: KubeApi, *, guard_only: bool, hooks: LockHooks) -> Lock:
    budget = max_unavailable(cfg)
    lease = LeaseLock(
        kube,
        may_take=hooks.may_take,
        namespace=cfg.ds_namespace,
        prefix=cfg.lease_name_prefix,
        node_id=cfg.node_id,
        concurrency=cfg.concurrency,
        ttl=cfg.lock_ttl,
        on_gone_holder=hooks.on_gone_holder,
        liveness_interval=LIVENESS_INTERVAL,
        budget=None if guard_only else budget,
        count=daemonset_count(kube, namespace=cfg.ds_namespace, name=cfg.ds_name),
    )
    if guard_only or not cfg.concurrency_label:
        return lease
    share = Budget.of(cfg.concurrency_per_label)
    return GroupPacedLock(
        lease,
        kube,
        namespace=cfg.ds_namespace,
        prefix=cfg.lease_name_prefix,
        label=cfg.concurrency_label,
        limit=share.value,
        group_of=node_label_lookup(kube, cfg.concurrency_label),
        share=share if share.percent else None,
        group_count=label_count(kube, label=cfg.concurrency_label) if share.percent else None,
    )


def _open_lease(kube: KubeApi, place: LockPlace) -> LockView:
    return LeaseLock(
        kube,
        namespace=place.lease_namespace or place.namespace,
        prefix=place.lease_prefix,
        node_id="",
        concurrency=1,
        ttl=_ZERO,
        retry_timeout=5.0,
    )


DAEMONSET = Backend(
    "daemonset",
    _build_annotation,
    _open_annotation,
    label=AnnotationLock.backend,
    view=_view_annotation,
    about="kured's annotation",
)
"""kured's lock: a JSON annotation on the DaemonSet (:mod:`pykured.lock.annotation`)."""
LEASE = Backend(
    "lease",
    _build_lease,
    _open_lease,
    label=LeaseLock.backend,
    serves=frozenset({"concurrency-label", "resume-rolls"}),
    about="coordination.k8s.io Leases <lease-prefix>-<slot>",
)
"""One Lease per slot, watched (:mod:`pykured.lock.lease`), paced per group with ``--concurrency-label``; the
lock queue of ``--resume-rolls`` lives beside it."""
BACKENDS = LockRegistry((DAEMONSET, LEASE))
"""The registered backends, kured's first (the default)."""
