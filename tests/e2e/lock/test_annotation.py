"""The DaemonSet-annotation lock on the real API server: kured's format, races, faults, kured's RBAC."""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from typing import Any

import pytest

from pykured.core.errors import ConflictError, KubeError, LockError
from pykured.gocompat.goflags import Duration
from pykured.kube.client import Kube
from pykured.lock.record import UNKNOWN_HOLDER
from pykured_dev.testenv.objects import ObjectHelpers
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

pytestmark = pytest.mark.k8s

SINGLE_RE = re.compile(
    r'\{"nodeID":"(?P<node>[^"]+)","metadata":\{"unschedulable":(?P<u>true|false)\},'
    r'"created":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d*[1-9])?Z","TTL":(?P<ttl>\d+)\}'
)


def raw(kube: Kube, namespace: str) -> str | None:
    annotations = kube.get_daemonset(namespace, "kured")["metadata"].get("annotations") or {}
    value = annotations.get(ANNOTATION)
    return None if value is None else str(value)


def set_raw(kube: Kube, namespace: str, value: str) -> None:
    ds = kube.get_daemonset(namespace, "kured")
    ds["metadata"].setdefault("annotations", {})[ANNOTATION] = value
    kube.replace_daemonset(namespace, "kured", ds)


# -- kured's behaviour ---------------------------------------------------------------------------


def test_acquire_writes_kured_single_form_and_is_reentrant(k8s: TestEnv, lock_ns: str, nodes: Any) -> None:
    (node,) = nodes(1)
    kube = k8s.kube()
    lock = make_annotation_lock(kube, lock_ns, node, ttl=Duration.parse("30m"))
    first = lock.acquire(unschedulable=True, now_ns=time.time_ns())
    stored = raw(kube, lock_ns)
    assert first.acquired and not first.reentrant
    assert stored is not None
    match = SINGLE_RE.fullmatch(stored)
    assert match and match["node"] == node and match["u"] == "true" and match["ttl"] == "1800000000000"
    rv = kube.get_daemonset(lock_ns, "kured")["metadata"]["resourceVersion"]
    again = lock.acquire(unschedulable=False, now_ns=time.time_ns())
    assert again.acquired and again.reentrant
    assert kube.get_daemonset(lock_ns, "kured")["metadata"]["resourceVersion"] == rv
    entry = lock.holding(now_ns=time.time_ns())
    assert entry is not None and entry.unschedulable


@pytest.mark.parametrize(
    ("concurrency", "after"),
    [(1, None), (3, '{"maxOwners":3,"locks":[]}')],
    ids=["single-deletes-key", "multi-leaves-empty-list"],
)
def test_release_like_kured(
    k8s: TestEnv, lock_ns: str, nodes: Any, concurrency: int, after: str | None
) -> None:
    (node,) = nodes(1)
    lock = make_annotation_lock(k8s.kube(), lock_ns, node, concurrency=concurrency)
    assert lock.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    assert lock.release() is True
    assert raw(k8s.kube(), lock_ns) == after
    assert lock.release() is False


def test_reads_a_value_written_by_kured(k8s: TestEnv, lock_ns: str, nodes: Any) -> None:
    kured_node, node = nodes(2)
    kube = k8s.kube()
    written = (
        f'{{"nodeID":"{kured_node}","metadata":{{"unschedulable":false}},'
        f'"created":"2026-06-30T11:29:16.917242595Z","TTL":0}}'
    )
    set_raw(kube, lock_ns, written)
    result = make_annotation_lock(kube, lock_ns, node).acquire(unschedulable=False, now_ns=time.time_ns())
    assert not result.acquired and result.holder_names == kured_node
    assert raw(kube, lock_ns) == written


@pytest.mark.parametrize(
    ("stored", "concurrency"),
    [
        ('{"nodeID":"manual"}', 1),
        ('{"nodeID":"manual"}', 3),
        ('{"maxOwners":2,"locks":[{"nodeID":"manual"}]}', 1),
    ],
    ids=["manual-single-mode", "manual-multi-mode", "multi-value-single-mode"],
)
def test_mixed_forms_are_held(k8s: TestEnv, lock_ns: str, nodes: Any, stored: str, concurrency: int) -> None:
    """A holder of either form excludes acquirers of the other (kured's multi mode ignored manual locks)."""
    kube = k8s.kube()
    set_raw(kube, lock_ns, stored)
    (node,) = nodes(1)
    result = make_annotation_lock(kube, lock_ns, node, concurrency=concurrency).acquire(
        unschedulable=False, now_ns=time.time_ns()
    )
    if concurrency == 1:
        assert not result.acquired and result.holder_names == "manual"
        assert raw(kube, lock_ns) == stored
    else:
        assert result.acquired
        assert [h.node_id for h in result.holders] == ["manual", node]
        assert json.loads(raw(kube, lock_ns) or "")["maxOwners"] == 3


