"""The reboot time window: weekdays plus a time-of-day range in a time zone (kured ``pkg/timewindow``).

Mirrors kured's ``timewindow.New(days, start, end, location)`` and ``TimeWindow.Contains(now)``:

* **Days** (``--reboot-days``): ``su|sun|sunday`` … ``sa|sat|saturday`` (any case) or ``0``–``6`` (0 = Sunday,
  parsed with Go ``Atoi`` so ``+1`` and ``01`` work); empty elements are skipped, so an empty list means the
  window never opens. Errors: ``invalid weekday: X``, ``invalid weekday, number out of range: X``.
* **Times** (``--start-time``/``--end-time``): Go layouts tried in order ``15:04``, ``15:04:05``, ``03:04pm``,
  ``15``, ``03pm``, ``3pm``. Only lowercase ``am``/``pm``; ``5:00pm`` is rejected, ``05:00pm`` accepted; a
  fractional second after ``15:04:05`` is accepted and ignored, as Go's parser does. Error: ``invalid time
  format: X``.
* **Zone** (``--time-zone``): IANA names via :mod:`zoneinfo`, ``UTC``, ``""`` (= UTC) and ``Local``; anything
  else is ``unknown time zone X``.
* **Containment**: the weekday of *now* (in the zone) must be allowed; the end second is inclusive (end is
  ``HH:MM:SS.999999``); when start is after end the window runs overnight and belongs to both calendar days.

DST. kured builds each boundary with Go's ``time.Date(…, location)`` and compares instants; pykured gives
the same answer as kured everywhere except in two documented cases, which
``tests/policy/test_weekly_kured.py``
checks against kured's own ``pkg/timewindow`` on tens of thousands of windows and instants around the DST
changes of 14 zones (every other disagreement found there was fixed here):

* **A boundary in an autumn fold** (an ambiguous wall-clock time) is the occurrence Go's ``time.Date``
  picks: the later one east of UTC (02:30 on a Berlin autumn night is 02:30 CET), the earlier one west of
  UTC (01:30 on a Los Angeles autumn night is 01:30 PDT). Same as kured.
* **A boundary in a spring-forward gap** is moved forward by the gap (02:30 → 03:30 CEST in Berlin, 02:30 →
  03:30 PDT in Los Angeles). kured does the same east of UTC, but west of UTC Go's normalisation moves it
  *back* (02:30 → 01:30 PST), so kured's window opens an hour before the clock ever reads its start time.
  pykured keeps one rule for every zone: a window never opens before its start time on the wall clock.
  *Differs from kured west of UTC, on spring-forward nights, for boundaries inside the skipped hour.*
* **An overnight window** (start after end) belongs to both calendar days; its edge on the other side of
  midnight is that day's wall-clock time. kured adds or subtracts 24 hours of elapsed time instead, which on a
  25-hour day lands an hour off: a ``22:00``–``00:30`` window closes at 23:30 on an autumn DST night and a
  ``23:30``–``06:00`` window stays shut until 00:30. pykured's window is the one the flags describe on every
  night. *Differs from kured on DST-change days, within the changed hour next to midnight.*
* The end second is inclusive up to its last microsecond (kured: nanosecond), also when deciding which side of
  midnight an instant is on.

:meth:`TimeWindow.next_open` answers "when may the next reboot happen" with the same rules.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import re
import zoneinfo
from collections.abc import Iterable

from pykured.gocompat.goflags import GoValueError, atoi

_DAY_NAMES = {
    name: number
    for number, names in enumerate(
        (
            ("su", "sun", "sunday"),
            ("mo", "mon", "monday"),
            ("tu", "tue", "tuesday"),
            ("we", "wed", "wednesday"),
            ("th", "thu", "thursday"),
            ("fr", "fri", "friday"),
            ("sa", "sat", "saturday"),
        )
    )
    for name in names
}
_ABBREVIATIONS = ("Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat")
_H = r"(?P<h>\d{1,2})"
_HH = r"(?P<h>\d{2})"
_MM = r"(?P<m>\d{2})"
_SS = r"(?P<s>\d{2})(?:[.,]\d+)?"
_AMPM = r"(?P<ampm>am|pm)"
# Go layouts, in kured's order: 15:04, 15:04:05, 03:04pm, 15, 03pm, 3pm.
_LAYOUTS = (
    re.compile(rf"{_H}:{_MM}", re.ASCII),
    re.compile(rf"{_H}:{_MM}:{_SS}", re.ASCII),
    re.compile(rf"{_HH}:{_MM}{_AMPM}", re.ASCII),
    re.compile(_H, re.ASCII),
    re.compile(rf"{_HH}{_AMPM}", re.ASCII),
    re.compile(rf"{_H}{_AMPM}", re.ASCII),
)
_LAST_MICROSECOND = datetime.timedelta(microseconds=999_999)


def parse_weekdays(days: Iterable[str]) -> frozenset[int]:
    """Go weekday numbers (0 = Sunday) for kured's day list; raises :class:`GoValueError`."""
    result: set[int] = set()
    for day in days:
        if not day:
            continue
        try:
            number = atoi(day)
        except GoValueError:
            if day.lower() not in _DAY_NAMES:
                raise GoValueError(f"invalid weekday: {day}") from None
            result.add(_DAY_NAMES[day.lower()])
            continue
        if not 0 <= number < 7:
            raise GoValueError(f"invalid weekday, number out of range: {day}")
        result.add(number)
    return frozenset(result)


