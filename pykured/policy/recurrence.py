"""Calendar maintenance windows: an RFC 5545 recurrence rule plus a duration, in a time zone.

kured's window (``--reboot-days``/``--start-time``/``--end-time``) is weekly; operators ask for "the second
Tuesday of the month, 01:00–05:00" (kured #891), "the first weekend of each quarter" (#614) and given dates
(#452). ``--maintenance-window`` takes one window per value (repeatable)::

    FREQ=MONTHLY;BYDAY=+2TU;BYHOUR=1;BYMINUTE=0;BYSECOND=0;DURATION=4h
    FREQ=MONTHLY;BYMONTH=1,4,7,10;BYDAY=SA;BYSETPOS=1;BYHOUR=0;BYMINUTE=0;BYSECOND=0;DURATION=48h
    RDATE=20261205T010000,20261219T010000;DURATION=3h
    FREQ=WEEKLY;BYDAY=SA;BYHOUR=22;BYMINUTE=0;BYSECOND=0;DURATION=6h;TZID=America/New_York

The parts are an RRULE's (expanded by python-dateutil's :mod:`dateutil.rrule`, never by hand) plus three of
pykured's: ``DURATION`` (required, a Go duration), ``RDATE`` (comma-separated ``YYYYMMDDTHHMMSS`` local start
times, with or without an RRULE) and ``TZID`` (default: ``--time-zone``). ``DTSTART`` is optional (default
2000-01-01 00:00 local); the rule's BYHOUR/BYMINUTE/BYSECOND default to DTSTART's (so midnight). A window
recurs at most daily: ``FREQ`` is ``YEARLY``, ``MONTHLY``, ``WEEKLY`` or ``DAILY``.

Cost is bounded, whatever the rule: a window has at most :data:`MAX_PER_DAY` starts a day (the product of
its BYHOUR, BYMINUTE and BYSECOND counts) and a ``DURATION`` of at most :data:`MAX_DURATION`; a ``COUNT``
is at most :data:`MAX_COUNT` (those starts are expanded once, at parse). Each question (open at ``now``?
next opening?) expands the rule from a start near ``now``, never from DTSTART: the rule's defaults taken
from DTSTART are written out at parse, and the expansion starts at a day of the rule's INTERVAL grid
counted from DTSTART (a week's start for a weekly BYSETPOS), so the answers are DTSTART's. Nothing is
cached between questions.

DST: occurrences are wall-clock times in the zone (01:00 stays 01:00 local across a DST change), and a
window ends at the wall-clock time ``start + DURATION`` (nominal, as RFC 5545 counts days): "01:00 for 4h"
ends at 05:00 local on DST nights too (3 or 5 real hours), "Saturday 00:00 for 48h" ends Monday 00:00. A
wall time in a spring-forward gap is moved forward by the gap; an ambiguous one is its first occurrence
(the same rules as :mod:`pykured.policy.weekly`). Instants are compared in UTC. The start is included, the
end is
not.
"""

from __future__ import annotations

import dataclasses
import datetime
import heapq
import re
import zoneinfo
from collections.abc import Iterator

from dateutil import rrule

from pykured.core.errors import ConfigError
from pykured.gocompat.goflags import GoValueError, parse_duration

_SEARCH_STEP = datetime.timedelta(days=400)
_SEARCH_LIMIT = 12  # ~13 years ahead: "never opens again" beyond that
_SLACK = datetime.timedelta(hours=3)  # DST offsets between wall and real time
_FIRST_SPAN = datetime.timedelta(hours=1)

MAX_PER_DAY = 1440
"""The most starts a window may have in a day (one a minute)."""
MAX_DURATION = datetime.timedelta(days=31)
"""The longest ``DURATION`` (744h)."""
MAX_COUNT = 1000
"""The largest ``COUNT``."""
_WEEKDAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
_DAY_PARTS = ("BYWEEKNO", "BYYEARDAY", "BYMONTHDAY", "BYDAY", "BYEASTER")
_DEFAULT_DTSTART = datetime.datetime(2000, 1, 1)
_OWN_PARTS = ("DURATION", "RDATE", "TZID", "DTSTART")
_FREQUENCIES = ("YEARLY", "MONTHLY", "WEEKLY", "DAILY")
_STAMP = re.compile(r"(\d{4})(\d{2})(\d{2})(?:T(\d{2})(\d{2})(\d{2})?)?Z?$", re.ASCII)


