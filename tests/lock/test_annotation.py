"""The DaemonSet-annotation lock's logic on FakeKube with an injected clock: kured's format, TTLs, faults,
liveness, waits (tests/e2e/lock/test_annotation.py: a 409 on both API servers; races, an unreachable server,
kured's RBAC on the real one).
"""

from __future__ import annotations

import datetime
import io
import json
import logging
import re
import threading
from typing import Any

import pytest

from pykured.core.errors import ForbiddenError, KubeError, LockError
from pykured.gocompat.goflags import Duration
from pykured.lock.annotation import UNKNOWN, AnnotationLock, AnnotationView, slot_state
from pykured.lock.budget import Budget
from pykured.lock.operator import Released
from pykured.lock.record import UNKNOWN_HOLDER
from pykured_dev.eventually import eventually
from tests.fakes import FakeClock, FakeKube
from tests.lock import conftest
from tests.lock.conftest import ANNOTATION, T_NS, FaultyKube, OwnNodeOnly

T = datetime.datetime(2026, 11, 18, tzinfo=datetime.UTC)


def make_annotation_lock(
    kube: Any, namespace: str, node: str, *, clock: FakeClock | None = None, **kw: Any
) -> AnnotationLock:
    """The lock of the tests, its retries and waits on an injected clock (``clock``, else its own)."""
    clock = clock or FakeClock(T)
    kw.setdefault("sleep", clock.sleep)
    kw.setdefault("monotonic", clock.monotonic)
    return conftest.make_annotation_lock(kube, namespace, node, **kw)


SINGLE_RE = re.compile(
    r'\{"nodeID":"(?P<node>[^"]+)","metadata":\{"unschedulable":(?P<u>true|false)\},'
    r'"created":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d*[1-9])?Z","TTL":(?P<ttl>\d+)\}'
)


def raw(kube: Any, namespace: str) -> str | None:
    annotations = kube.get_daemonset(namespace, "kured")["metadata"].get("annotations") or {}
    value = annotations.get(ANNOTATION)
    return None if value is None else str(value)


def set_raw(kube: Any, namespace: str, value: str) -> None:
    ds = kube.get_daemonset(namespace, "kured")
    ds["metadata"].setdefault("annotations", {})[ANNOTATION] = value
    kube.replace_daemonset(namespace, "kured", ds)


def test_acquire_writes_kured_single_form_and_is_reentrant(kube: FakeKube, lock_ns: str, nodes: Any) -> None:
    (node,) = nodes(1)
    lock = make_annotation_lock(kube, lock_ns, node, ttl=Duration.parse("30m"))
    first = lock.acquire(unschedulable=True, now_ns=T_NS)
    stored = raw(kube, lock_ns)
    assert first.acquired and not first.reentrant
    assert stored is not None
    match = SINGLE_RE.fullmatch(stored)
    assert match and match["node"] == node and match["u"] == "true" and match["ttl"] == "1800000000000"
    rv = kube.get_daemonset(lock_ns, "kured")["metadata"]["resourceVersion"]
    again = lock.acquire(unschedulable=False, now_ns=T_NS)
    assert again.acquired and again.reentrant
    assert kube.get_daemonset(lock_ns, "kured")["metadata"]["resourceVersion"] == rv
    entry = lock.holding(now_ns=T_NS)
    assert entry is not None and entry.unschedulable


@pytest.mark.parametrize(
    ("concurrency", "after"),
    [(1, None), (3, '{"maxOwners":3,"locks":[]}')],
    ids=["single-deletes-key", "multi-leaves-empty-list"],
)
def test_release_like_kured(
    kube: FakeKube, lock_ns: str, nodes: Any, concurrency: int, after: str | None
) -> None:
    (node,) = nodes(1)
    lock = make_annotation_lock(kube, lock_ns, node, concurrency=concurrency)
    assert lock.acquire(unschedulable=False, now_ns=T_NS).acquired
    assert lock.release() is True
    assert raw(kube, lock_ns) == after
    assert lock.release() is False


