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
import re
import zoneinfo

from dateutil import rrule

from pykured.core.errors import ConfigError
from pykured.gocompat.goflags import GoValueError, parse_duration

_SEARCH_STEP = datetime.timedelta(days=400)
_SEARCH_LIMIT = 12  # ~13 years ahead: "never opens again" beyond that
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


def _rule(rule_parts: list[str], dtstart: datetime.datetime) -> rrule.rrule:
    """The RRULE, expanded by python-dateutil; it must recur at most daily and occur at least once."""
    freq = next((p.split("=", 1)[1].upper() for p in rule_parts if p.startswith("FREQ=")), "")
    if freq not in _FREQUENCIES:
        raise WindowError(f"FREQ must be one of {', '.join(_FREQUENCIES)} (got {freq or 'none'})")
    try:
        parsed = rrule.rrulestr(";".join(rule_parts), dtstart=dtstart, cache=True)
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        raise WindowError(f"invalid RRULE: {exc or 'bad value'}") from None
    if not isinstance(parsed, rrule.rrule):  # pragma: no cover - rrulestr of one rule is an rrule
        raise WindowError("invalid RRULE")
    if parsed.after(dtstart, inc=True) is None:
        raise WindowError("invalid RRULE: it never occurs")
    return parsed


@dataclasses.dataclass(frozen=True, slots=True)
class CalendarWindow:
    """One recurring maintenance window. Build it with :meth:`parse`."""

    text: str
    rule: rrule.rrule | None
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
        rule = _rule(rule_parts, dtstart) if rule_parts else None
        if rule is None and not dates:
            raise WindowError("needs FREQ=… (a recurrence rule) or RDATE=…")
        return cls(
            text=text,
            rule=rule,
            dates=dates,
            duration=_duration(parts["DURATION"]),
            zone=zone,
            zone_name=zone_name,
        )

    # -- occurrences ----------------------------------------------------------------------------------------

    def _starts(self, after: datetime.datetime, before: datetime.datetime) -> list[datetime.datetime]:
        """Naive local start times within [after, before] (naive local bounds, inclusive)."""
        found = [d for d in self.dates if after <= d <= before]
        if self.rule is not None:
            found.extend(self.rule.between(after, before, inc=True))
        return sorted(found)

    def _interval(self, start: datetime.datetime) -> tuple[datetime.datetime, datetime.datetime]:
        begin = _wall(start, self.zone)
        shown = begin.astimezone(self.zone).replace(tzinfo=None)  # a start in a gap, moved past it
        return begin, _wall(shown + self.duration, self.zone)

    def _local(self, now: datetime.datetime) -> datetime.datetime:
        if now.tzinfo is None:
            raise ValueError("CalendarWindow needs an aware datetime")
        return now.astimezone(self.zone).replace(tzinfo=None)

    def open_interval(self, now: datetime.datetime) -> tuple[datetime.datetime, datetime.datetime] | None:
        """The occurrence containing ``now`` (start, end in UTC; the latest-ending one), or None."""
        local = self._local(now)
        slack = datetime.timedelta(hours=3)  # DST offsets between wall and real time
        best = None
        for start in self._starts(local - self.duration - slack, local + slack):
            begin, end = self._interval(start)
            if begin <= now < end and (best is None or end > best[1]):
                best = (begin, end)
        return best

    def contains(self, now: datetime.datetime) -> bool:
        """Whether the window is open at ``now`` (an aware datetime)."""
        return self.open_interval(now) is not None

    def next_open(self, now: datetime.datetime) -> datetime.datetime | None:
        """The earliest instant ``>= now`` in the window (``now`` if open); None if it never opens again."""
        if self.contains(now):
            return now
        local = self._local(now) - datetime.timedelta(hours=3)
        for _ in range(_SEARCH_LIMIT):
            for start in self._starts(local, local + _SEARCH_STEP):
                begin, end = self._interval(start)
                if begin >= now and end > begin:
                    return begin.astimezone(now.tzinfo)
            local += _SEARCH_STEP
        return None

    def __str__(self) -> str:
        return f"{self.text} ({self.zone_name})"
