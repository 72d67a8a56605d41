"""GuardedLock on the real API server: a rolling change of the lock backend never lets more than
``concurrency`` nodes through (races), and kured's RBAC skips the Lease check (its logic: tests/lock/)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from pykured.core.errors import ForbiddenError, LockError
from pykured.lock.base import AcquireResult
from pykured.lock.record import LockEntry
from pykured.lock.switch import GuardedLock
from pykured_dev.testenv.objects import ObjectHelpers
from tests.lock.conftest import (
    annotation_history,
    assert_one_turn_each,
    lease_history,
    make_annotation_lock,
    make_lease_lock,
    race,
)
from tests.testenv import TestEnv

# -- unit: the guard's decisions over fake locks --------------------------------------------------


class FakeLock:
    def __init__(
        self, backend: str, node: str, *, holders: tuple[str, ...] = (), concurrency: int = 1
    ) -> None:
        self.backend = backend
        self.node_id = node
        self.concurrency = concurrency
        self.held: list[str] = list(holders)
        self.error: LockError | None = None
        self.released: list[str] = []

    def acquire(self, *, unschedulable: bool, now_ns: int, node_id: str | None = None) -> AcquireResult:
        me = node_id or self.node_id
        if me in self.held:
            return AcquireResult(True, self._entries(), reentrant=True)
        if len(self.held) >= self.concurrency:
            return AcquireResult(False, self._entries())
        self.held.append(me)
        return AcquireResult(True, self._entries())

    def _entries(self) -> tuple[LockEntry, ...]:
        return tuple(LockEntry(n) for n in self.held)

    def holding(
        self, *, now_ns: int, honour_ttl: bool = True, node_id: str | None = None
    ) -> LockEntry | None:
        return LockEntry(self.node_id) if self.node_id in self.held else None

    def release(self, *, node_id: str | None = None) -> bool:
        me = node_id or self.node_id
        self.released.append(me)
        if me in self.held:
            self.held.remove(me)
            return True
        return False

    def holders(self, *, now_ns: int) -> tuple[LockEntry, ...]:
        if self.error is not None:
            raise self.error
        return self._entries()

    def wait_for_change(self, timeout: float) -> None:
        return None


def forbidden_error() -> LockError:
    try:
        raise ForbiddenError("leases is forbidden (HTTP 403)", status=403)
    except ForbiddenError as exc:
        try:
            raise LockError("cannot list the lock leases") from exc
        except LockError as wrapped:
            return wrapped


@pytest.mark.k8s
def test_kured_rbac_skips_the_lease_check(k8s: TestEnv, nodes: Any) -> None:
    namespace = k8s.new_namespace()
    k8s.create_daemonset(namespace, "kured")
    k8s.apply_rbac_kured(namespace, "kured")
    user, groups = ObjectHelpers.kured_identity(namespace)
    kured = k8s.kube_as(user, list(groups))
    (node,) = nodes(1)
    guard = GuardedLock(make_annotation_lock(kured, namespace, node), make_lease_lock(kured, namespace, node))
    assert guard.acquire(unschedulable=False, now_ns=time.time_ns()).acquired


@pytest.mark.k8s
@pytest.mark.slow
@pytest.mark.parametrize("concurrency", [1, 3], ids=["concurrency-1", "concurrency-3"])
def test_race_during_a_backend_switch(k8s: TestEnv, lock_ns: str, nodes: Any, concurrency: int) -> None:
    """20 contenders, half still on the annotation and half already on Leases, each guarded by the other."""
    names = nodes(20)
    ann_history = annotation_history(k8s.kube(), lock_ns, "kured")
    lease_hist = lease_history(k8s.kube(), lock_ns, "pykured-lock")
    locks = []
    for i, name in enumerate(names):
        kube = k8s.kube_as("pykured-admin", ["system:masters"])
        ann = make_annotation_lock(kube, lock_ns, name, concurrency=concurrency)
        lease = make_lease_lock(kube, lock_ns, name, concurrency=concurrency)
        locks.append(GuardedLock(ann, lease) if i % 2 else GuardedLock(lease, ann))
    result = race(locks, wait=0.5)
    ann_history.stop()
    lease_hist.stop()
    assert_one_turn_each(result, names, concurrency, ann_history, lease_hist)
    assert ann_history.holders_seen and lease_hist.holders_seen  # both backends were really used