def test_reads_a_value_written_by_kured(kube: FakeKube, lock_ns: str, nodes: Any) -> None:
    kured_node, node = nodes(2)
    written = (
        f'{{"nodeID":"{kured_node}","metadata":{{"unschedulable":false}},'
        f'"created":"2026-06-30T11:29:16.917242595Z","TTL":0}}'
    )
    set_raw(kube, lock_ns, written)
    result = make_annotation_lock(kube, lock_ns, node).acquire(unschedulable=False, now_ns=T_NS)
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
def test_mixed_forms_are_held(
    kube: FakeKube, lock_ns: str, nodes: Any, stored: str, concurrency: int
) -> None:
    """A holder of either form excludes acquirers of the other (kured's multi mode ignored manual locks)."""
    set_raw(kube, lock_ns, stored)
    (node,) = nodes(1)
    result = make_annotation_lock(kube, lock_ns, node, concurrency=concurrency).acquire(
        unschedulable=False, now_ns=T_NS
    )
    if concurrency == 1:
        assert not result.acquired and result.holder_names == "manual"
        assert raw(kube, lock_ns) == stored
    else:
        assert result.acquired
        assert [h.node_id for h in result.holders] == ["manual", node]
        assert json.loads(raw(kube, lock_ns) or "")["maxOwners"] == 3


def test_empty_multi_value_is_free_in_single_mode(kube: FakeKube, lock_ns: str, nodes: Any) -> None:
    set_raw(kube, lock_ns, '{"maxOwners":2,"locks":[]}')
    (node,) = nodes(1)
    assert make_annotation_lock(kube, lock_ns, node).acquire(unschedulable=False, now_ns=T_NS).acquired
    assert SINGLE_RE.fullmatch(raw(kube, lock_ns) or "")


def test_ttl_expiry_and_holder_keeps_its_entry(kube: FakeKube, lock_ns: str, nodes: Any) -> None:
    """A holder that never releases ("killed") loses the slot after its TTL; with room left its expired entry
    stays, so after coming back it still finds its ``unschedulable`` memory (honour_ttl=False)."""
    dead, other = nodes(2)
    now = T_NS
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


def test_expired_single_lock_is_taken(kube: FakeKube, lock_ns: str, nodes: Any) -> None:
    dead, other = nodes(2)
    now = T_NS
    assert (
        make_annotation_lock(kube, lock_ns, dead, ttl=Duration.parse("1s"))
        .acquire(unschedulable=False, now_ns=now)
        .acquired
    )
    waiting = make_annotation_lock(kube, lock_ns, other)
    assert not waiting.acquire(unschedulable=False, now_ns=now + 999_999_999).acquired
    assert waiting.acquire(unschedulable=False, now_ns=now + 1_000_000_000).acquired


def test_restarted_holder_finds_its_lock(kube: FakeKube, lock_ns: str, nodes: Any) -> None:
    """Killed right after the write: the new process (same node) holds it, nobody else gets it."""
    node, other = nodes(2)
    assert make_annotation_lock(kube, lock_ns, node).acquire(unschedulable=True, now_ns=T_NS).acquired
    restarted = make_annotation_lock(kube, lock_ns, node)
    entry = restarted.holding(now_ns=T_NS)
    assert entry is not None and entry.unschedulable
    assert not make_annotation_lock(kube, lock_ns, other).acquire(unschedulable=False, now_ns=T_NS).acquired


@pytest.mark.parametrize(
    ("when", "status"),
    [("before", 500), ("after", 0), ("after", 504)],
    ids=["500-nothing-written", "timeout-write-landed", "504-write-landed"],
)
def test_failed_put_is_settled_by_rereading(
    kube: FakeKube, lock_ns: str, nodes: Any, caplog: pytest.LogCaptureFixture, when: str, status: int
) -> None:
    (node,) = nodes(1)
    faulty = FaultyKube(kube)
    faulty.fail("replace_daemonset", when, KubeError("injected", status=status))
    with caplog.at_level(logging.WARNING):
        result = make_annotation_lock(faulty, lock_ns, node).acquire(unschedulable=False, now_ns=T_NS)
    assert result.acquired
    assert faulty.calls["replace_daemonset"] == (2 if when == "before" else 1)
    assert "Error writing the lock" in caplog.text
    assert (SINGLE_RE.fullmatch(raw(kube, lock_ns) or "") or {})["node"] == node  # type: ignore[index]


def test_get_failures_are_retried(kube: FakeKube, lock_ns: str, nodes: Any) -> None:
    (node,) = nodes(1)
    faulty = FaultyKube(kube)
    faulty.fail("get_daemonset", "before", KubeError("injected", status=503), times=3)
    assert make_annotation_lock(faulty, lock_ns, node).acquire(unschedulable=False, now_ns=T_NS).acquired
    assert faulty.calls["get_daemonset"] == 4