def parse_time_of_day(text: str) -> datetime.time:
    """A time of day in one of kured's layouts; raises :class:`GoValueError` ``invalid time format: X``."""
    for layout in _LAYOUTS:
        match = layout.fullmatch(text)
        if match is None:
            continue
        hour = int(match["h"])
        minute = int(match.groupdict().get("m") or 0)
        second = int(match.groupdict().get("s") or 0)
        ampm = match.groupdict().get("ampm")
        if ampm is not None:
            if hour > 12:
                continue
            if ampm == "pm" and hour < 12:
                hour += 12
            elif ampm == "am" and hour == 12:
                hour = 0
        if hour > 23 or minute > 59 or second > 59:
            continue
        return datetime.time(hour, minute, second)
    raise GoValueError(f"invalid time format: {text}")


def load_location(name: str, *, local: datetime.tzinfo | None = None) -> datetime.tzinfo:
    """Go ``time.LoadLocation``: ``""``/``UTC`` → UTC, ``Local`` → ``local`` (UTC if not given), else IANA.

    As Go, a name is a file under the zoneinfo directories (so ``Europe//Berlin`` works too), and the error is
    Go's text: ``time: invalid location name`` for a name containing ``..`` or starting with a slash, the
    file's error (``is a directory``, ``not a directory``, ``malformed time zone information``), else
    ``unknown time zone X``.
    """
    if name in ("", "UTC"):
        return datetime.UTC
    if name == "Local":
        return local if local is not None else datetime.UTC
    if ".." in name or name.startswith(("/", "\\")):
        raise GoValueError("time: invalid location name")
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        pass
    first_error = ""
    for base in zoneinfo.TZPATH:
        try:
            with open(os.path.join(base, name), "rb") as data:
                return zoneinfo.ZoneInfo.from_file(data, key=name)
        except FileNotFoundError:
            continue
        except ValueError:
            first_error = first_error or "malformed time zone information"
        except OSError as exc:
            text = exc.strerror or str(exc)
            first_error = first_error or text[:1].lower() + text[1:]
    raise GoValueError(first_error or f"unknown time zone {name}")


def _offset(instant: datetime.datetime, zone: datetime.tzinfo) -> datetime.timedelta:
    """The UTC offset ``zone`` has at ``instant``."""
    return instant.astimezone(zone).utcoffset() or datetime.timedelta(0)


def _go_weekday(day: datetime.date) -> int:
    return (day.weekday() + 1) % 7


@dataclasses.dataclass(frozen=True, slots=True)
class TimeWindow:
    """Allowed weekdays (Go numbering, 0 = Sunday) and an inclusive time-of-day range in a zone."""

    days: frozenset[int]
    start: datetime.time
    end: datetime.time
    location: datetime.tzinfo
    location_name: str = "UTC"

    @classmethod
    def parse(
        cls, days: Iterable[str], start: str, end: str, tz: str, *, local: datetime.tzinfo | None = None
    ) -> TimeWindow:
        """Build a window from kured's flag values, checked in kured's order: days, zone, start, end."""
        weekdays = parse_weekdays(days)
        location = load_location(tz, local=local)
        return cls(
            days=weekdays,
            start=parse_time_of_day(start),
            end=parse_time_of_day(end),
            location=location,
            location_name=tz or "UTC",
        )

    def _at(self, day: datetime.date, moment: datetime.time) -> datetime.datetime:
        """The instant of wall-clock ``moment`` on ``day`` in the window's zone, in UTC.

        As Go's ``time.Date``: the offset in force at (the wall time read as UTC, minus the offset in force
        then), which settles an ambiguous time as kured does; a time in a gap is moved forward by the gap.
        """
        wall = datetime.datetime.combine(day, moment, tzinfo=datetime.UTC)
        first = _offset(wall, self.location)
        instant = wall - _offset(wall - first, self.location)
        if instant.astimezone(self.location).replace(tzinfo=None) != wall.replace(tzinfo=None):
            instant = datetime.datetime.combine(day, moment, tzinfo=self.location).astimezone(datetime.UTC)
        return instant

    def _bounds(self, local: datetime.datetime) -> tuple[datetime.datetime, datetime.datetime]:
        day = local.date()
        start = self._at(day, self.start)
        end = self._at(day, self.end) + _LAST_MICROSECOND
        if self.start > self.end:
            if local <= end:
                start = self._at(day - datetime.timedelta(days=1), self.start)
            else:
                end = self._at(day + datetime.timedelta(days=1), self.end) + _LAST_MICROSECOND
        return start, end

    def contains(self, now: datetime.datetime) -> bool:
        """Whether reboots are allowed at ``now`` (an aware datetime)."""
        if now.tzinfo is None:
            raise ValueError("TimeWindow.contains needs an aware datetime")
        local = now.astimezone(self.location)
        if _go_weekday(local.date()) not in self.days:
            return False
        start, end = self._bounds(local)
        return start <= now <= end

    def next_open(self, now: datetime.datetime) -> datetime.datetime | None:
        """The earliest instant ``>= now`` inside the window (``now`` itself if open); None if never open."""
        if self.contains(now):
            return now
        if not self.days:
            return None
        today = now.astimezone(self.location).date()
        candidates = []
        for offset in range(9):
            day = today + datetime.timedelta(days=offset)
            for moment in (self.start, datetime.time(0, 0)):
                instant = self._at(day, moment)
                if instant >= now:
                    candidates.append(instant)
        for candidate in sorted(candidates):
            if self.contains(candidate):
                return candidate.astimezone(now.tzinfo)
        return None

    def __str__(self) -> str:
        days = "".join(_ABBREVIATIONS[n] if n in self.days else "---" for n in range(7))
        start = f"{self.start.hour:02d}:{self.start.minute:02d}"
        end = f"{self.end.hour:02d}:{self.end.minute:02d}"
        return f"{days} between {start} and {end} {self.location_name}"
