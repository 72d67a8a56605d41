"""GuardedLock on the real API server: a rolling change of the lock backend never lets more than
``concurrency`` nodes through (races), and kured's RBAC skips the Lease check (its logic: tests/lock/)."""

from __future__ import annotations

import time
from typing import Any

import pytest

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