@pytest.mark.parametrize(
    "stored",
    ["not json", '{"nodeID":5}', '{"nodeID":"a","TTL":"30m"}', '{"maxOwners":2,"locks":{}}'],
    ids=["invalid-json", "node-number", "ttl-string", "locks-object"],
)
def test_corrupt_value_counts_as_held_and_is_never_overwritten(
    kube: FakeKube, lock_ns: str, nodes: Any, caplog: pytest.LogCaptureFixture, stored: str
) -> None:
    set_raw(kube, lock_ns, stored)
    (node,) = nodes(1)
    lock = make_annotation_lock(kube, lock_ns, node, concurrency=2)
    with caplog.at_level(logging.ERROR):
        result = lock.acquire(unschedulable=False, now_ns=T_NS)
    assert not result.acquired and result.holder_names == UNKNOWN_HOLDER
    assert "pykured lock release" in caplog.text
    assert lock.holders(now_ns=T_NS)[0].node_id == UNKNOWN_HOLDER
    with pytest.raises(LockError):
        lock.release()
    assert raw(kube, lock_ns) == stored


def test_lock_of_a_deleted_node_is_freed(
    kube: FakeKube, lock_ns: str, nodes: Any, caplog: pytest.LogCaptureFixture
) -> None:
    gone, waiting = nodes(2)
    assert make_annotation_lock(kube, lock_ns, gone).acquire(unschedulable=False, now_ns=T_NS).acquired
    freed: list[str] = []
    lock = make_annotation_lock(kube, lock_ns, waiting, on_gone_holder=freed.append)
    assert not lock.acquire(unschedulable=False, now_ns=T_NS).acquired
    kube.delete_node(gone)
    lock = make_annotation_lock(kube, lock_ns, waiting, on_gone_holder=freed.append)
    with caplog.at_level(logging.WARNING):
        assert lock.acquire(unschedulable=False, now_ns=T_NS).acquired
    assert freed == [gone]
    assert f"Lock held by node {gone} which no longer exists: releasing" in caplog.text


def test_manual_lock_is_not_freed_by_liveness(kube: FakeKube, lock_ns: str, nodes: Any) -> None:
    set_raw(kube, lock_ns, '{"nodeID":"manual"}')
    (node,) = nodes(1)
    assert not make_annotation_lock(kube, lock_ns, node).acquire(unschedulable=False, now_ns=T_NS).acquired
    assert raw(kube, lock_ns) == '{"nodeID":"manual"}'


def test_a_wait_no_longer_than_the_poll_interval_reads_nothing(
    kube: FakeKube, lock_ns: str, nodes: Any
) -> None:
    """The daemon's wait (``--period``, at most a minute) polls nothing on the annotation lock: the pass
    after it reads the DaemonSet once, as kured once per ``--period``. The first wait ends at a random moment
    (the waiters' passes spread), the next ones last the whole wait."""
    (node,) = nodes(1)
    faulty = FaultyKube(kube)
    clock = FakeClock(T)
    lock = make_annotation_lock(faulty, lock_ns, node, poll_interval=1.0, clock=clock)
    started = clock.monotonic()
    lock.wait_for_change(1.0)
    first = clock.monotonic() - started
    started = clock.monotonic()
    lock.wait_for_change(0.5)
    second = clock.monotonic() - started
    assert faulty.calls == {}
    assert 0 <= first <= 1.0
    assert second == pytest.approx(0.5)


def test_wait_for_change_returns_when_the_value_changes(kube: FakeKube, lock_ns: str, nodes: Any) -> None:
    holder, waiter = nodes(2)
    holding = make_annotation_lock(kube, lock_ns, holder)
    clock = FakeClock(T)
    released: list[bool] = []
    started = clock.monotonic()

    def sleep(seconds: float) -> None:  # the holder releases 0.5 s into the wait
        clock.sleep(seconds)
        if not released and clock.monotonic() - started >= 0.5:
            released.append(holding.release())

    waiting = make_annotation_lock(kube, lock_ns, waiter, poll_interval=0.1, sleep=sleep, clock=clock)
    assert holding.acquire(unschedulable=False, now_ns=T_NS).acquired
    assert not waiting.acquire(unschedulable=False, now_ns=T_NS).acquired
    waiting.wait_for_change(10)
    assert released == [True]
    assert clock.monotonic() - started < 0.5 + 0.15  # seen at the next poll (0.1 s ± 50 %)
    assert waiting.acquire(unschedulable=False, now_ns=T_NS).acquired


