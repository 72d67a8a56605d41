"""The DaemonSet-annotation lock: a 409 between a read and a write on both API servers (FakeKube and the real
one); on the real one only, races under optimistic concurrency, an unreachable server, kured's RBAC (the
lock's logic is tested in-process: tests/lock/test_annotation.py)."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from pykured.core.errors import ConflictError, KubeError, LockError
from pykured.kube.api import KubeApi
from pykured_dev.testenv.objects import ObjectHelpers
from tests.apis import Api
from tests.lock.conftest import (
    ANNOTATION,
    FaultyKube,
    annotation_history,
    assert_one_turn_each,
    dead_kube,
    make_annotation_lock,
    race,
)
from tests.testenv import TestEnv

SINGLE_RE = re.compile(
    r'\{"nodeID":"(?P<node>[^"]+)","metadata":\{"unschedulable":(?P<u>true|false)\},'
    r'"created":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d*[1-9])?Z","TTL":(?P<ttl>\d+)\}'
)


def raw(kube: KubeApi, namespace: str) -> str | None:
    annotations = kube.get_daemonset(namespace, "kured")["metadata"].get("annotations") or {}
    value = annotations.get(ANNOTATION)
    return None if value is None else str(value)


# -- kured's behaviour ---------------------------------------------------------------------------


@pytest.mark.k8s
@pytest.mark.slow
@pytest.mark.parametrize("concurrency", [1, 3], ids=["concurrency-1", "concurrency-3"])
def test_race_of_20_never_exceeds_the_limit(k8s: TestEnv, lock_ns: str, nodes: Any, concurrency: int) -> None:
    names = nodes(20)
    history = annotation_history(k8s.kube(), lock_ns, "kured")
    locks = [
        make_annotation_lock(
            k8s.kube_as("pykured-admin", ["system:masters"]), lock_ns, n, concurrency=concurrency
        )
        for n in names
    ]
    result = race(locks)
    history.stop()
    assert_one_turn_each(result, names, concurrency, history)
    assert len(history.counts) >= 40  # every acquire and release is a stored version
    assert history.holders_seen == set(names)


def test_a_conflict_is_retried_and_respected(api: Api) -> None:
    """B writes between A's GET and A's PUT: A's PUT gets a 409, A re-reads and sees B."""
    kube, lock_ns = api.kube, api.lock_namespace()
    a, b = api.add_node(), api.add_node()
    faulty = FaultyKube(kube)
    lock_b = make_annotation_lock(kube, lock_ns, b)
    real_replace = kube.replace_daemonset
    conflicts: list[KubeError] = []

    def replace_after_b(namespace: str, name: str, obj: Any) -> Any:
        if not conflicts:
            assert lock_b.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
            try:
                return real_replace(namespace, name, obj)
            except ConflictError as exc:
                conflicts.append(exc)
                raise
        return real_replace(namespace, name, obj)

    faulty.replaced["replace_daemonset"] = replace_after_b
    result = make_annotation_lock(faulty, lock_ns, a).acquire(unschedulable=False, now_ns=time.time_ns())
    assert len(conflicts) == 1 and conflicts[0].status == 409
    assert not result.acquired and result.holder_names == b
    assert (SINGLE_RE.fullmatch(raw(kube, lock_ns) or "") or {})["node"] == b  # type: ignore[index]


@pytest.mark.k8s
def test_unreachable_api_server_gives_lock_error(k8s: TestEnv, lock_ns: str) -> None:
    dead = dead_kube(k8s)
    lock = make_annotation_lock(dead, lock_ns, "n", retry_timeout=1.0)
    with pytest.raises(LockError, match="timed out trying to get daemonset"):
        lock.acquire(unschedulable=False, now_ns=time.time_ns())


@pytest.mark.k8s
def test_works_with_exactly_kureds_rbac(k8s: TestEnv, nodes: Any) -> None:
    namespace = k8s.new_namespace()
    k8s.create_daemonset(namespace, "kured")
    k8s.apply_rbac_kured(namespace, "kured")
    user, groups = ObjectHelpers.kured_identity(namespace)
    kured = k8s.kube_as(user, list(groups))
    a, b = nodes(2)
    lock_a = make_annotation_lock(kured, namespace, a)
    lock_b = make_annotation_lock(kured, namespace, b, poll_interval=0.1)
    assert lock_a.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    assert not lock_b.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    assert lock_a.release()
    lock_b.wait_for_change(5)
    assert lock_b.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    other = k8s.create_daemonset(namespace, "not-kured")
    assert other["metadata"]["name"] == "not-kured"
    sneaky = make_annotation_lock(kured, namespace, a, retry_timeout=0.5)
    sneaky._ds_name = "not-kured"
    with pytest.raises(LockError, match="not allowed to update"):
        sneaky.acquire(unschedulable=False, now_ns=time.time_ns())
