"""kured's lock value: the JSON in the ``weave.works/kured-node-lock`` DaemonSet annotation, byte for byte.

Pure and standard-library only. Mirrors kured 1.23.0's ``pkg/daemonsetlock/daemonsetlock.go``:

* single form (``--concurrency`` <= 1), Go field order kept::

    {"nodeID":"worker-1","metadata":{"unschedulable":false},"created":"2026-06-30T11:29:16.917242595Z","TTL":0}

* multi form (``--concurrency`` > 1): ``{"maxOwners":2,"locks":[<entry>, ...]}``.

``created`` is Go's ``time.Time`` JSON (RFC 3339, nanoseconds, trailing zeros trimmed, ``Z`` for UTC) and
``TTL`` a Go ``time.Duration`` in nanoseconds (0 = never expires).

Decoding is as lenient as Go's ``encoding/json``: unknown keys are ignored, missing keys and ``null`` are
zero values, keys match case-insensitively, the last duplicate wins. A value of the wrong JSON type, invalid
JSON or a malformed timestamp raises :class:`~pykured.core.errors.LockError`; the backends then count the
lock as
held by :data:`UNKNOWN_HOLDER` until an operator runs ``pykured lock release``. The value is bounded before it
is decoded (:mod:`pykured.core.boundedjson`: at most :data:`MAX_CHARS`, the API server's own limit on a
Node's annotations, and nested at most :data:`MAX_DEPTH`), so any value, however large or deep, decodes or
raises :class:`LockError`, never anything else.

Invariants and where pykured consciously differs from kured (both are listed in COMPATIBILITY.md §2):

* A decoded value knows its form. Any value with a ``maxOwners`` or ``locks`` key is the multi form, read
  as its ``locks`` entries, whatever our own ``--concurrency``: an empty ``{"maxOwners":2,"locks":[]}`` is a
  free lock, never "held by ''" (kured's single-mode deadlock).
* A single-form value with a real ``nodeID`` is a holder in multi mode too (kured's multi reader sees zero
  entries and overwrites it, so the documented manual lock ``{"nodeID":"manual"}`` did not work there).
  A single-form value with an empty ``nodeID`` (``{}``, ``null``) holds nothing.
* Holders of both forms count against the limit, so nodes of mixed ``--concurrency`` exclude each other.
"""

from __future__ import annotations

import calendar
import dataclasses
import enum
import json
import re
from collections.abc import Iterable
from typing import Any

from pykured.core import boundedjson
from pykured.core.errors import LockError

MANUAL_HOLDER = "manual"
"""The node id kured's documentation uses for a manual lock (held forever, never freed automatically)."""

UNKNOWN_HOLDER = "<unknown: unreadable lock value>"
"""The holder pykured reports while the stored lock value cannot be decoded."""

GO_ZERO_TIME_NS = -62_135_596_800 * 1_000_000_000
"""Go's zero ``time.Time`` (0001-01-01T00:00:00Z) as Unix nanoseconds: what a missing ``created`` means."""

MAX_CHARS = 256 * 1024
"""The longest lock value decoded (the API server keeps all of an object's annotations within 256 KiB)."""
MAX_DEPTH = 8
"""The deepest nesting decoded: kured's multi form nests four deep (value, locks, entry, metadata)."""

_NS = 1_000_000_000
_INT64 = (-(1 << 63), (1 << 63) - 1)
_TIME_RE = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:[.,](\d+))?(Z|[+-]\d{2}:\d{2})\Z", re.ASCII
)


class LockForm(enum.Enum):
    """Which of kured's two JSON shapes a value has."""

    SINGLE = "single"
    MULTI = "multi"


@dataclasses.dataclass(frozen=True, slots=True)
class LockEntry:
    """One holder: kured's ``LockAnnotationValue``.

    ``unschedulable`` is the node's ``spec.unschedulable`` *before* pykured cordoned it (kured's
    ``lockAnnotation.Metadata``). ``created_ns`` is Unix nanoseconds; ``created_raw`` keeps the stored text so
    a re-encoded entry keeps its zone offset (``None`` for entries pykured creates, which are written in UTC).
    """

    node_id: str
    unschedulable: bool = False
    created_ns: int = GO_ZERO_TIME_NS
    ttl_ns: int = 0
    created_raw: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class LockValue:
    """A decoded annotation: its form, its holders (stored order) and ``maxOwners`` (multi form only)."""

    form: LockForm
    entries: tuple[LockEntry, ...] = ()
    max_owners: int = 0


# -- Go time -------------------------------------------------------------------------------------


