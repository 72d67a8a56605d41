"""Golden and property tests of kured's lock JSON (``pkg/daemonsetlock``) and the pure lock decisions."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pykured.core.errors import LockError
from pykured.lock.record import (
    GO_ZERO_TIME_NS,
    LockEntry,
    LockForm,
    LockValue,
    decode,
    encode,
    encode_entry,
    encode_multi,
    find,
    format_go_time,
    go_json_string,
    live,
    parse_go_time,
    plan_acquire,
    ttl_expired,
    value_for,
)

T0 = 1_782_818_956_917_242_595  # 2026-06-30T11:29:16.917242595Z
T1 = 1_782_819_062_500_000_000  # 2026-06-30T11:31:02.5Z
MIN30 = 1_800_000_000_000

SINGLE = (
    '{"nodeID":"worker-1","metadata":{"unschedulable":false},'
    '"created":"2026-06-30T11:29:16.917242595Z","TTL":1800000000000}'
)
MULTI = (
    '{"maxOwners":2,"locks":[{"nodeID":"worker-1","metadata":{"unschedulable":false},'
    '"created":"2026-06-30T11:29:16.917242595Z","TTL":0},{"nodeID":"worker-2","metadata":{"unschedulable":true},'
    '"created":"2026-06-30T11:31:02.5Z","TTL":0}]}'
)
MANUAL_ENCODED = (
    '{"nodeID":"manual","metadata":{"unschedulable":false},"created":"0001-01-01T00:00:00Z","TTL":0}'
)


# -- golden values of kured's pkg/daemonsetlock ----------------------------------------------------


def test_decode_single_golden() -> None:
    value = decode(SINGLE)
    assert value.form is LockForm.SINGLE
    assert value.entries == (LockEntry("worker-1", False, T0, MIN30, "2026-06-30T11:29:16.917242595Z"),)


def test_encode_single_golden() -> None:
    assert encode_entry(LockEntry("worker-1", False, T0, MIN30)) == SINGLE
    assert encode(LockValue(LockForm.SINGLE, (LockEntry("worker-1", False, T0, MIN30),))) == SINGLE


def test_decode_multi_golden() -> None:
    value = decode(MULTI)
    assert value.form is LockForm.MULTI
    assert value.max_owners == 2
    assert [(e.node_id, e.unschedulable, e.created_ns, e.ttl_ns) for e in value.entries] == [
        ("worker-1", False, T0, 0),
        ("worker-2", True, T1, 0),
    ]


def test_encode_multi_golden() -> None:
    entries = (LockEntry("worker-1", False, T0, 0), LockEntry("worker-2", True, T1, 0))
    assert encode_multi(max_owners=2, entries=entries) == MULTI
    assert encode(value_for(entries, concurrency=2)) == MULTI


@pytest.mark.parametrize(
    "raw", [SINGLE, MULTI, '{"maxOwners":2,"locks":[]}'], ids=["single", "multi", "empty-multi"]
)
def test_decode_encode_is_byte_identical(raw: str) -> None:
    assert encode(decode(raw)) == raw


def test_empty_multi_value_is_free_not_held_by_empty_name() -> None:
    value = decode('{"maxOwners":2,"locks":[]}')
    assert value == LockValue(LockForm.MULTI, (), 2)
    assert encode(value_for((), concurrency=2)) == '{"maxOwners":2,"locks":[]}'


def test_manual_lock_is_held_forever() -> None:
    value = decode('{"nodeID":"manual"}')
    (entry,) = value.entries
    assert (entry.node_id, entry.created_ns, entry.ttl_ns, entry.created_raw) == (
        "manual",
        GO_ZERO_TIME_NS,
        0,
        None,
    )
    assert not ttl_expired(entry, T0 * 10)
    assert encode(value) == MANUAL_ENCODED


# -- Go time -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (T0, "2026-06-30T11:29:16.917242595Z"),
        (T1, "2026-06-30T11:31:02.5Z"),
        (1_782_819_062_000_000_000, "2026-06-30T11:31:02Z"),
        (1_782_819_062_000_000_001, "2026-06-30T11:31:02.000000001Z"),
        (1_782_819_062_120_000_000, "2026-06-30T11:31:02.12Z"),
        (0, "1970-01-01T00:00:00Z"),
        (-1, "1969-12-31T23:59:59.999999999Z"),
        (GO_ZERO_TIME_NS, "0001-01-01T00:00:00Z"),
        (951_782_400_000_000_000, "2000-02-29T00:00:00Z"),
    ],
    ids=["nanos", "half", "whole", "one-ns", "trailing-zero", "epoch", "before-epoch", "go-zero", "leap-day"],
)
def test_go_time_round_trip(ns: int, text: str) -> None:
    assert format_go_time(ns) == text
    assert parse_go_time(text) == (ns, 0)


def test_zone_offset_is_kept_on_reencode() -> None:
    raw = '{"nodeID":"a","metadata":{"unschedulable":false},"created":"2026-06-30T13:31:02.5+02:00","TTL":0}'
    (entry,) = decode(raw).entries
    assert entry.created_ns == T1
    assert encode_entry(entry) == raw


@pytest.mark.parametrize(
    "text",
    [
        "2026-06-30 11:29:16Z",
        "2026-06-30T11:29:16",
        "2026-02-30T00:00:00Z",
        "2026-06-30T24:00:00Z",
        "yesterday",
    ],
    ids=["space", "no-zone", "feb-30", "hour-24", "words"],
)
def test_bad_times_are_rejected(text: str) -> None:
    with pytest.raises(ValueError, match=r"time|range"):
        parse_go_time(text)


# -- lenient decoding (Go encoding/json) ---------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"nodeID":"a","extra":{"x":[1,2]},"metadata":{"unschedulable":true,"more":1}}', ("a", True, 0)),
        ('{"nodeID":"a"}', ("a", False, 0)),
        ('{"nodeID":"a","metadata":null,"created":null,"TTL":null}', ("a", False, 0)),
        ('{"nodeid":"a","METADATA":{"Unschedulable":true},"ttl":5}', ("a", True, 5)),
        ('{"nodeID":"a","nodeID":"b"}', ("b", False, 0)),
        ('{"nodeID":"a","TTL":9223372036854775807}', ("a", False, 9223372036854775807)),
    ],
    ids=["unknown-fields", "missing-fields", "nulls", "case-insensitive", "last-duplicate-wins", "max-int64"],
)
def test_lenient_single(raw: str, expected: tuple[str, bool, int]) -> None:
    (entry,) = decode(raw).entries
    assert (entry.node_id, entry.unschedulable, entry.ttl_ns) == expected


@pytest.mark.parametrize(
    "raw",
    ["{}", "null", '{"nodeID":""}', '{"metadata":{"unschedulable":true}}'],
    ids=["empty-object", "null", "empty-node", "no-node"],
)
def test_single_value_without_node_holds_nothing(raw: str) -> None:
    assert decode(raw) == LockValue(LockForm.SINGLE, ())


@pytest.mark.parametrize(
    ("raw", "holders", "max_owners"),
    [
        ('{"maxOwners":3}', (), 3),
        ('{"locks":null}', (), 0),
        ('{"locks":[{"nodeID":"a"},null]}', ("a", ""), 0),
        ('{"MaxOwners":1,"LOCKS":[{"nodeID":"a"}]}', ("a",), 1),
    ],
    ids=["no-locks", "null-locks", "null-entry", "case-insensitive"],
)
def test_lenient_multi(raw: str, holders: tuple[str, ...], max_owners: int) -> None:
    value = decode(raw)
    assert value.form is LockForm.MULTI
    assert tuple(e.node_id for e in value.entries) == holders
    assert value.max_owners == max_owners


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("", "not valid JSON"),
        ("not json", "not valid JSON"),
        ('{"nodeID":"a"', "not valid JSON"),
        ('{"TTL":NaN}', "not valid JSON"),
        ("[]", "must be a JSON object"),
        ('"worker-1"', "must be a JSON object"),
        ('{"nodeID":5}', "nodeID must be a string"),
        ('{"nodeID":"a","TTL":"30m"}', "TTL must be an integer"),
        ('{"nodeID":"a","TTL":1.5}', "TTL must be an integer"),
        ('{"nodeID":"a","TTL":1e9}', "TTL must be an integer"),
        ('{"nodeID":"a","TTL":true}', "TTL must be an integer"),
        ('{"nodeID":"a","TTL":9223372036854775808}', "TTL must be an integer"),
        ('{"nodeID":"a","metadata":{"unschedulable":"yes"}}', "unschedulable must be a boolean"),
        ('{"nodeID":"a","metadata":[]}', "metadata must be a JSON object"),
        ('{"nodeID":"a","created":"yesterday"}', "created"),
        ('{"nodeID":"a","created":5}', "created must be an RFC 3339 string"),
        ('{"maxOwners":"2","locks":[]}', "maxOwners must be an integer"),
        ('{"maxOwners":2,"locks":{}}', "locks must be a JSON array"),
        ('{"maxOwners":2,"locks":[5]}', r"locks\[0\] must be a JSON object"),
        ('{"maxOwners":2,"locks":[{"nodeID":["a"]}]}', r"locks\[0\].nodeID must be a string"),
    ],
    ids=[
        "empty-string", "words", "truncated", "nan", "array", "string", "node-number", "ttl-string",
        "ttl-float", "ttl-exponent", "ttl-bool", "ttl-overflow", "unschedulable-string", "metadata-array",
        "created-words", "created-number", "maxowners-string", "locks-object", "locks-number",
        "entry-node-array",
    ],
)  # fmt: skip
def test_corrupt_values_raise_lock_error(raw: str, message: str) -> None:
    with pytest.raises(LockError, match=message):
        decode(raw)


# -- encoding details ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "encoded"),
    [
        ("worker-1", '"worker-1"'),
        ('a"b\\c', r'"a\"b\\c"'),
        ("<&>", r'"\u003c\u0026\u003e"'),
        ("\n\t\r\b\f\x01", r'"\n\t\r\b\f\u0001"'),
        ("ü\u2028", '"ü\\u2028"'),
    ],
    ids=["plain", "quote-backslash", "html", "controls", "unicode"],
)
def test_go_json_string(text: str, encoded: str) -> None:
    assert go_json_string(text) == encoded


def test_single_form_cannot_hold_two_entries() -> None:
    with pytest.raises(LockError, match="one entry"):
        encode(LockValue(LockForm.SINGLE, (LockEntry("a"), LockEntry("b"))))


def test_single_form_without_entries_means_no_annotation() -> None:
    assert encode(LockValue(LockForm.SINGLE)) is None


@pytest.mark.parametrize(
    ("entries", "concurrency", "form", "max_owners"),
    [
        ((), 1, LockForm.SINGLE, 0),
        ((LockEntry("a"),), 0, LockForm.SINGLE, 0),
        ((LockEntry("a"), LockEntry("b")), 1, LockForm.MULTI, 2),
        ((), 3, LockForm.MULTI, 3),
        ((LockEntry("a"),), 2, LockForm.MULTI, 2),
    ],
    ids=["single-empty", "single-zero-concurrency", "two-in-single-mode", "multi-empty", "multi"],
)
def test_value_for(entries: tuple[LockEntry, ...], concurrency: int, form: LockForm, max_owners: int) -> None:
    value = value_for(entries, concurrency=concurrency)
    assert (value.form, value.entries, value.max_owners) == (form, entries, max_owners)


# -- decisions -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ttl", "age", "expired"),
    [
        (0, 10**18, False),
        (MIN30, MIN30 - 1, False),
        (MIN30, MIN30, True),
        (MIN30, MIN30 + 1, True),
        (-5, 10, False),
    ],
    ids=["ttl-zero-never", "just-before", "exactly-at-ttl", "after", "negative-ttl"],
)
def test_ttl_expired(ttl: int, age: int, expired: bool) -> None:
    assert ttl_expired(LockEntry("a", created_ns=T0, ttl_ns=ttl), T0 + age) is expired


NEW = LockEntry("me", created_ns=T1)
LIVE_A = LockEntry("a", created_ns=T0)
OLD_B = LockEntry("b", created_ns=T0 - 10, ttl_ns=1)
OLD_C = LockEntry("c", created_ns=T0, ttl_ns=1)


@pytest.mark.parametrize(
    ("entries", "concurrency", "expected"),
    [
        ((), 1, (NEW,)),
        ((), 0, (NEW,)),
        ((LIVE_A,), 1, None),
        ((OLD_B,), 1, (NEW,)),
        ((LIVE_A, OLD_B), 1, None),
        ((LIVE_A,), 2, (LIVE_A, NEW)),
        ((LIVE_A, LockEntry("x")), 2, None),
        ((OLD_B,), 2, (OLD_B, NEW)),
        ((LIVE_A, OLD_B), 2, (LIVE_A, NEW)),
        ((OLD_C, LIVE_A, OLD_B), 3, (OLD_C, LIVE_A, NEW)),
        ((LIVE_A, LockEntry("x"), LockEntry("y")), 2, None),
    ],
    ids=[
        "single-free", "zero-concurrency-is-one", "single-held", "single-expired", "single-live-and-expired",
        "multi-room", "multi-full", "multi-keeps-expired-with-room", "multi-drops-expired-when-full",
        "multi-drops-oldest-expired-only", "more-holders-than-slots",
    ],
)  # fmt: skip
def test_plan_acquire(
    entries: tuple[LockEntry, ...], concurrency: int, expected: tuple[LockEntry, ...] | None
) -> None:
    assert plan_acquire(entries, new=NEW, concurrency=concurrency, now_ns=T1) == expected


def test_mixed_forms_exclude_each_other() -> None:
    """A single-form holder counts in multi mode, a multi-form holder in single mode."""
    single_holder = decode('{"nodeID":"manual"}').entries
    assert plan_acquire(single_holder, new=NEW, concurrency=1, now_ns=T1) is None
    assert plan_acquire(single_holder, new=NEW, concurrency=2, now_ns=T1) == (*single_holder, NEW)
    multi_holders = decode(MULTI).entries
    assert plan_acquire(multi_holders, new=NEW, concurrency=1, now_ns=T1) is None
    assert plan_acquire(multi_holders, new=NEW, concurrency=3, now_ns=T1) == (*multi_holders, NEW)


def test_live_and_find() -> None:
    entries = (LIVE_A, OLD_B, LockEntry("a", ttl_ns=5))
    assert live(entries, T1) == (LIVE_A,)
    assert find(entries, "b") is OLD_B
    assert find(entries, "zzz") is None


# -- properties ----------------------------------------------------------------------------------

node_ids = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=20)
times = st.integers(min_value=GO_ZERO_TIME_NS, max_value=253_402_300_799_999_999_999)  # years 1..9999


@given(node=node_ids.filter(bool), unschedulable=st.booleans(), created=times, ttl=st.integers(0, 2**63 - 1))
def test_entry_round_trip(node: str, unschedulable: bool, created: int, ttl: int) -> None:
    entry = LockEntry(node, unschedulable, created, ttl)
    (decoded,) = decode(encode_entry(entry)).entries
    assert (decoded.node_id, decoded.unschedulable, decoded.created_ns, decoded.ttl_ns) == (
        node,
        unschedulable,
        created,
        ttl,
    )
    assert encode_entry(decoded) == encode_entry(entry)


@given(st.lists(st.tuples(node_ids, times), max_size=5), st.integers(2, 50))
def test_multi_round_trip(items: list[tuple[str, int]], owners: int) -> None:
    entries = tuple(LockEntry(node, created_ns=created) for node, created in items)
    raw = encode_multi(max_owners=owners, entries=entries)
    assert encode(decode(raw)) == raw
    assert [e.node_id for e in decode(raw).entries] == [node for node, _ in items]


entry_sets = st.lists(
    st.builds(
        LockEntry,
        node_id=st.sampled_from(["a", "b", "c", "d", "manual"]),
        created_ns=st.integers(T0 - 10, T0 + 10),
        ttl_ns=st.sampled_from([0, 1, 5, 50]),
    ),
    max_size=6,
).map(tuple)


@given(entry_sets, st.integers(-1, 5), st.integers(T0, T0 + 100))
def test_plan_acquire_never_exceeds_the_limit(
    entries: tuple[LockEntry, ...], concurrency: int, now: int
) -> None:
    planned = plan_acquire(entries, new=NEW, concurrency=concurrency, now_ns=now)
    before = live(entries, now)
    if len(before) >= max(concurrency, 1):
        assert planned is None
        return
    assert planned is not None and planned[-1] == NEW
    assert len(live(planned, now)) == len(before) + 1 <= max(concurrency, 1)
    assert all(e in planned for e in before)  # live holders are never dropped
    if concurrency > 1:
        assert len(planned) <= max(len(entries) + 1, concurrency)