class WindowError(ConfigError, ValueError):
    """An invalid ``--maintenance-window`` value (the message names the problem)."""


def _stamp(text: str, what: str) -> datetime.datetime:
    match = _STAMP.match(text.strip())
    if not match:
        raise WindowError(f"invalid {what} {text!r} (want YYYYMMDDTHHMMSS)")
    y, mo, d, h, mi, s = (int(g) if g else 0 for g in match.groups())
    try:
        return datetime.datetime(y, mo, d, h, mi, s)
    except ValueError as exc:
        raise WindowError(f"invalid {what} {text!r}: {exc}") from None


def _wall(naive: datetime.datetime, zone: datetime.tzinfo) -> datetime.datetime:
    """The UTC instant of a wall-clock time (a gap moves forward by the gap, a fold takes the first)."""
    return naive.replace(tzinfo=zone, fold=0).astimezone(datetime.UTC)


def _split(text: str) -> tuple[dict[str, str], list[str]]:
    """pykured's parts (DURATION, RDATE, TZID, DTSTART) and the RRULE's parts."""
    parts: dict[str, str] = {}
    rule_parts: list[str] = []
    for raw in text.strip().removeprefix("RRULE:").split(";"):
        if not raw.strip():
            continue
        key, sep, value = raw.partition("=")
        key = key.strip().upper()
        if not sep or not value.strip():
            raise WindowError(f"invalid part {raw!r} (want NAME=VALUE)")
        if key not in _OWN_PARTS:
            rule_parts.append(f"{key}={value.strip()}")
        elif key in parts:
            raise WindowError(f"{key} given twice")
        else:
            parts[key] = value.strip()
    return parts, rule_parts