def test_entries_are_every_holder_expired_or_not(kube: FakeKube, lock_ns: str, nodes: Any) -> None:
    """For the operator's inspection (``LockView``): expired holders too, and nothing when never taken."""
    first, second = nodes(2)
    view = make_annotation_lock(kube, lock_ns, "", concurrency=2)
    assert view.entries() == []
    assert (
        make_annotation_lock(kube, lock_ns, first, concurrency=2, ttl=Duration(1))
        .acquire(unschedulable=True, now_ns=T_NS)
        .acquired
    )
    assert (
        make_annotation_lock(kube, lock_ns, second, concurrency=2)
        .acquire(unschedulable=False, now_ns=T_NS)
        .acquired
    )
    entries = view.entries()
    assert [(e.node_id, e.unschedulable) for e in entries] == [(first, True), (second, False)]
    assert [e.node_id for e in view.holders(now_ns=T_NS + 10)] == [second]  # the first one's TTL ran out


def test_entries_of_an_unreadable_value_raise(kube: FakeKube, lock_ns: str) -> None:
    set_raw(kube, lock_ns, "{not json")
    view = make_annotation_lock(kube, lock_ns, "")
    with pytest.raises(LockError) as caught:
        view.entries()
    assert not isinstance(caught.value.__cause__, KubeError)  # the value, not the API
    assert view.raw_value() == "{not json"


# -- the operator's view ----------------------------------------------------------------------------------


def test_the_view_reads_the_holders_in_the_stored_order(kube: FakeKube, lock_ns: str, nodes: Any) -> None:
    first, second = nodes(2)
    view = AnnotationView(make_annotation_lock(kube, lock_ns, ""))
    assert (view.backend, view.subject, view.optional) == (
        "annotation",
        f"annotation lock on {lock_ns}/kured",
        False,
    )
    assert view.read().holders == ()
    set_raw(kube, lock_ns, json.dumps({"maxOwners": 2, "locks": [{"nodeID": second}, {"nodeID": first}]}))
    reading = view.read()
    assert [e.node_id for e in reading.holders] == [second, first]
    assert (reading.unreadable, reading.error) == (None, None)


def test_the_view_shows_an_unreadable_value_and_how_to_fix_it(kube: FakeKube, lock_ns: str) -> None:
    set_raw(kube, lock_ns, "{not json")
    reading = AnnotationView(make_annotation_lock(kube, lock_ns, "")).read()
    assert reading.holders == () and reading.error is None and reading.unreadable is not None
    error = reading.unreadable.error
    assert reading.unreadable.note == (
        f"annotation {ANNOTATION} on {lock_ns}/kured is UNREADABLE and counts as held: {error}\n"
        "  value: {not json\n  fix: pykured lock release <node> --backend annotation\n"
    )


def test_a_view_read_that_fails_is_answered_not_raised(kube: FakeKube) -> None:
    reading = AnnotationView(make_annotation_lock(kube, "nowhere", "", retry_timeout=0.0)).read()
    assert reading.holders == () and isinstance(reading.error, LockError)


def test_the_views_release_deletes_an_unreadable_value(kube: FakeKube, lock_ns: str) -> None:
    set_raw(kube, lock_ns, "{not json")
    view = AnnotationView(make_annotation_lock(kube, lock_ns, ""))
    out = io.StringIO()
    assert view.release("any", out=out, named=False) is Released.FREED
    lines = out.getvalue().splitlines()
    assert lines[0].startswith(f"The annotation lock on {lock_ns}/kured is unreadable (")
    assert lines[1:] == ["  old value: {not json"] and raw(kube, lock_ns) is None


def test_the_views_release_frees_the_nodes_entry_and_reports_a_failure(
    kube: FakeKube, lock_ns: str, nodes: Any
) -> None:
    (node,) = nodes(1)
    assert make_annotation_lock(kube, lock_ns, node).acquire(unschedulable=False, now_ns=T_NS).acquired
    view = AnnotationView(make_annotation_lock(kube, lock_ns, "", retry_timeout=0.0))
    out = io.StringIO()
    assert view.release(node, out=out, named=False) is Released.FREED
    assert view.release(node, out=out, named=False) is Released.NOT_HELD
    assert out.getvalue() == f"Released the annotation lock of {node} on {lock_ns}/kured\n"
    out = io.StringIO()
    failing = AnnotationView(make_annotation_lock(kube, "nowhere", "", retry_timeout=0.0))
    assert failing.release(node, out=out, named=False) is Released.FAILED
    assert out.getvalue().startswith("annotation lock on nowhere/kured: ")


