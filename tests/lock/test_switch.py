"""GuardedLock: a rolling change of the lock backend never lets more than ``concurrency`` nodes through."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from pykured.core.errors import ForbiddenError, LockError
from pykured.gocompat.goflags import Duration
from pykured.lock.base import AcquireResult
from pykured.lock.lease import LeaseLock
from pykured.lock.record import LockEntry
from pykured.lock.switch import GuardedLock
from tests.fakes import FakeKube
from tests.lock.conftest import T_NS, make_annotation_lock, make_lease_lock

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
        self.watched = False

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


@pytest.mark.parametrize(
    ("primary_holders", "other_holders", "concurrency", "acquired", "released"),
    [
        ((), (), 1, True, []),
        ((), ("b",), 1, False, ["me"]),
        ((), ("me",), 1, True, []),
        ((), ("b",), 2, True, []),
        (("a",), ("b",), 2, False, ["me"]),
        (("a",), (), 1, False, []),
        (("me",), ("b",), 1, True, []),
    ],
    ids=[
        "both-free",
        "other-held",
        "other-held-by-me",
        "room-for-both",
        "together-over-limit",
        "primary-held",
        "reentrant-never-undone",
    ],
)
def test_guard_decisions(
    primary_holders: tuple[str, ...],
    other_holders: tuple[str, ...],
    concurrency: int,
    acquired: bool,
    released: list[str],
) -> None:
    primary = FakeLock("lease", "me", holders=primary_holders, concurrency=concurrency)
    other = FakeLock("annotation", "me", holders=other_holders, concurrency=concurrency)
    guard = GuardedLock(primary, other)
    result = guard.acquire(unschedulable=False, now_ns=0)
    assert result.acquired is acquired
    assert primary.released == released
    assert ("me" in primary.held) is acquired


def test_forbidden_other_backend_is_skipped(caplog: pytest.LogCaptureFixture) -> None:
    primary, other = FakeLock("annotation", "me"), FakeLock("lease", "me")
    other.error = forbidden_error()
    with caplog.at_level(logging.DEBUG, logger="pykured.lock.switch"):
        assert GuardedLock(primary, other).acquire(unschedulable=False, now_ns=0).acquired
    assert "Not checking the lease lock" in caplog.text


def test_unreadable_other_backend_undoes_the_primary() -> None:
    primary, other = FakeLock("annotation", "me"), FakeLock("lease", "me")
    other.error = LockError("timed out")
    with pytest.raises(LockError, match="timed out"):
        GuardedLock(primary, other).acquire(unschedulable=False, now_ns=0)
    assert primary.held == []


def test_gone_holders_of_the_other_backend_do_not_count() -> None:
    primary, other = FakeLock("lease", "me"), FakeLock("annotation", "me", holders=("gone",))
    guard = GuardedLock(primary, other, node_exists=lambda name: name != "gone")
    assert guard.acquire(unschedulable=False, now_ns=0).acquired


def test_without_other_backend_the_guard_is_transparent() -> None:
    primary = FakeLock("lease", "me")
    guard = GuardedLock(primary)
    assert (guard.backend, guard.node_id, guard.concurrency) == ("lease", "me", 1)
    assert guard.acquire(unschedulable=False, now_ns=0).acquired
    assert guard.holding(now_ns=0) == LockEntry("me")
    assert guard.holders(now_ns=0) == (LockEntry("me"),)
    assert guard.release() is True
    assert primary.held == []


def test_lease_node_backs_off_while_the_annotation_is_held(kube: FakeKube, lock_ns: str, nodes: Any) -> None:
    old, new = nodes(2)
    assert make_annotation_lock(kube, lock_ns, old).acquire(unschedulable=False, now_ns=T_NS).acquired
    guard = GuardedLock(make_lease_lock(kube, lock_ns, new), make_annotation_lock(kube, lock_ns, new))
    result = guard.acquire(unschedulable=False, now_ns=T_NS)
    assert not result.acquired and result.holder_names == old
    lease = kube.get_lease(lock_ns, "pykured-lock-0")
    assert "holderIdentity" not in lease["spec"]


def test_the_lease_lock_needs_no_daemonset(
    kube: FakeKube, nodes: Any, caplog: pytest.LogCaptureFixture
) -> None:
    namespace = "kube-system"  # no kured DaemonSet: a cluster served by the central FleetLock alone
    first, second = nodes(2)
    guard = GuardedLock(
        make_lease_lock(kube, namespace, first),
        make_annotation_lock(kube, namespace, first, retry_timeout=60.0, missing_ok=True),
    )
    with caplog.at_level(logging.WARNING, logger="pykured.lock.annotation"):
        assert guard.acquire(unschedulable=False, now_ns=T_NS).acquired
        other = GuardedLock(
            make_lease_lock(kube, namespace, second),
            make_annotation_lock(kube, namespace, second, retry_timeout=60.0, missing_ok=True),
        )
        assert not other.acquire(unschedulable=False, now_ns=T_NS).acquired
        assert guard.release()
        assert other.acquire(unschedulable=False, now_ns=T_NS).acquired
    said = [r.getMessage() for r in caplog.records if "not found" in r.getMessage()]
    assert len(said) == 2 and all(
        f"DaemonSet {namespace}/kured not found" in m for m in said
    )  # once per agent
    assert not [r for r in caplog.records if "retrying" in r.getMessage()]


# -- any number of other backends -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("primary_holders", "second", "third", "concurrency", "acquired"),
    [
        ((), (), (), 1, True),
        ((), (), ("c",), 1, False),
        ((), ("b",), (), 1, False),
        ((), ("b",), ("c",), 2, False),
        ((), ("b",), ("b",), 2, True),
        (("a",), (), ("c",), 3, True),
        (("a",), ("b",), ("c",), 3, False),
        ((), ("me",), ("me",), 1, True),
        (("me",), ("b",), ("c",), 1, True),
    ],
    ids=[
        "all-free",
        "third-held",
        "second-held",
        "others-together-fill-it",
        "one-node-on-two-others-counts-once",
        "room-for-all",
        "all-three-over-limit",
        "others-held-by-me",
        "reentrant-never-undone",
    ],
)
def test_guard_decisions_over_three_backends(
    primary_holders: tuple[str, ...],
    second: tuple[str, ...],
    third: tuple[str, ...],
    concurrency: int,
    acquired: bool,
) -> None:
    primary = FakeLock("lease", "me", holders=primary_holders, concurrency=concurrency)
    others = (
        FakeLock("annotation", "me", holders=second, concurrency=concurrency),
        FakeLock("third", "me", holders=third, concurrency=concurrency),
    )
    result = GuardedLock(primary, *others).acquire(unschedulable=False, now_ns=0)
    assert result.acquired is acquired
    assert ("me" in primary.held) is acquired
    if not acquired:
        assert "me" not in result.holder_names.split(", ")
        assert set(result.holder_names.split(", ")) == {*primary_holders, *second, *third} - {"me"}
    assert all(o.released == [] for o in others)  # the others are only read


def test_a_forbidden_backend_among_three_is_skipped_and_the_others_still_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    primary = FakeLock("lease", "me")
    hidden, held = FakeLock("annotation", "me", holders=("b",)), FakeLock("third", "me", holders=("c",))
    hidden.error = forbidden_error()
    with caplog.at_level(logging.DEBUG, logger="pykured.lock.switch"):
        result = GuardedLock(primary, hidden, held).acquire(unschedulable=False, now_ns=0)
    assert not result.acquired and result.holder_names == "c"
    assert "Not checking the annotation lock" in caplog.text
    assert "the third backend is held too (c)" in caplog.text
    assert primary.held == []


def test_every_other_backend_forbidden_turns_the_guard_off() -> None:
    primary = FakeLock("lease", "me")
    others = (FakeLock("annotation", "me", holders=("b",)), FakeLock("third", "me", holders=("c",)))
    for other in others:
        other.error = forbidden_error()
    assert GuardedLock(primary, *others).acquire(unschedulable=False, now_ns=0).acquired


def test_an_unreadable_third_backend_undoes_the_primary() -> None:
    primary = FakeLock("lease", "me")
    others = (FakeLock("annotation", "me"), FakeLock("third", "me"))
    others[1].error = LockError("timed out")
    with pytest.raises(LockError, match="timed out"):
        GuardedLock(primary, *others).acquire(unschedulable=False, now_ns=0)
    assert primary.held == [] and primary.released == ["me"]


@pytest.mark.parametrize("watched", [True, False], ids=["watched", "polled"])
def test_watched_is_the_primarys(watched: bool) -> None:
    primary, others = FakeLock("lease", "me"), (FakeLock("annotation", "me"), FakeLock("third", "me"))
    primary.watched = watched
    for other in others:
        other.watched = not watched
    assert GuardedLock(primary, *others).watched is watched


def test_three_real_backends_on_fake_kube(kube: Any, lock_ns: str, nodes: Any) -> None:
    """Two Lease prefixes and the annotation: a holder on any of them keeps a node of another out."""
    old, new = nodes(2)

    def other_leases(node: str) -> LeaseLock:
        return LeaseLock(
            kube, namespace=lock_ns, prefix="other-lock", node_id=node, concurrency=1, ttl=Duration(0)
        )

    assert other_leases(old).acquire(unschedulable=False, now_ns=T_NS).acquired
    guard = GuardedLock(
        make_annotation_lock(kube, lock_ns, new), make_lease_lock(kube, lock_ns, new), other_leases(new)
    )
    result = guard.acquire(unschedulable=False, now_ns=T_NS)
    assert not result.acquired and result.holder_names == old
    assert make_annotation_lock(kube, lock_ns, new).holders(now_ns=T_NS) == ()


def watched(lock: GuardedLock) -> bool:
    """``lock.watched`` now (a call: the property changes with each acquire)."""
    return lock.watched


def test_after_a_back_off_for_another_backend_the_lock_is_not_watched() -> None:
    """The wait is the primary's, which does not see the other backend's holder go: the daemon must look
    again within a minute, not at ``--period``."""
    primary, other = FakeLock("lease", "me"), FakeLock("annotation", "me", holders=("b",))
    primary.watched = True
    guard = GuardedLock(primary, other)
    assert watched(guard)
    assert not guard.acquire(unschedulable=False, now_ns=0).acquired
    assert not watched(guard)
    other.held.clear()
    assert guard.acquire(unschedulable=False, now_ns=0).acquired
    assert watched(guard)


def test_refused_by_the_primary_the_lock_is_watched_again() -> None:
    primary, other = FakeLock("lease", "me"), FakeLock("annotation", "me", holders=("b",))
    primary.watched = True
    guard = GuardedLock(primary, other)
    assert not guard.acquire(unschedulable=False, now_ns=0).acquired
    primary.held.append("c")  # now the primary itself is full: its wait sees that slot free
    other.held.clear()
    assert not guard.acquire(unschedulable=False, now_ns=0).acquired
    assert watched(guard)
