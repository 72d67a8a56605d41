"""The Lease lock on the real API server: format, watched handover, races, faults, 410 Gone, liveness."""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Any, cast

import pytest

from pykured.gocompat.goflags import Duration
from pykured.lock.lease import (
    LOCK_LABEL,
    UNSCHEDULABLE_ANNOTATION,
    LeaseLock,
    format_micro_time,
    lease_body,
    lease_duration_seconds,
    lease_entry,
)
from tests.lock.conftest import (
    make_lease_lock,
)
from tests.testenv import TestEnv

if TYPE_CHECKING:
    from pykured.kube.client import Kube

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


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (1_782_818_956_917_242_595, "2026-06-30T11:29:16.917242Z"),
        (1_782_818_956_000_000_000, "2026-06-30T11:29:16.000000Z"),
        (0, "1970-01-01T00:00:00.000000Z"),
    ],
    ids=["truncates-to-micros", "zero-fraction-kept", "epoch"],
)
def test_format_micro_time(ns: int, text: str) -> None:
    assert format_micro_time(ns) == text


@pytest.mark.parametrize(
    ("ttl", "seconds"),
    [("0s", None), ("1ns", 1), ("1s", 1), ("1.5s", 2), ("30m", 1800)],
    ids=["zero-unset", "rounds-up-ns", "one-second", "rounds-up", "thirty-minutes"],
)
def test_lease_duration_seconds(ttl: str, seconds: int | None) -> None:
    assert lease_duration_seconds(Duration.parse(ttl)) == seconds


@pytest.mark.parametrize(
    ("spec", "annotations", "expected"),
    [
        ({}, {}, None),
        ({"holderIdentity": ""}, {}, None),
        (
            {"holderIdentity": "n", "acquireTime": "2026-06-30T11:29:16.917242Z", "leaseDurationSeconds": 60},
            {UNSCHEDULABLE_ANNOTATION: "true"},
            ("n", True, 1_782_818_956_917_242_000, 60_000_000_000),
        ),
        (
            {"holderIdentity": "n", "renewTime": "2026-06-30T11:29:16.000001Z"},
            {},
            ("n", False, 1_782_818_956_000_001_000, 0),
        ),
    ],
    ids=["empty-spec", "empty-holder", "held-with-ttl", "renew-time-only"],
)
def test_lease_entry(
    spec: dict[str, Any], annotations: dict[str, str], expected: tuple[Any, ...] | None
) -> None:
    entry = lease_entry({"metadata": {"annotations": annotations}, "spec": spec})
    got = None if entry is None else (entry.node_id, entry.unschedulable, entry.created_ns, entry.ttl_ns)
    assert got == expected


def test_the_watched_copy_never_goes_back_to_an_older_version() -> None:
    """Our write's answer and the watch's events race: whichever comes second, the copy keeps the newer
    version of each Lease (resourceVersions are etcd's revisions), and events older than the last LIST are
    skipped."""
    lock = LeaseLock(
        cast("Kube", None), namespace="ns", prefix="p", node_id="a", concurrency=1, ttl=Duration(0)
    )
    lock._copy = {}

    def lease(rv: str, holder: str | None) -> dict[str, Any]:
        return {"metadata": {"name": "p-0", "resourceVersion": rv}, "spec": {"holderIdentity": holder}}

    def version() -> str:
        assert lock._copy is not None
        return str(lock._copy["p-0"]["metadata"]["resourceVersion"])

    lock._keep(lease("12", "a"))  # our take's answer came before the watch's older "free"
    assert lock._apply({"type": "MODIFIED", "object": lease("11", None)})
    assert version() == "12"
    assert lock._apply({"type": "MODIFIED", "object": lease("12", "a")})  # its echo
    assert lock._apply({"type": "MODIFIED", "object": lease("13", None)})  # a newer write (a release)
    assert version() == "13"
    lock._keep(lease("12", "a"))  # an answer that comes after the watch brought a newer version
    assert version() == "13"
    lock._floor = 20  # a LIST at 20: the watch's events up to it are older
    assert lock._apply({"type": "MODIFIED", "object": lease("19", "b")})
    assert version() == "13"
    assert lock._rv == "19"  # the watch goes on from where it is


def test_a_lease_to_write_leaves_the_lease_it_was_read_as_alone() -> None:
    """The body of a take is built on a copy: the lease as read (it may be the watched copy's) stays as read,
    so a take that loses its race (409) never leaves "held by me" in the copy."""
    read = {
        "metadata": {"name": "pykured-lock-0", "namespace": "ns", "resourceVersion": "7", "labels": {}},
        "spec": {"holderIdentity": "other", "acquireTime": "2026-01-01T00:00:00.000000Z"},
    }
    before = repr(read)
    body = lease_body(
        "ns", "pykured-lock-0", read, labels={LOCK_LABEL: "pykured-lock"}, holder="me", now_ns=0
    )
    assert body["spec"]["holderIdentity"] == "me" and body["metadata"]["resourceVersion"] == "7"
    assert repr(read) == before


def test_a_take_that_loses_its_race_is_not_held_on_the_next_look(k8s: TestEnv, nodes: Any) -> None:
    """A waiter whose copy still shows the slot free (the taker's news not yet in) writes, gets 409, and its
    next acquire from the same copy must not find itself holding: the copy never took the lost write."""
    namespace = k8s.new_namespace()
    first, second = nodes(2)
    taker = make_lease_lock(k8s.kube(), namespace, first)
    assert taker.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    assert taker.release()  # the slot's Lease exists, free
    late = make_lease_lock(k8s.kube(), namespace, second)
    assert late.holding(now_ns=time.time_ns()) is None  # the pass's read: the slot is free in this copy
    assert taker.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    with late._changed:  # the stale copy, as a watch that has not yet brought the take would leave it
        late._fresh_until = time.monotonic() + 60
    assert not late.acquire(unschedulable=False, now_ns=time.time_ns()).acquired  # its write: 409
    with late._changed:
        late._fresh_until = time.monotonic() + 60  # the same copy again
        held = [lease_entry(lease) for lease in (late._copy or {}).values()]
        assert all(entry is None or entry.node_id != second for entry in held)
    assert not late.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    entry = lease_entry(k8s.kube().get_lease(namespace, "pykured-lock-0"))
    assert entry is not None and entry.node_id == first