def test_empty_multi_value_is_free_in_single_mode(k8s: TestEnv, lock_ns: str, nodes: Any) -> None:
    kube = k8s.kube()
    set_raw(kube, lock_ns, '{"maxOwners":2,"locks":[]}')
    (node,) = nodes(1)
    assert (
        make_annotation_lock(kube, lock_ns, node).acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    )
    assert SINGLE_RE.fullmatch(raw(kube, lock_ns) or "")


def test_ttl_expiry_and_holder_keeps_its_entry(k8s: TestEnv, lock_ns: str, nodes: Any) -> None:
    """A holder that never releases ("killed") loses the slot after its TTL; with room left its expired entry
    stays, so after coming back it still finds its ``unschedulable`` memory (honour_ttl=False)."""
    kube = k8s.kube()
    dead, other = nodes(2)
    now = time.time_ns()
    holder = make_annotation_lock(kube, lock_ns, dead, concurrency=3, ttl=Duration.parse("1s"))
    assert holder.acquire(unschedulable=True, now_ns=now).acquired
    later = now + 1_000_000_000
    assert holder.holding(now_ns=later) is None
    kept = holder.holding(now_ns=later, honour_ttl=False)
    assert kept is not None and kept.unschedulable
    result = make_annotation_lock(kube, lock_ns, other, concurrency=3).acquire(
        unschedulable=False, now_ns=later
    )
    assert result.acquired
    assert holder.holding(now_ns=later, honour_ttl=False) is not None


def test_expired_single_lock_is_taken(k8s: TestEnv, lock_ns: str, nodes: Any) -> None:
    kube = k8s.kube()
    dead, other = nodes(2)
    now = time.time_ns()
    assert (
        make_annotation_lock(kube, lock_ns, dead, ttl=Duration.parse("1s"))
        .acquire(unschedulable=False, now_ns=now)
        .acquired
    )
    waiting = make_annotation_lock(kube, lock_ns, other)
    assert not waiting.acquire(unschedulable=False, now_ns=now + 999_999_999).acquired
    assert waiting.acquire(unschedulable=False, now_ns=now + 1_000_000_000).acquired


def test_restarted_holder_finds_its_lock(k8s: TestEnv, lock_ns: str, nodes: Any) -> None:
    """Killed right after the write: the new process (same node) holds it, nobody else gets it."""
    kube = k8s.kube()
    node, other = nodes(2)
    assert (
        make_annotation_lock(kube, lock_ns, node).acquire(unschedulable=True, now_ns=time.time_ns()).acquired
    )
    restarted = make_annotation_lock(k8s.kube_as("pykured-admin", ["system:masters"]), lock_ns, node)
    entry = restarted.holding(now_ns=time.time_ns())
    assert entry is not None and entry.unschedulable
    assert (
        not make_annotation_lock(kube, lock_ns, other)
        .acquire(unschedulable=False, now_ns=time.time_ns())
        .acquired
    )


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


def test_real_conflict_is_retried_and_respected(k8s: TestEnv, lock_ns: str, nodes: Any) -> None:
    """B writes between A's GET and A's PUT: A's PUT gets a real 409, A re-reads and sees B."""
    kube = k8s.kube()
    a, b = nodes(2)
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


@pytest.mark.parametrize(
    ("when", "status"),
    [("before", 500), ("after", 0), ("after", 504)],
    ids=["500-nothing-written", "timeout-write-landed", "504-write-landed"],
)
def test_failed_put_is_settled_by_rereading(
    k8s: TestEnv, lock_ns: str, nodes: Any, caplog: pytest.LogCaptureFixture, when: str, status: int
) -> None:
    kube = k8s.kube()
    (node,) = nodes(1)
    faulty = FaultyKube(kube)
    faulty.fail("replace_daemonset", when, KubeError("injected", status=status))
    with caplog.at_level(logging.WARNING):
        result = make_annotation_lock(faulty, lock_ns, node).acquire(
            unschedulable=False, now_ns=time.time_ns()
        )
    assert result.acquired
    assert faulty.calls["replace_daemonset"] == (2 if when == "before" else 1)
    assert "Error writing the lock" in caplog.text
    assert (SINGLE_RE.fullmatch(raw(kube, lock_ns) or "") or {})["node"] == node  # type: ignore[index]


def test_get_failures_are_retried(k8s: TestEnv, lock_ns: str, nodes: Any) -> None:
    (node,) = nodes(1)
    faulty = FaultyKube(k8s.kube())
    faulty.fail("get_daemonset", "before", KubeError("injected", status=503), times=3)
    assert (
        make_annotation_lock(faulty, lock_ns, node)
        .acquire(unschedulable=False, now_ns=time.time_ns())
        .acquired
    )
    assert faulty.calls["get_daemonset"] == 4


