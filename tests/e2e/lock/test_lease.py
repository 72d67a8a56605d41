"""The Lease lock on the real API server: format, watched handover, races, faults, 410 Gone, liveness."""

from __future__ import annotations

import logging
import re
import threading
import time
from typing import TYPE_CHECKING, Any

import pytest

from pykured.core.errors import KubeError, LockError
from pykured.gocompat.goflags import Duration
from pykured.lock.lease import (
    LOCK_LABEL,
    MANAGED_BY,
    UNSCHEDULABLE_ANNOTATION,
    LeaseLock,
    lease_entry,
)
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

MICRO_RE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


# -- pure helpers --------------------------------------------------------------------------------


def resource_version(lock: LeaseLock) -> str | None:
    """The resourceVersion the lock's watch resumes from (a call, so that mypy does not narrow it)."""
    rv: str | None = lock._rv
    return rv


GONE_EVENT = {
    "type": "ERROR",
    "object": {"kind": "Status", "status": "Failure", "reason": "Expired", "code": 410, "message": "too old"},
}


@pytest.mark.k8s
def test_acquire_creates_a_labelled_lease(k8s: TestEnv, nodes: Any) -> None:
    namespace = k8s.new_namespace()
    (node,) = nodes(1)
    kube = k8s.kube()
    lock = make_lease_lock(kube, namespace, node, concurrency=2, ttl=Duration.parse("1.5s"))
    result = lock.acquire(unschedulable=True, now_ns=time.time_ns())
    assert result.acquired and not result.reentrant
    lease = kube.get_lease(namespace, "pykured-lock-0")
    spec, meta = lease["spec"], lease["metadata"]
    assert spec["holderIdentity"] == node
    assert MICRO_RE.fullmatch(spec["acquireTime"]) and spec["renewTime"] == spec["acquireTime"]
    assert spec["leaseDurationSeconds"] == 2
    assert meta["labels"] == {MANAGED_BY: "pykured", LOCK_LABEL: "pykured-lock"}
    assert meta["annotations"] == {UNSCHEDULABLE_ANNOTATION: "true"}
    again = lock.acquire(unschedulable=False, now_ns=time.time_ns())
    assert again.acquired and again.reentrant
    assert (
        kube.get_lease(namespace, "pykured-lock-0")["metadata"]["resourceVersion"] == meta["resourceVersion"]
    )
    entry = lock.holding(now_ns=time.time_ns())
    assert entry is not None and entry.unschedulable


@pytest.mark.k8s
def test_release_keeps_the_lease_and_counts_transitions(k8s: TestEnv, nodes: Any) -> None:
    namespace = k8s.new_namespace()
    a, b = nodes(2)
    kube = k8s.kube()
    lock_a, lock_b = make_lease_lock(kube, namespace, a), make_lease_lock(kube, namespace, b)
    assert lock_a.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    assert lock_a.release() is True
    lease = kube.get_lease(namespace, "pykured-lock-0")
    assert "holderIdentity" not in lease["spec"] and "leaseDurationSeconds" not in lease["spec"]
    assert UNSCHEDULABLE_ANNOTATION not in (lease["metadata"].get("annotations") or {})
    assert lock_b.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    assert kube.get_lease(namespace, "pykured-lock-0")["spec"]["leaseTransitions"] == 1
    assert lock_a.release() is False


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
    assert time.monotonic() - started < 3
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
    waiting.wait_for_change(20)
    assert released.is_set() and time.monotonic() - started < 5
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
@pytest.mark.parametrize(
    ("method", "when", "status", "acquired"),
    [
        ("create_lease", "before", 500, False),
        ("create_lease", "after", 0, True),
        ("replace_lease", "after", 504, True),
        ("replace_lease", "before", 0, False),
    ],
    ids=["create-500", "create-timeout-landed", "update-504-landed", "update-timeout-not-sent"],
)
def test_ambiguous_write_is_settled_by_relisting(
    k8s: TestEnv,
    nodes: Any,
    caplog: pytest.LogCaptureFixture,
    method: str,
    when: str,
    status: int,
    acquired: bool,
) -> None:
    namespace = k8s.new_namespace()
    node, other = nodes(2)
    kube = k8s.kube()
    if method == "replace_lease":  # make the slot exist, free
        first = make_lease_lock(kube, namespace, other)
        assert first.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
        assert first.release()
    faulty = FaultyKube(kube)
    faulty.fail(method, when, KubeError("injected", status=status))
    with caplog.at_level(logging.WARNING):
        result = make_lease_lock(faulty, namespace, node).acquire(unschedulable=False, now_ns=time.time_ns())
    assert result.acquired is acquired
    assert "re-reading" in caplog.text
    holders = [lease_entry(item) for item in kube.list_leases(namespace)["items"]]
    assert [h.node_id for h in holders if h] == ([node] if acquired else [])


