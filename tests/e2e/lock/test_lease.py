"""The Lease lock on the real API server: watched hand-overs, TTL waits, 410 Gone, races under optimistic
concurrency, an unreachable server, kured's RBAC (its logic on FakeKube: tests/lock/test_lease.py)."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

import pytest

from pykured.core.errors import KubeError, LockError
from pykured.gocompat.goflags import Duration
from pykured_dev.testenv.objects import ObjectHelpers
from tests.lock.conftest import (
    FaultyKube,
    assert_one_turn_each,
    dead_kube,
    lease_history,
    make_lease_lock,
    race,
)
from tests.testenv import TestEnv

if TYPE_CHECKING:
    pass


# -- pure helpers --------------------------------------------------------------------------------


GONE_EVENT = {
    "type": "ERROR",
    "object": {"kind": "Status", "status": "Failure", "reason": "Expired", "code": 410, "message": "too old"},
}


@pytest.mark.k8s
def test_waiter_takes_a_freed_slot_within_a_second(k8s: TestEnv, nodes: Any) -> None:
    namespace = k8s.new_namespace()
    holder, waiter = nodes(2)
    holding = make_lease_lock(k8s.kube(), namespace, holder)
    waiting = make_lease_lock(k8s.kube_as("pykured-admin", ["system:masters"]), namespace, waiter)
    assert holding.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    assert not waiting.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    released_at: list[float] = []

    def release() -> None:
        holding.release()
        released_at.append(time.monotonic())

    timer = threading.Timer(0.5, release)
    timer.start()
    waiting.wait_for_change(30)
    assert waiting.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    acquired_at = time.monotonic()
    timer.join()
    assert acquired_at - released_at[0] < 1.0


@pytest.mark.k8s
def test_ttl_expiry_ends_the_wait(k8s: TestEnv, nodes: Any) -> None:
    namespace = k8s.new_namespace()
    dead, waiter = nodes(2)
    holding = make_lease_lock(k8s.kube(), namespace, dead, ttl=Duration.parse("1s"))
    waiting = make_lease_lock(k8s.kube(), namespace, waiter)
    assert holding.acquire(unschedulable=True, now_ns=time.time_ns()).acquired
    assert not waiting.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    started = time.monotonic()
    waiting.wait_for_change(30)
    assert time.monotonic() - started < 30  # ended by the 1 s TTL, not by the wait's own 30 s
    assert waiting.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    assert holding.holding(now_ns=time.time_ns()) is None


@pytest.mark.k8s
@pytest.mark.parametrize("how", ["error-event", "http-410"], ids=["error-event", "http-410"])
def test_gone_watch_version_relists(k8s: TestEnv, nodes: Any, how: str) -> None:
    """410 Gone (the resourceVersion left the watch window, as after an etcd compaction): the watch re-lists
    once by itself and watches again from the new version; the wait goes on and ends when the slot frees."""
    namespace = k8s.new_namespace()
    holder, waiter = nodes(2)
    kube = k8s.kube()
    holding = make_lease_lock(kube, namespace, holder)
    assert holding.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    faulty = FaultyKube(kube)
    waiting = make_lease_lock(faulty, namespace, waiter)
    assert not waiting.acquire(unschedulable=False, now_ns=time.time_ns()).acquired

    def lease_calls() -> dict[str, int]:
        return {k: v for k, v in faulty.calls.items() if k.endswith("_leases") or k.endswith("_lease")}

    assert lease_calls() == {"list_leases": 1}
    real_watch = faulty.watch_leases
    watches: list[str] = []

    def gone_once(*args: Any, **kwargs: Any) -> Any:
        watches.append(kwargs["resource_version"])
        if len(watches) == 1:
            if how == "http-410":
                raise KubeError("Expired (HTTP 410)", status=410)
            yield GONE_EVENT
            return
        yield from real_watch(*args, **kwargs)

    faulty.replaced["watch_leases"] = gone_once
    released = threading.Event()

    def release_once_watching_again() -> None:
        end = time.monotonic() + 10
        while len(watches) < 2 and time.monotonic() < end:
            released.wait(0.05)
        holding.release()
        released.set()

    threading.Thread(target=release_once_watching_again, daemon=True).start()
    started = time.monotonic()
    waiting.wait_for_change(60)
    # ended by the release the watch saw, not by the wait's own 60 s
    assert released.is_set() and time.monotonic() - started < 60
    assert lease_calls() == {"list_leases": 2, "watch_leases": 1}  # one LIST after the 410, one watch
    assert len(watches) == 2
    assert waiting.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    # the take read the watched copy
    assert lease_calls() == {"list_leases": 2, "watch_leases": 1, "replace_lease": 1}


@pytest.mark.k8s
@pytest.mark.slow
@pytest.mark.parametrize("concurrency", [1, 3], ids=["concurrency-1", "concurrency-3"])
def test_race_of_20_never_exceeds_the_limit(k8s: TestEnv, nodes: Any, concurrency: int) -> None:
    namespace = k8s.new_namespace()
    names = nodes(20)
    # the first writers create the Leases: that race (POST, 409) is part of the test
    history = lease_history(k8s.kube(), namespace, "pykured-lock")
    admin = ("pykured-admin", ["system:masters"])
    locks = [make_lease_lock(k8s.kube_as(*admin), namespace, n, concurrency=concurrency) for n in names]
    result = race(locks)
    history.stop()
    assert_one_turn_each(result, names, concurrency, history)
    assert history.holders_seen == set(names)


@pytest.mark.k8s
def test_kured_rbac_cannot_use_leases(k8s: TestEnv, nodes: Any) -> None:
    namespace = k8s.new_namespace()
    k8s.apply_rbac_kured(namespace, "kured")
    user, groups = ObjectHelpers.kured_identity(namespace)
    (node,) = nodes(1)
    lock = make_lease_lock(k8s.kube_as(user, list(groups)), namespace, node)
    with pytest.raises(LockError, match="cannot list the lock leases") as info:
        lock.acquire(unschedulable=False, now_ns=time.time_ns())
    assert isinstance(info.value.__cause__, KubeError) and info.value.__cause__.status == 403


@pytest.mark.k8s
def test_an_already_expired_leftover_slot_does_not_end_the_wait(k8s: TestEnv, nodes: Any) -> None:
    """An expired holder of a slot above ``--concurrency`` is no reason to wake up (no hot loop)."""
    namespace = k8s.new_namespace()
    holder, leftover, waiter = nodes(3)
    kube = k8s.kube()
    now = time.time_ns()
    assert (
        make_lease_lock(kube, namespace, holder, concurrency=2)
        .acquire(unschedulable=False, now_ns=now)
        .acquired
    )
    old = make_lease_lock(kube, namespace, leftover, concurrency=2, ttl=Duration.parse("1s"))
    assert old.acquire(unschedulable=False, now_ns=now - 5_000_000_000).acquired  # expired at once
    waiting = make_lease_lock(kube, namespace, waiter, concurrency=1)
    assert not waiting.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    started = time.monotonic()
    waiting.wait_for_change(1.5)
    assert time.monotonic() - started >= 1.4  # a lower bound: the wait did not end early (load only adds)


@pytest.mark.k8s
def test_unreachable_api_server_gives_lock_error(k8s: TestEnv) -> None:
    lock = make_lease_lock(dead_kube(k8s), "default", "n", retry_timeout=1.0)
    with pytest.raises(LockError, match="cannot list the lock leases"):
        lock.acquire(unschedulable=False, now_ns=time.time_ns())
    lock.wait_for_change(0.5)  # never raises
