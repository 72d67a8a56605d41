"""``--max-unavailable`` on the real API server: the count is the DaemonSet's
``status.desiredNumberScheduled`` (written as the DaemonSet controller writes it), read under the agents'
RBAC, and a race under optimistic concurrency never has more holders than the budget (the budget's
arithmetic: tests/lock/test_budget.py; the backends' use of it on FakeKube: tests/lock/test_annotation.py,
tests/lock/test_lease.py)."""

from __future__ import annotations

from typing import Any

import pytest

from pykured.lock.budget import Budget
from pykured.lock.counts import daemonset_count, label_count
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

pytestmark = pytest.mark.k8s
QUARTER = Budget(25, percent=True)
ZONE = "topology.kubernetes.io/zone"


def test_the_count_is_read_with_kureds_own_rbac(k8s: TestEnv, lock_ns: str) -> None:
    """kured's RBAC grants ``get`` on daemonsets: the agent reads the count with what it has."""
    k8s.apply_rbac_kured(lock_ns, "kured")
    kube = k8s.kube_as(*ObjectHelpers.kured_identity(lock_ns))
    count = daemonset_count(kube, namespace=lock_ns, name="kured")
    # no controller wrote a status yet: the API server answers its zero values (a 0, which allows one)
    assert count() == 0 and QUARTER.limit(count()) == 1
    k8s.schedule_daemonset(lock_ns, "kured", desired=12)
    assert count() == 12
    assert daemonset_count(kube, namespace=lock_ns, name="absent")() is None


def test_a_label_values_nodes_are_counted_with_a_label_selector(k8s: TestEnv) -> None:
    zone = k8s.unique("z")
    k8s.add_nodes(*(k8s.unique("zc") for _ in range(3)), labels={ZONE: zone})
    assert label_count(k8s.kube(), label=ZONE)(zone) == 3
    kured = k8s.kube_as(*ObjectHelpers.kured_identity("kube-system"))  # no `list` on nodes: unknown
    assert label_count(kured, label=ZONE)(zone) is None


@pytest.mark.slow
def test_a_race_on_the_annotation_lock_keeps_the_budget(k8s: TestEnv, lock_ns: str, nodes: Any) -> None:
    """12 agents with kured's RBAC, --concurrency=5, --max-unavailable=25% of 8 nodes: two at once."""
    k8s.apply_rbac_kured(lock_ns, "kured")
    k8s.schedule_daemonset(lock_ns, "kured", desired=8)
    names = nodes(12)
    history = annotation_history(k8s.kube(), lock_ns, "kured")
    kube = k8s.kube_as(*ObjectHelpers.kured_identity(lock_ns))
    locks = [make_annotation_lock(kube, lock_ns, n, concurrency=5, budget=QUARTER) for n in names]
    result = race(locks, hold=1.0)
    history.stop()
    assert_one_turn_each(result, names, 2, history)
    assert history.max_holders == 2  # the budget, not one and not --concurrency


@pytest.mark.slow
def test_a_race_on_the_lease_lock_keeps_the_budget(k8s: TestEnv, lock_ns: str, nodes: Any) -> None:
    k8s.schedule_daemonset(lock_ns, "kured", desired=8)
    names = nodes(12)
    history = lease_history(k8s.kube(), lock_ns, "pykured-lock")
    kube = k8s.kube_as("pykured-admin", ["system:masters"])
    count = daemonset_count(kube, namespace=lock_ns, name="kured")
    locks = [make_lease_lock(kube, lock_ns, n, concurrency=5, budget=QUARTER, count=count) for n in names]
    result = race(locks, hold=1.0)
    history.stop()
    assert_one_turn_each(result, names, 2, history)
    assert history.max_holders == 2


def test_an_unreadable_count_allows_one_never_concurrency(k8s: TestEnv, lock_ns: str, nodes: Any) -> None:
    """The DaemonSet has no status from a controller (it reads 0) and the other name does not exist: one at a
    time."""
    kube = k8s.kube()
    for ds in ("kured", "absent"):
        a, b = nodes(2)
        count = daemonset_count(kube, namespace=lock_ns, name=ds)
        first = make_lease_lock(kube, lock_ns, a, concurrency=5, budget=QUARTER, count=count)
        second = make_lease_lock(kube, lock_ns, b, concurrency=5, budget=QUARTER, count=count)
        assert first.acquire(unschedulable=False, now_ns=1).acquired
        assert not second.acquire(unschedulable=False, now_ns=1).acquired
        assert first.release()