@pytest.mark.k8s
def test_lock_of_a_deleted_node_is_freed(k8s: TestEnv, nodes: Any, caplog: pytest.LogCaptureFixture) -> None:
    namespace = k8s.new_namespace()
    gone, waiting = nodes(2)
    kube = k8s.kube()
    assert make_lease_lock(kube, namespace, gone).acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    freed: list[str] = []
    assert (
        not make_lease_lock(kube, namespace, waiting)
        .acquire(unschedulable=False, now_ns=time.time_ns())
        .acquired
    )
    k8s.delete_node(gone)
    lock = make_lease_lock(kube, namespace, waiting, on_gone_holder=freed.append)
    with caplog.at_level(logging.WARNING):
        assert lock.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    assert freed == [gone]
    assert f"Lock held by node {gone} which no longer exists: releasing" in caplog.text


@pytest.mark.k8s
def test_manual_holder_is_never_freed(k8s: TestEnv, nodes: Any) -> None:
    namespace = k8s.new_namespace()
    (node,) = nodes(1)
    kube = k8s.kube()
    manual = make_lease_lock(kube, namespace, "manual")
    assert manual.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    result = make_lease_lock(kube, namespace, node).acquire(unschedulable=False, now_ns=time.time_ns())
    assert not result.acquired and result.holder_names == "manual"


@pytest.mark.k8s
def test_lowered_concurrency_counts_leftover_slots(k8s: TestEnv, nodes: Any) -> None:
    namespace = k8s.new_namespace()
    *holders, late = nodes(3)
    kube = k8s.kube()
    for name in holders:
        assert (
            make_lease_lock(kube, namespace, name, concurrency=2)
            .acquire(unschedulable=False, now_ns=time.time_ns())
            .acquired
        )
    make_lease_lock(kube, namespace, holders[0], concurrency=2).release()
    # slot 1 is still held; with --concurrency=1 only slot 0 exists, but the holder of slot 1 counts
    result = make_lease_lock(kube, namespace, late, concurrency=1).acquire(
        unschedulable=False, now_ns=time.time_ns()
    )
    assert not result.acquired and result.holder_names == holders[1]


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
    assert time.monotonic() - started >= 1.4


@pytest.mark.k8s
def test_unreachable_api_server_gives_lock_error(k8s: TestEnv) -> None:
    lock = make_lease_lock(dead_kube(k8s), "default", "n", retry_timeout=1.0)
    started = time.monotonic()
    with pytest.raises(LockError, match="cannot list the lock leases"):
        lock.acquire(unschedulable=False, now_ns=time.time_ns())
    lock.wait_for_change(0.5)  # never raises
    assert time.monotonic() - started < 10


@pytest.mark.k8s
def test_the_pass_after_a_release_reads_the_released_copy(k8s: TestEnv, nodes: Any) -> None:
    """An agent after its reboot has no watch: its pass lists the slots once (``holding``), releases its slot
    from that read, and the pass right after the release reads the answer to that write: one LIST."""
    namespace = k8s.new_namespace()
    (node,) = nodes(1)
    make_lease_lock(k8s.kube(), namespace, node).acquire(unschedulable=False, now_ns=time.time_ns())
    faulty = FaultyKube(k8s.kube())
    after_reboot = make_lease_lock(faulty, namespace, node)
    assert after_reboot.holding(now_ns=time.time_ns(), honour_ttl=False) is not None
    assert after_reboot.release()
    assert after_reboot.holding(now_ns=time.time_ns(), honour_ttl=False) is None
    assert faulty.calls == {"list_leases": 1, "replace_lease": 1}
    assert lease_entry(k8s.kube().get_lease(namespace, "pykured-lock-0")) is None