def test_unreachable_api_server_gives_lock_error(k8s: TestEnv, lock_ns: str) -> None:
    dead = dead_kube(k8s)
    lock = make_annotation_lock(dead, lock_ns, "n", retry_timeout=1.0)
    started = time.monotonic()
    with pytest.raises(LockError, match="timed out trying to get daemonset"):
        lock.acquire(unschedulable=False, now_ns=time.time_ns())
    assert time.monotonic() - started < 10


@pytest.mark.parametrize(
    "stored",
    ["not json", '{"nodeID":5}', '{"nodeID":"a","TTL":"30m"}', '{"maxOwners":2,"locks":{}}'],
    ids=["invalid-json", "node-number", "ttl-string", "locks-object"],
)
def test_corrupt_value_counts_as_held_and_is_never_overwritten(
    k8s: TestEnv, lock_ns: str, nodes: Any, caplog: pytest.LogCaptureFixture, stored: str
) -> None:
    kube = k8s.kube()
    set_raw(kube, lock_ns, stored)
    (node,) = nodes(1)
    lock = make_annotation_lock(kube, lock_ns, node, concurrency=2)
    with caplog.at_level(logging.ERROR):
        result = lock.acquire(unschedulable=False, now_ns=time.time_ns())
    assert not result.acquired and result.holder_names == UNKNOWN_HOLDER
    assert "pykured lock release" in caplog.text
    assert lock.holders(now_ns=time.time_ns())[0].node_id == UNKNOWN_HOLDER
    with pytest.raises(LockError):
        lock.release()
    assert raw(kube, lock_ns) == stored


def test_lock_of_a_deleted_node_is_freed(
    k8s: TestEnv, lock_ns: str, nodes: Any, caplog: pytest.LogCaptureFixture
) -> None:
    kube = k8s.kube()
    gone, waiting = nodes(2)
    assert (
        make_annotation_lock(kube, lock_ns, gone).acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    )
    freed: list[str] = []
    lock = make_annotation_lock(kube, lock_ns, waiting, on_gone_holder=freed.append)
    assert not lock.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    k8s.delete_node(gone)
    lock = make_annotation_lock(kube, lock_ns, waiting, on_gone_holder=freed.append)
    with caplog.at_level(logging.WARNING):
        assert lock.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    assert freed == [gone]
    assert f"Lock held by node {gone} which no longer exists: releasing" in caplog.text


def test_manual_lock_is_not_freed_by_liveness(k8s: TestEnv, lock_ns: str, nodes: Any) -> None:
    kube = k8s.kube()
    set_raw(kube, lock_ns, '{"nodeID":"manual"}')
    (node,) = nodes(1)
    assert (
        not make_annotation_lock(kube, lock_ns, node)
        .acquire(unschedulable=False, now_ns=time.time_ns())
        .acquired
    )
    assert raw(kube, lock_ns) == '{"nodeID":"manual"}'


def test_wait_for_change_returns_when_the_value_changes(k8s: TestEnv, lock_ns: str, nodes: Any) -> None:
    kube = k8s.kube()
    holder, waiter = nodes(2)
    holding = make_annotation_lock(kube, lock_ns, holder)
    waiting = make_annotation_lock(kube, lock_ns, waiter, poll_interval=0.1)
    assert holding.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    assert not waiting.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    timer = threading.Timer(0.5, holding.release)
    timer.start()
    started = time.monotonic()
    waiting.wait_for_change(10)
    assert time.monotonic() - started < 2
    assert waiting.acquire(unschedulable=False, now_ns=time.time_ns()).acquired


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


@pytest.mark.k8s
def test_a_wait_no_longer_than_the_poll_interval_reads_nothing(
    k8s: TestEnv, lock_ns: str, nodes: Any
) -> None:
    """The daemon's wait (``--period``, at most a minute) polls nothing on the annotation lock: the pass
    after it reads the DaemonSet once, as kured once per ``--period``. The first wait ends at a random moment
    (the waiters' passes spread), the next ones last the whole wait."""
    (node,) = nodes(1)
    faulty = FaultyKube(k8s.kube())
    lock = make_annotation_lock(faulty, lock_ns, node, poll_interval=1.0)
    started = time.monotonic()
    lock.wait_for_change(1.0)
    first = time.monotonic() - started
    started = time.monotonic()
    lock.wait_for_change(0.5)
    second = time.monotonic() - started
    assert faulty.calls == {}
    assert first < 1.2
    assert 0.45 < second < 1.0