def parse_go_time(text: str) -> tuple[int, int]:
    """Parse Go's RFC 3339 JSON time into (Unix ns, zone offset in seconds); ``ValueError`` if malformed."""
    match = _TIME_RE.match(text)
    if match is None:
        raise ValueError(f"cannot parse {text!r} as RFC 3339 time")
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    frac, zone = match.group(7) or "", match.group(8)
    if not (1 <= month <= 12 and 1 <= day <= calendar.monthrange(max(year, 1), month)[1]):
        raise ValueError(f"day out of range in {text!r}")
    if hour > 23 or minute > 59 or second > 59:
        raise ValueError(f"time out of range in {text!r}")
    offset = 0
    if zone != "Z":
        zh, zm = int(zone[1:3]), int(zone[4:6])
        if zh > 23 or zm > 59:
            raise ValueError(f"time zone offset out of range in {text!r}")
        offset = (zh * 3600 + zm * 60) * (-1 if zone[0] == "-" else 1)
    days = _days_from_civil(year, month, day)
    seconds = days * 86400 + hour * 3600 + minute * 60 + second - offset
    return seconds * _NS + int((frac + "000000000")[:9]), offset


def format_go_time(ns: int, offset: int = 0) -> str:
    """Go's ``time.Time.MarshalJSON`` text (RFC 3339, trimmed nanoseconds) for Unix ``ns`` at ``offset``."""
    seconds, frac = divmod(ns, _NS)
    seconds += offset
    days, rem = divmod(seconds, 86400)
    year, month, day = _civil_from_days(days)
    text = f"{year:04d}-{month:02d}-{day:02d}T{rem // 3600:02d}:{rem % 3600 // 60:02d}:{rem % 60:02d}"
    if frac:
        text += "." + f"{frac:09d}".rstrip("0")
    if offset == 0:
        return text + "Z"
    sign = "-" if offset < 0 else "+"
    return text + f"{sign}{abs(offset) // 3600:02d}:{abs(offset) % 3600 // 60:02d}"


def _days_from_civil(year: int, month: int, day: int) -> int:
    # Days since 1970-01-01 in the proleptic Gregorian calendar (Howard Hinnant's algorithm).
    year -= month <= 2
    era = year // 400
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _civil_from_days(days: int) -> tuple[int, int, int]:
    days += 719468
    era = days // 146097
    doe = days - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, day


# -- decoding ------------------------------------------------------------------------------------


def _fields(obj: list[tuple[str, Any]], names: Iterable[str]) -> dict[str, Any]:
    """Go's key matching: case-insensitive, last occurrence wins, unknown keys dropped, null = absent."""
    wanted = {name.lower(): name for name in names}
    out: dict[str, Any] = {}
    for key, value in obj:
        name = wanted.get(key.lower())
        if name is None:
            continue
        if value is None:
            out.pop(name, None)
        else:
            out[name] = value
    return out


def _int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not _INT64[0] <= value <= _INT64[1]:
        raise LockError(f"lock value: {where} must be an integer, got {json.dumps(value)[:60]}")
    return value


def _object(value: Any, where: str) -> list[tuple[str, Any]]:
    if not isinstance(value, _Pairs):
        raise LockError(f"lock value: {where} must be a JSON object, got {json.dumps(value)[:60]}")
    return value


class _Pairs(list[tuple[str, Any]]):
    """A JSON object kept as its ordered (key, value) pairs."""


def _decode_entry(obj: list[tuple[str, Any]], where: str) -> LockEntry:
    fields = _fields(obj, ("nodeID", "metadata", "created", "TTL"))
    node_id = fields.get("nodeID", "")
    if not isinstance(node_id, str):
        raise LockError(f"lock value: {where}.nodeID must be a string, got {json.dumps(node_id)[:60]}")
    unschedulable = False
    if "metadata" in fields:
        meta = _fields(_object(fields["metadata"], f"{where}.metadata"), ("unschedulable",))
        unschedulable = meta.get("unschedulable", False)
        if not isinstance(unschedulable, bool):
            raise LockError(f"lock value: {where}.metadata.unschedulable must be a boolean")
    created_ns, created_raw = GO_ZERO_TIME_NS, None
    if "created" in fields:
        created_raw = fields["created"]
        if not isinstance(created_raw, str):
            raise LockError(f"lock value: {where}.created must be an RFC 3339 string")
        try:
            created_ns = parse_go_time(created_raw)[0]
        except ValueError as exc:
            raise LockError(f"lock value: {where}.created: {exc}") from exc
    ttl_ns = _int(fields.get("TTL", 0), f"{where}.TTL")
    return LockEntry(node_id, unschedulable, created_ns, ttl_ns, created_raw)