def _duration(text: str) -> datetime.timedelta:
    try:
        ns = parse_duration(text)
    except GoValueError as exc:
        raise WindowError(f"invalid DURATION: {exc}") from None
    if ns <= 0:
        raise WindowError("DURATION must be positive")
    return datetime.timedelta(microseconds=ns // 1000)


def _zone(name: str) -> datetime.tzinfo:
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise WindowError(f"unknown time zone {name}") from None


def _keys(rule_parts: list[str]) -> dict[str, str]:
    return {part.split("=", 1)[0]: part.split("=", 1)[1] for part in rule_parts}


def _explicit(rule_parts: list[str], dtstart: datetime.datetime) -> list[str]:
    """The rule with the parts python-dateutil would take from DTSTART written out (RFC 5545 §3.3.10), so
    the rule means the same from any later start of its expansion."""
    keys = _keys(rule_parts)
    freq = keys.get("FREQ", "").upper()
    out = list(rule_parts)
    for key, value in (("BYHOUR", dtstart.hour), ("BYMINUTE", dtstart.minute), ("BYSECOND", dtstart.second)):
        if key not in keys:
            out.append(f"{key}={value}")
    if not any(key in keys for key in _DAY_PARTS):
        if freq == "YEARLY":
            if "BYMONTH" not in keys:
                out.append(f"BYMONTH={dtstart.month}")
            out.append(f"BYMONTHDAY={dtstart.day}")
        elif freq == "MONTHLY":
            out.append(f"BYMONTHDAY={dtstart.day}")
        elif freq == "WEEKLY":
            out.append(f"BYDAY={_WEEKDAYS[dtstart.weekday()]}")
    return out


def _per_day(rule_parts: list[str]) -> int:
    """How many starts a day the rule can have: BYHOUR × BYMINUTE × BYSECOND (distinct values)."""
    keys = _keys(rule_parts)
    count = 1
    for key in ("BYHOUR", "BYMINUTE", "BYSECOND"):
        count *= len({int(v) for v in keys[key].split(",") if v.strip()} or {0})
    return count


def _rule(rule_parts: list[str], dtstart: datetime.datetime) -> _Grid:
    """The RRULE, expanded by python-dateutil; it must recur at most daily, at most :data:`MAX_PER_DAY`
    times a day, and occur at least once."""
    names = {p.split("=", 1)[0] for p in rule_parts}
    freq = next((p.split("=", 1)[1].upper() for p in rule_parts if p.startswith("FREQ=")), "")
    if freq not in _FREQUENCIES:
        raise WindowError(f"FREQ must be one of {', '.join(_FREQUENCIES)} (got {freq or 'none'})")
    if "UNTIL" in names and "COUNT" in names:
        raise WindowError("invalid RRULE: UNTIL and COUNT together")
    explicit = _explicit(rule_parts, dtstart)
    try:
        parsed = rrule.rrulestr(";".join(explicit), dtstart=dtstart, cache=False)
        per_day = _per_day(explicit)
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        raise WindowError(f"invalid RRULE: {exc or 'bad value'}") from None
    if not isinstance(parsed, rrule.rrule):  # pragma: no cover - rrulestr of one rule is an rrule
        raise WindowError("invalid RRULE")
    if per_day > MAX_PER_DAY:
        raise WindowError(
            f"at most {MAX_PER_DAY} starts a day (one a minute); this rule has {per_day} "
            "(BYHOUR x BYMINUTE x BYSECOND)"
        )
    keys = _keys(explicit)
    if "COUNT" in keys and int(keys["COUNT"]) > MAX_COUNT:
        raise WindowError(f"COUNT must be at most {MAX_COUNT} (got {keys['COUNT']})")
    if parsed.after(dtstart, inc=True) is None:
        raise WindowError("invalid RRULE: it never occurs")
    wkst = keys.get("WKST", "MO").upper()
    return _Grid(
        parsed,
        freq=freq,
        interval=int(keys.get("INTERVAL", "1")),
        wkst=_WEEKDAYS.index(wkst) if wkst in _WEEKDAYS else 0,
        dtstart=dtstart,
        whole_weeks=freq == "WEEKLY" and "BYSETPOS" in keys,
        counted="COUNT" in keys,
    )


def _add_months(day: datetime.date, months: int) -> datetime.date | None:
    index = day.year * 12 + day.month - 1 + months
    year, month = divmod(index, 12)
    return datetime.date(year, month + 1, 1) if year <= datetime.MAXYEAR else None


@dataclasses.dataclass(frozen=True, slots=True)
class _Grid:
    """A parsed rule and its periods (days, weeks, months, years from DTSTART's, every INTERVAL-th one
    counted): where an expansion near a given time starts to give the same occurrences as one from
    DTSTART."""

    rule: rrule.rrule
    freq: str
    interval: int
    wkst: int
    dtstart: datetime.datetime
    whole_weeks: bool
    """A weekly BYSETPOS picks among a whole week's starts: expand from the week's first day."""
    counted: bool
    """A COUNT counts from DTSTART: the starts are expanded once, at parse."""

    def _period(self, day: datetime.date) -> tuple[int, datetime.date]:
        """The index (from DTSTART's period) and the first day of ``day``'s period."""
        origin = self.dtstart.date()
        if self.freq == "DAILY":
            return (day - origin).days, day
        if self.freq == "WEEKLY":
            start = day - datetime.timedelta(days=(day.weekday() - self.wkst) % 7)
            first = origin - datetime.timedelta(days=(origin.weekday() - self.wkst) % 7)
            return (start - first).days // 7, start
        if self.freq == "MONTHLY":
            return (day.year - origin.year) * 12 + day.month - origin.month, day.replace(day=1)
        return day.year - origin.year, day.replace(month=1, day=1)

    def _advance(self, start: datetime.date, periods: int) -> datetime.date | None:
        if self.freq == "DAILY":
            days = periods
        elif self.freq == "WEEKLY":
            days = 7 * periods
        else:
            return _add_months(start, periods * (12 if self.freq == "YEARLY" else 1))
        try:
            return start + datetime.timedelta(days=days)
        except OverflowError:
            return None

    def anchor(self, at: datetime.datetime) -> datetime.datetime | None:
        """Where to start expanding to find every occurrence at or after ``at`` (naive local); None when
        the rule's periods end before the calendar does."""
        if at <= self.dtstart:
            return self.dtstart
        index, first = self._period(at.date())
        behind = index % self.interval
        if behind:
            day = self._advance(first, self.interval - behind)
        else:
            day = first if self.whole_weeks else at.date()
        if day is None:
            return None
        return max(datetime.datetime.combine(day, datetime.time()), self.dtstart)

    def starts(self, after: datetime.datetime, before: datetime.datetime) -> Iterator[datetime.datetime]:
        """The occurrences in [after, before], expanded from near ``after`` (nothing kept)."""
        anchor = self.anchor(after)
        if anchor is None:
            return
        for start in self.rule.replace(dtstart=anchor, cache=False):
            if start > before:
                return
            if start >= after:
                yield start


@dataclasses.dataclass(frozen=True, slots=True)
class CalendarWindow:
    """One recurring maintenance window. Build it with :meth:`parse`."""

    text: str
    rule: _Grid | None
    """The rule (with its DTSTART defaults written out), or None when it is only RDATEs (or a COUNT)."""
    dates: tuple[datetime.datetime, ...]
    """Extra naive local start times (RDATE)."""
    duration: datetime.timedelta
    zone: datetime.tzinfo
    zone_name: str

    @classmethod
    def parse(cls, text: str, *, default_zone: datetime.tzinfo, default_zone_name: str) -> CalendarWindow:
        """Parse one ``--maintenance-window`` value; raises :class:`WindowError`."""
        parts, rule_parts = _split(text)
        if "DURATION" not in parts:
            raise WindowError("DURATION is required (e.g. DURATION=4h)")
        zone, zone_name = default_zone, default_zone_name
        if "TZID" in parts:
            zone_name = parts["TZID"]
            zone = _zone(zone_name)
        dtstart = _stamp(parts["DTSTART"], "DTSTART") if "DTSTART" in parts else _DEFAULT_DTSTART
        dates = tuple(_stamp(d, "RDATE") for d in parts["RDATE"].split(",")) if "RDATE" in parts else ()
        if len(dates) > MAX_COUNT:
            raise WindowError(f"at most {MAX_COUNT} RDATE values (got {len(dates)})")
        rule = _rule(rule_parts, dtstart) if rule_parts else None
        if rule is None and not dates:
            raise WindowError("needs FREQ=… (a recurrence rule) or RDATE=…")
        if rule is not None and rule.counted:  # at most MAX_COUNT starts, expanded once
            dates, rule = tuple(sorted({*dates, *rule.rule})), None
        duration = _duration(parts["DURATION"])
        if duration > MAX_DURATION:
            raise WindowError(
                f"DURATION must be at most {MAX_DURATION.days * 24}h ({MAX_DURATION.days} days)"
            )
        return cls(text=text, rule=rule, dates=dates, duration=duration, zone=zone, zone_name=zone_name)

    # -- occurrences ----------------------------------------------------------------------------------------

    def _starts(self, after: datetime.datetime, before: datetime.datetime) -> Iterator[datetime.datetime]:
        """Naive local start times within [after, before] (inclusive), in order, expanded from near
        ``after``."""
        dates = (d for d in self.dates if after <= d <= before)
        rule = self.rule.starts(after, before) if self.rule is not None else iter(())
        return heapq.merge(dates, rule)

    def _interval(self, start: datetime.datetime) -> tuple[datetime.datetime, datetime.datetime]:
        begin = _wall(start, self.zone)
        shown = begin.astimezone(self.zone).replace(tzinfo=None)  # a start in a gap, moved past it
        return begin, _wall(shown + self.duration, self.zone)

    def _local(self, now: datetime.datetime) -> datetime.datetime:
        if now.tzinfo is None:
            raise ValueError("CalendarWindow needs an aware datetime")
        return now.astimezone(self.zone).replace(tzinfo=None)

    def open_interval(self, now: datetime.datetime) -> tuple[datetime.datetime, datetime.datetime] | None:
        """The occurrence containing ``now`` (start, end in UTC; the latest-ending one), or None.

        Starts are looked for in a span before ``now`` that doubles (an hour, two, four …) until it holds
        one begun by ``now`` or covers ``DURATION``: a dense rule costs an hour's starts, a sparse one a few
        cheap expansions."""
        local = self._local(now)
        reach = self.duration + _SLACK
        span = min(_FIRST_SPAN, reach)
        while True:
            begun, best = False, None
            for start in self._starts(local - span, local + _SLACK):
                begin, end = self._interval(start)
                if begin <= now:
                    begun = True
                    if now < end and (best is None or end > best[1]):
                        best = (begin, end)
            if begun or span >= reach:
                return best
            span = min(span * 2, reach)

    def contains(self, now: datetime.datetime) -> bool:
        """Whether the window is open at ``now`` (an aware datetime)."""
        return self.open_interval(now) is not None

    def next_open(self, now: datetime.datetime) -> datetime.datetime | None:
        """The earliest instant ``>= now`` in the window (``now`` if open); None if it never opens again
        within ~13 years."""
        if self.contains(now):
            return now
        local = self._local(now) - _SLACK
        for start in self._starts(local, local + _SEARCH_STEP * _SEARCH_LIMIT):
            begin, end = self._interval(start)
            if begin >= now and end > begin:
                return begin.astimezone(now.tzinfo)
        return None

    def __str__(self) -> str:
        return f"{self.text} ({self.zone_name})"