HALF, QUARTER = Budget(50, percent=True), Budget(25, percent=True)


def set_desired(kube: Any, namespace: str, value: object) -> None:
    """The DaemonSet controller's count of the nodes the DaemonSet runs on (or a garbled one)."""
    ds = kube.daemonsets[(namespace, "kured")]
    ds["status"] = {"desiredNumberScheduled": value}


@pytest.mark.parametrize(
    ("desired", "budget", "allowed"),
    [(4, HALF, 2), (12, QUARTER, 3), (100, QUARTER, 3), (None, HALF, 1), ("4", HALF, 1), (-4, HALF, 1),
     (None, Budget(2), 2)],
    ids=["half-of-4", "quarter-of-12", "concurrency-lower", "absent", "garbled", "negative", "a-number"],
)  # fmt: skip
def test_max_unavailable_on_the_annotation_lock(
    kube: FakeKube, lock_ns: str, nodes: Any, desired: object, budget: Budget, allowed: int
) -> None:
    """``--max-unavailable``: a share of the DaemonSet's desiredNumberScheduled (read with the lock), the
    lower of it and --concurrency; an absent or garbled count allows one. kured's maxOwners stays
    --concurrency."""
    if desired is not None:
        set_desired(kube, lock_ns, desired)
    names = nodes(allowed + 1)
    locks = [make_annotation_lock(kube, lock_ns, n, concurrency=3, budget=budget) for n in names]
    for lock in locks[:allowed]:
        assert lock.acquire(unschedulable=False, now_ns=T_NS).acquired
    refused = locks[-1].acquire(unschedulable=False, now_ns=T_NS)
    assert not refused.acquired and len(refused.holders) == allowed
    assert locks[-1].concurrency == allowed
    stored = raw(kube, lock_ns)
    assert stored is not None and stored.startswith('{"maxOwners":3,')
    assert locks[0].release()
    assert locks[-1].acquire(unschedulable=False, now_ns=T_NS).acquired


def test_a_count_that_grows_raises_the_limit_at_the_next_acquire(
    kube: FakeKube, lock_ns: str, nodes: Any
) -> None:
    a, b = nodes(2)
    set_desired(kube, lock_ns, 4)
    half = Budget(25, percent=True)
    assert (
        make_annotation_lock(kube, lock_ns, a, concurrency=5, budget=half)
        .acquire(unschedulable=False, now_ns=T_NS)
        .acquired
    )
    late = make_annotation_lock(kube, lock_ns, b, concurrency=5, budget=half)
    assert not late.acquire(unschedulable=False, now_ns=T_NS).acquired
    set_desired(kube, lock_ns, 8)
    assert late.acquire(unschedulable=False, now_ns=T_NS).acquired and late.concurrency == 2


# -- under the admission policies ----------------------------------------------------------------------------