def decode(raw: str) -> LockValue:
    """Decode an annotation value of either form; raises :class:`LockError` for anything Go would reject
    (and for a value beyond the bounds), never anything else."""
    try:
        top = boundedjson.loads(raw, max_chars=MAX_CHARS, max_depth=MAX_DEPTH, object_pairs_hook=_Pairs)
    except boundedjson.UnreadableJSON as exc:
        raise LockError(f"lock value is not valid JSON ({exc}): {str(raw)[:80]!r}") from exc
    if top is None:
        return LockValue(LockForm.SINGLE)
    obj = _object(top, "the value")
    if any(key.lower() in ("maxowners", "locks") for key, _ in obj):
        fields = _fields(obj, ("maxOwners", "locks"))
        max_owners = _int(fields.get("maxOwners", 0), "maxOwners")
        locks = fields.get("locks", [])
        if not isinstance(locks, list) or isinstance(locks, _Pairs):
            raise LockError("lock value: locks must be a JSON array")
        entries = tuple(
            LockEntry("") if item is None else _decode_entry(_object(item, f"locks[{i}]"), f"locks[{i}]")
            for i, item in enumerate(locks)
        )
        return LockValue(LockForm.MULTI, entries, max_owners)
    entry = _decode_entry(obj, "the value")
    return LockValue(LockForm.SINGLE, (entry,) if entry.node_id else ())


# -- encoding ------------------------------------------------------------------------------------

_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}


def go_json_string(text: str) -> str:
    """A JSON string as Go's ``encoding/json`` writes it (HTML-safe: ``<``, ``>``, ``&`` escaped)."""
    out = ['"']
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch < " " or ch in "<>&\u2028\u2029":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def encode_entry(entry: LockEntry) -> str:
    """One ``LockAnnotationValue`` in Go's field order."""
    offset = 0
    if entry.created_raw is not None:
        try:
            offset = parse_go_time(entry.created_raw)[1]
        except ValueError:
            offset = 0
    created = format_go_time(entry.created_ns, offset)
    flag = "true" if entry.unschedulable else "false"
    return (
        f'{{"nodeID":{go_json_string(entry.node_id)},"metadata":{{"unschedulable":{flag}}},'
        f'"created":"{created}","TTL":{entry.ttl_ns}}}'
    )


def encode_multi(*, max_owners: int, entries: Iterable[LockEntry]) -> str:
    """The multi form; no entries gives ``{"maxOwners":N,"locks":[]}`` as kured leaves it after release."""
    return f'{{"maxOwners":{max_owners},"locks":[{",".join(encode_entry(e) for e in entries)}]}}'


def encode(value: LockValue) -> str | None:
    """Encode a value in its form; ``None`` means "no annotation" (a single form without a holder)."""
    if value.form is LockForm.MULTI:
        return encode_multi(max_owners=value.max_owners, entries=value.entries)
    if not value.entries:
        return None
    if len(value.entries) > 1:
        raise LockError("the single lock form holds one entry")
    return encode_entry(value.entries[0])


# -- decisions -----------------------------------------------------------------------------------


def ttl_expired(entry: LockEntry, now_ns: int) -> bool:
    """kured's rule: a lock with ``TTL > 0`` expires once ``now - created >= TTL``; TTL 0 never does."""
    return entry.ttl_ns > 0 and now_ns - entry.created_ns >= entry.ttl_ns


def live(entries: Iterable[LockEntry], now_ns: int) -> tuple[LockEntry, ...]:
    """The entries whose TTL has not expired."""
    return tuple(e for e in entries if not ttl_expired(e, now_ns))


def find(entries: Iterable[LockEntry], node_id: str) -> LockEntry | None:
    """The first entry of ``node_id``, expired or not."""
    return next((e for e in entries if e.node_id == node_id), None)


def plan_acquire(
    entries: tuple[LockEntry, ...], *, new: LockEntry, concurrency: int, now_ns: int
) -> tuple[LockEntry, ...] | None:
    """The holders after ``new`` takes a slot, or ``None`` when all slots are held (canAcquireMultiple).

    ``concurrency`` <= 1 means one slot. Expired entries stay while there is room (their owners may still
    need their ``unschedulable`` memory); when the lock is full the oldest expired entries make room.
    """
    slots = max(concurrency, 1)
    if len(live(entries, now_ns)) >= slots:
        return None
    if slots == 1:
        return (new,)
    kept = list(entries)
    expired = sorted((e for e in kept if ttl_expired(e, now_ns)), key=lambda e: e.created_ns)
    while len(kept) >= slots and expired:
        kept.remove(expired.pop(0))
    return (*kept, new)


def value_for(entries: tuple[LockEntry, ...], *, concurrency: int) -> LockValue:
    """The value pykured writes for ``entries``: single form when ``concurrency`` <= 1 and at most one holder,
    otherwise the multi form with ``maxOwners`` rewritten from our own concurrency (as kured does)."""
    if concurrency <= 1 and len(entries) <= 1:
        return LockValue(LockForm.SINGLE, entries)
    return LockValue(LockForm.MULTI, entries, max(concurrency, len(entries), 1))