def test_an_expired_lock_of_another_node_refused_by_the_policy_counts_as_held(
    kube: FakeKube, lock_ns: str, nodes: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """--lock-ttl under the policies: the take over another node's expired entry is refused (403); the value
    then counts as held (the result, ``holders``), the refusal is said once and nothing is written again
    while the value stays; an operator's release frees it."""
    holder, waiter = nodes(2)
    ttl = Duration.parse("1s")
    theirs = make_annotation_lock(OwnNodeOnly(kube, holder), lock_ns, holder, ttl=ttl)
    assert theirs.acquire(unschedulable=False, now_ns=T_NS).acquired
    later = T_NS + 60 * 1_000_000_000
    counted = FaultyKube(OwnNodeOnly(kube, waiter))
    mine = make_annotation_lock(counted, lock_ns, waiter, ttl=ttl)
    caplog.set_level(logging.INFO)
    for _ in range(3):
        result = mine.acquire(unschedulable=False, now_ns=later)
        assert not result.acquired and result.holder_names == holder
    assert counted.calls.get("replace_daemonset") == 1
    lines = [r.getMessage() for r in caplog.records if "the admission policy" in r.getMessage()]
    assert len(lines) == 1, lines
    where = (
        f"take over the lock on daemonset {lock_ns}/kured in annotation {ANNOTATION}, held by node {holder}"
    )
    assert where in lines[0]
    assert "pykured-agent-daemonset" in lines[0] and f"pykured lock release {holder}" in lines[0]
    assert [e.node_id for e in mine.holders(now_ns=later)] == [holder]
    assert AnnotationView(make_annotation_lock(kube, lock_ns, "")).release(
        holder, out=io.StringIO(), named=False
    ) is Released.FREED  # fmt: skip
    assert mine.acquire(unschedulable=False, now_ns=later).acquired


def test_a_multi_lock_released_beside_others_keeps_its_stored_max_owners(
    kube: FakeKube, lock_ns: str, nodes: Any
) -> None:
    """kured's release keeps the value's maxOwners; so does pykured's while other nodes hold entries (the
    policies refuse to change it under them), whatever its own --concurrency."""
    a, b = nodes(2)
    assert (
        make_annotation_lock(kube, lock_ns, a, concurrency=2)
        .acquire(unschedulable=False, now_ns=T_NS)
        .acquired
    )
    ours = make_annotation_lock(OwnNodeOnly(kube, b), lock_ns, b, concurrency=2)
    assert ours.acquire(unschedulable=False, now_ns=T_NS).acquired
    wider = make_annotation_lock(OwnNodeOnly(kube, b), lock_ns, b, concurrency=3)
    assert wider.release()
    stored = json.loads(raw(kube, lock_ns) or "")
    assert stored["maxOwners"] == 2 and [e["nodeID"] for e in stored["locks"]] == [a]


# -- the watched wait (a single-object watch of the DaemonSet, where RBAC grants list and watch) -------------


def entry_json(node: str, *, created: str = "2026-11-18T00:00:00Z", ttl_ns: int = 0) -> str:
    return json.dumps(
        {"nodeID": node, "metadata": {"unschedulable": False}, "created": created, "TTL": ttl_ns},
        separators=(",", ":"),
    )


def test_slot_state_says_whether_a_slot_is_free_who_holds_and_the_next_expiry() -> None:
    assert slot_state(None, me="w", limit=1, now_ns=T_NS) == (True, (), None)
    free, holders, expiry = slot_state(entry_json("h"), me="w", limit=1, now_ns=T_NS)
    assert (free, [e.node_id for e in holders], expiry) == (False, ["h"], None)
    assert slot_state(entry_json("w"), me="w", limit=1, now_ns=T_NS)[0]  # its own: reentrant
    assert slot_state(entry_json("h"), me="w", limit=2, now_ns=T_NS)[0]  # room left
    hour = 3600 * 10**9
    free, holders, expiry = slot_state(entry_json("h", ttl_ns=1000 * hour), me="w", limit=1, now_ns=T_NS)
    assert not free and expiry == holders[0].created_ns + 1000 * hour
    expired = entry_json("h", created="2000-01-01T00:00:00Z", ttl_ns=hour)
    assert slot_state(expired, me="w", limit=1, now_ns=T_NS) == (True, (), None)
    held = slot_state(expired, me="w", limit=1, now_ns=T_NS, refused=True)  # a policy refused the take
    assert not held[0] and [e.node_id for e in held[1]] == ["h"]
    assert slot_state("{not json", me="w", limit=1, now_ns=T_NS)[:2] == (False, (UNKNOWN,))


def waiting_lock(kube: Any, lock_ns: str, node: str, **kw: Any) -> AnnotationLock:
    """A watching waiter on the real clock (the watch runs in its own thread), its delays short."""
    kw.setdefault("stagger", 0.05)
    kw.setdefault("liveness_interval", None)
    return conftest.make_annotation_lock(kube, lock_ns, node, watch=True, **kw)


def start_waiting(lock: AnnotationLock, done: threading.Event) -> None:
    """The waiter's wait in a thread of its own (the daemon's): ``done`` is set when it ends."""

    def wait() -> None:
        lock.wait_for_change(60)
        done.set()

    threading.Thread(target=wait, daemon=True).start()


def test_a_watched_wait_ends_when_the_holder_releases_and_the_pass_reads_nothing(
    kube: FakeKube, lock_ns: str, nodes: Any
) -> None:
    holder, waiter = nodes(2)
    holding = make_annotation_lock(kube, lock_ns, holder)
    assert holding.acquire(unschedulable=False, now_ns=T_NS).acquired
    faulty = FaultyKube(kube)
    lock = waiting_lock(faulty, lock_ns, waiter)
    assert lock.watched
    assert not lock.acquire(unschedulable=False, now_ns=T_NS).acquired
    gets = faulty.calls.get("get_daemonset", 0)
    done = threading.Event()
    start_waiting(lock, done)
    assert kube.wait_for_watches(1)
    assert not done.wait(0.3)  # the lock is held: the wait goes on
    assert holding.release()
    assert done.wait(30)
    # the pass after the wait: its own read and its take come from the watched copy
    assert lock.holding(now_ns=T_NS, honour_ttl=False) is None
    assert lock.acquire(unschedulable=False, now_ns=T_NS).acquired
    assert faulty.calls.get("get_daemonset", 0) == gets
    assert faulty.calls.get("list_daemonsets") == 1 and faulty.calls.get("watch_daemonsets") == 1
    assert SINGLE_RE.fullmatch(raw(kube, lock_ns) or "")["node"] == waiter  # type: ignore[index]


def test_a_watched_waiter_whose_delay_ends_after_another_take_goes_on_waiting(
    kube: FakeKube, lock_ns: str, nodes: Any
) -> None:
    """A slot freed and taken again before this waiter's delay ends: its wait goes on, and it sends
    nothing."""
    holder, other, waiter = nodes(3)
    holding = make_annotation_lock(kube, lock_ns, holder)
    assert holding.acquire(unschedulable=False, now_ns=T_NS).acquired
    faulty = FaultyKube(kube)
    lock = waiting_lock(faulty, lock_ns, waiter, stagger=5.0)
    lock._rng.seed(1)
    assert not lock.acquire(unschedulable=False, now_ns=T_NS).acquired
    before = dict(faulty.calls)
    done = threading.Event()
    start_waiting(lock, done)
    assert kube.wait_for_watches(1)
    with lock._watch.changed:  # type: ignore[union-attr]
        assert holding.release()
        assert make_annotation_lock(kube, lock_ns, other).acquire(unschedulable=False, now_ns=T_NS).acquired
    assert eventually(lambda: lock._look_at is None and lock._freed_at is None, timeout=10)
    assert not done.wait(0.5)
    assert {k: v for k, v in faulty.calls.items() if k != "watch_daemonsets"} == {
        k: v for k, v in before.items() if k != "watch_daemonsets"
    } | {"list_daemonsets": 1}


def test_under_kureds_rbac_the_wait_says_so_once_and_polls(
    kube: FakeKube, lock_ns: str, nodes: Any, caplog: pytest.LogCaptureFixture
) -> None:
    holder, waiter = nodes(2)
    holding = make_annotation_lock(kube, lock_ns, holder)
    assert holding.acquire(unschedulable=False, now_ns=T_NS).acquired
    faulty = FaultyKube(kube)
    refusal = ForbiddenError("daemonsets.apps is forbidden: cannot list (HTTP 403)", status=403)
    faulty.fail("list_daemonsets", "before", refusal, times=5)
    clock = FakeClock(T)
    released: list[bool] = []

    def sleep(seconds: float) -> None:  # the holder releases during the wait's polls
        clock.sleep(seconds)
        if not released:
            released.append(holding.release())

    lock = make_annotation_lock(
        faulty, lock_ns, waiter, watch=True, poll_interval=0.1, sleep=sleep, clock=clock
    )
    watched = AnnotationLock.watched.fget  # type: ignore[attr-defined]  # read anew each time (no narrowing)
    assert watched(lock)  # until the watch is refused
    assert not lock.acquire(unschedulable=False, now_ns=T_NS).acquired
    with caplog.at_level(logging.INFO, logger="pykured.lock.annotation"):
        lock.wait_for_change(10)  # longer than a poll: it polls
        assert released == [True]
        assert not watched(lock)  # the daemon now looks every minute, as before
        lock.wait_for_change(0.05)
    said = [r.getMessage() for r in caplog.records if "Not allowed to watch daemonset" in r.getMessage()]
    assert said == [
        f"Not allowed to watch daemonset {lock_ns}/kured: waiting for the lock by reading it every --period "
        "(at most every 0.1s), as kured; `list` and `watch` on daemonsets (resourceNames: [kured]) let the "
        "agent watch it instead"
    ]
    assert faulty.calls.get("list_daemonsets") == 1 and "watch_daemonsets" not in faulty.calls
    assert lock.acquire(unschedulable=False, now_ns=T_NS).acquired
