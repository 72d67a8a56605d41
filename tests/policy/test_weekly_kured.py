"""Time windows against kured's own ``pkg/timewindow``, compiled into the ``timewindow`` oracle.

Tens of thousands of random windows and instants, dense around the DST changes of zones with unusual rules
(30-minute DST, negative DST, DST at midnight, a skipped calendar day), go to kured's ``TimeWindow.Contains``
(through ``tools/kured-build timewindow``) and to :class:`pykured.policy.weekly.TimeWindow`. The test also
carries a
small model of kured's rule (:func:`kured_model`) and of pykured's (:func:`pykured_model`), which differ in
exactly the two documented choices of ``pykured/policy/weekly.py``:

* **gap**: a boundary inside a spring-forward gap. kured takes Go's ``time.Date`` normalisation, which moves
  it *back* by the gap west of UTC (02:30 on a Los Angeles spring night is 01:30 PST, before the clock ever
  reads 02:30); pykured always moves it forward (03:30 PDT).
* **day**: an overnight window's edge on the other side of midnight. kured adds or subtracts 24 h of elapsed
  time, which on a 25-hour or 23-hour day lands an hour off the wall-clock time; pykured takes the other
  day's wall-clock time.

The checks: kured's model gives the oracle's answer on every case (the model is exact), pykured gives its
model's answer on every case, and every disagreement between pykured and kured is one of the two choices.
The numbers per class are printed (``-s``) and bounded, so a new kind of disagreement cannot hide.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import random
import subprocess
import zoneinfo
from collections.abc import Iterator

import pytest

from pykured.policy.weekly import TimeWindow, parse_time_of_day
from pykured_dev.testenv.reference import artifact

# building the oracle cold takes minutes
pytestmark = [pytest.mark.reference, pytest.mark.timeout(900)]
UTC = datetime.UTC
ZONES = (
    "Europe/Berlin",
    "America/Los_Angeles",
    "Australia/Lord_Howe",  # 30-minute DST
    "Africa/Casablanca",  # negative DST during Ramadan
    "Europe/Dublin",  # negative DST in tzdata's rules
    "America/Sao_Paulo",  # DST at midnight (until 2019)
    "America/Havana",  # DST at midnight
    "America/St_Johns",  # UTC-3:30
    "Pacific/Chatham",  # UTC+12:45 / +13:45
    "Antarctica/Troll",  # 2-hour DST
    "Pacific/Apia",  # skipped 30 December 2011
    "Asia/Tehran",
    "Europe/London",  # UTC+0 in winter
    "UTC",
)
DAY_TOKENS = (
    ("su", "sun", "Sunday", "0"),
    ("mo", "MON", "monday", "1"),
    ("tu", "tue", "TUESDAY", "2"),
    ("we", "Wed", "wednesday", "3"),
    ("th", "thu", "thursday", "+4"),
    ("fr", "fri", "Friday", "05"),
    ("sa", "sat", "saturday", "6"),
)
SEED = 20261130
WINDOWS_PER_ZONE = 220
INSTANTS_PER_WINDOW = 14


@dataclasses.dataclass(frozen=True)
class Spec:
    """A window as kured's flags give it."""

    days: tuple[str, ...]
    start: str
    end: str
    zone: str

    def line(self, instant: datetime.datetime | None) -> str:
        when = "-"
        if instant is not None:
            seconds = (instant - EPOCH) // datetime.timedelta(seconds=1)
            when = f"{seconds}.{instant.microsecond * 1000:09d}"
        return "\t".join(("|".join(self.days), self.start, self.end, self.zone, when))


EPOCH = datetime.datetime(1970, 1, 1, tzinfo=UTC)


# --- the models -------------------------------------------------------------------------------------------


def _offset(zone: datetime.tzinfo, unix: float) -> datetime.timedelta:
    offset = datetime.datetime.fromtimestamp(unix, tz=zone).utcoffset()
    assert offset is not None
    return offset


def go_date(day: datetime.date, moment: datetime.time, zone: datetime.tzinfo) -> datetime.datetime:
    """Go's ``time.Date`` for a wall-clock time: the offset at (wall as UTC − offset at wall as UTC)."""
    wall = datetime.datetime.combine(day, moment, tzinfo=UTC)
    first = _offset(zone, wall.timestamp())
    return wall - _offset(zone, (wall - first).timestamp())


def forward_date(day: datetime.date, moment: datetime.time, zone: datetime.tzinfo) -> datetime.datetime:
    """Go's ``time.Date``, except that a time in a gap is moved forward by the gap."""
    instant = go_date(day, moment, zone)
    if instant.astimezone(zone).replace(tzinfo=None) != datetime.datetime.combine(day, moment):
        instant = datetime.datetime.combine(day, moment, tzinfo=zone).astimezone(UTC)  # fold=0: forward
    return instant


_LAST_NS = datetime.timedelta(microseconds=999_999)


def _model(window: TimeWindow, now: datetime.datetime, *, gap: str, day: str) -> bool:
    zone = window.location
    local = now.astimezone(zone)
    if (local.isoweekday() % 7) not in window.days:
        return False
    date = local.date()
    edge = go_date if gap == "back" else forward_date
    start = edge(date, window.start, zone)
    end = edge(date, window.end, zone) + _LAST_NS
    if window.start > window.end:
        one = datetime.timedelta(days=1)
        if now <= end:  # Go: now.Before(end) with end at .999999999; instants here have microseconds
            start = (
                start - datetime.timedelta(hours=24) if day == "24h" else edge(date - one, window.start, zone)
            )
        else:
            end = (
                end + datetime.timedelta(hours=24)
                if day == "24h"
                else edge(date + one, window.end, zone) + _LAST_NS
            )
    return start <= now <= end


def kured_model(window: TimeWindow, now: datetime.datetime) -> bool:
    """kured 1.23's rule: Go's time.Date for every boundary, overnight edges shifted by 24 h."""
    return _model(window, now, gap="back", day="24h")


def pykured_model(window: TimeWindow, now: datetime.datetime) -> bool:
    """pykured's rule: gaps forward, overnight edges at the other day's wall-clock time."""
    return _model(window, now, gap="forward", day="wall")


def explain(window: TimeWindow, now: datetime.datetime) -> str:
    """Which documented choice makes pykured's answer differ from kured's here."""
    if _model(window, now, gap="forward", day="24h") == kured_model(window, now):
        return "day"
    if _model(window, now, gap="back", day="wall") == kured_model(window, now):
        return "gap"
    return "both"


# --- the cases --------------------------------------------------------------------------------------------


def transitions(zone: zoneinfo.ZoneInfo, first: int = 2008, last: int = 2032) -> list[datetime.datetime]:
    """The UTC instants where ``zone``'s offset changes, found by a daily scan and bisection."""
    found = []
    step = 86_400
    t = datetime.datetime(first, 1, 1, tzinfo=UTC).timestamp()
    stop = datetime.datetime(last, 12, 31, tzinfo=UTC).timestamp()
    before = _offset(zone, t)
    while t < stop:
        after = _offset(zone, t + step)
        if after != before:
            lo, hi = t, t + step
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if _offset(zone, mid) == before else (lo, mid)
            found.append(datetime.datetime.fromtimestamp(hi, tz=UTC))
        before = after
        t += step
    return found


def _format(moment: datetime.time, rng: random.Random) -> str:
    """``moment`` in one of kured's layouts that can express it."""
    h, m, s = moment.hour, moment.minute, moment.second
    layouts = [f"{h}:{m:02d}:{s:02d}", f"{h:02d}:{m:02d}:{s:02d}"]
    if s == 0:
        layouts += [f"{h}:{m:02d}", f"{h:02d}:{m:02d}"]
        h12, ampm = (h % 12 or 12), ("am" if h < 12 else "pm")
        layouts.append(f"{h12:02d}:{m:02d}{ampm}")
        if m == 0:
            layouts += [f"{h}", f"{h12:02d}{ampm}", f"{h12}{ampm}"]
    return rng.choice(layouts)


def _moment_near(local: datetime.datetime, rng: random.Random) -> datetime.time:
    """A time of day near ``local``'s wall clock (inside or at the edge of a gap or fold)."""
    minutes = rng.choice((0, 0, 0, 15, 30, 45, -15, -30, -60, 60, 90, -90, rng.randrange(-180, 180)))
    shifted = (local.replace(tzinfo=None) + datetime.timedelta(minutes=minutes)).time()
    if rng.random() < 0.6:
        shifted = shifted.replace(second=0)
    return shifted.replace(microsecond=0)


def _random_moment(rng: random.Random) -> datetime.time:
    choice = rng.random()
    if choice < 0.3:  # near midnight, where overnight edges move
        base = rng.choice((23 * 60 + rng.randrange(60), rng.randrange(90)))
        return datetime.time(base // 60, base % 60)
    if choice < 0.6:
        return datetime.time(rng.randrange(24), rng.choice((0, 0, 15, 30, 45)))
    return datetime.time(rng.randrange(24), rng.randrange(60), rng.randrange(60))


def _days(rng: random.Random) -> tuple[str, ...]:
    picked = list(range(7)) if rng.random() < 0.35 else rng.sample(range(7), rng.randrange(0, 7))
    return tuple(rng.choice(DAY_TOKENS[n]) for n in picked)


def cases() -> Iterator[tuple[Spec, datetime.datetime]]:
    """Windows whose boundaries sit near each zone's offset changes, and instants around them."""
    rng = random.Random(SEED)
    for name in ZONES:
        zone = zoneinfo.ZoneInfo(name)
        changes = transitions(zone) or [datetime.datetime(2026, 3, 29, 1, tzinfo=UTC)]
        for _ in range(WINDOWS_PER_ZONE):
            change = rng.choice(changes)
            moments = [_random_moment(rng), _random_moment(rng)]
            for i in rng.sample((0, 1), rng.choice((0, 1, 1, 2))):
                side = change + datetime.timedelta(seconds=rng.choice((-1, 0)))
                moments[i] = _moment_near(side.astimezone(zone), rng)
            spec = Spec(_days(rng), _format(moments[0], rng), _format(moments[1], rng), name)
            window = TimeWindow.parse(spec.days, spec.start, spec.end, spec.zone)
            instants = [change + datetime.timedelta(seconds=rng.uniform(-40 * 3600, 40 * 3600))]
            for _ in range(INSTANTS_PER_WINDOW // 2):
                instants.append(change + datetime.timedelta(seconds=rng.uniform(-30 * 3600, 30 * 3600)))
            local_day = change.astimezone(zone).date()
            for moment in (window.start, window.end):
                for delta_days in (-1, 0, 1):
                    day = local_day + datetime.timedelta(days=delta_days)
                    for base in {go_date(day, moment, zone), forward_date(day, moment, zone)}:
                        offset = rng.choice((0, 0, 1, -1, 999_999, 1_000_000, -3_600_000_000, 3_600_000_000))
                        instants.append(base + datetime.timedelta(microseconds=offset))
            for instant in rng.sample(instants, min(len(instants), INSTANTS_PER_WINDOW)):
                yield spec, instant


def oracle(lines: list[str]) -> list[str]:
    done = subprocess.run(
        [str(artifact("timewindow"))],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return done.stdout.splitlines()


@pytest.fixture(scope="module")
def answers() -> list[tuple[Spec, datetime.datetime, bool, TimeWindow]]:
    """(window, instant, kured's answer, pykured's window) for every generated case."""
    generated = list(cases())
    replies = oracle([spec.line(instant) for spec, instant in generated])
    assert len(replies) == len(generated)
    out = []
    windows: dict[Spec, TimeWindow] = {}
    for (spec, instant), reply in zip(generated, replies, strict=True):
        assert reply in ("0", "1"), (spec, reply)
        if spec not in windows:
            windows[spec] = TimeWindow.parse(spec.days, spec.start, spec.end, spec.zone)
        out.append((spec, instant, reply == "1", windows[spec]))
    return out


def test_tens_of_thousands_of_cases(answers: list[tuple[Spec, datetime.datetime, bool, TimeWindow]]) -> None:
    assert len(answers) >= 30_000


def test_kured_model_is_exact(answers: list[tuple[Spec, datetime.datetime, bool, TimeWindow]]) -> None:
    wrong = [(s, i, k) for s, i, k, w in answers if kured_model(w, i) != k]
    assert not wrong, wrong[:10]


def test_pykured_follows_its_model(answers: list[tuple[Spec, datetime.datetime, bool, TimeWindow]]) -> None:
    wrong = [(s, i) for s, i, _, w in answers if w.contains(i) != pykured_model(w, i)]
    assert not wrong, wrong[:10]


def test_every_disagreement_is_a_documented_choice(
    answers: list[tuple[Spec, datetime.datetime, bool, TimeWindow]],
) -> None:
    classes: collections.Counter[str] = collections.Counter()
    examples: dict[str, tuple[Spec, datetime.datetime, bool]] = {}
    for spec, instant, kured, window in answers:
        if window.contains(instant) != kured:
            reason = explain(window, instant)
            if reason == "gap":  # Go moves a gap boundary back only where the zone is west of UTC
                assert (
                    instant.astimezone(window.location).utcoffset() or datetime.timedelta(0)
                ) < datetime.timedelta(0)
            classes[reason] += 1
            examples.setdefault(reason, (spec, instant, kured))
    print(f"\n{len(answers)} cases, disagreements by class: {dict(classes)}; examples: {examples}")
    assert set(classes) <= {"gap", "day"}, examples
    assert sum(classes.values()) < len(answers) // 100


def test_window_strings_and_errors_match() -> None:
    """``Reboot schedule:`` text and time-format acceptance, over kured's layouts and near misses."""
    texts = [
        "0:00", "00:00", "23:59:59", "23:59:60", "24:00", "7", "07", "7pm", "07pm", "12am", "12pm", "13pm",
        "0pm", "00am", "7:5", "7:05", "07:05am", "7:05am", "7:05pm", "19:05pm", "1:02:03", "01:02:03.999",
        "1:2:3", "1:02:3", "10:00:30,5", " 7", "7 ", "+7", "-7", "7PM", "7Pm", "03PM", "3:00 pm", "T10:00",
        "10.00", "1:60", "1:59:60", "", "noon", "99", "9999", "12:00am", "12:30am", "11:59pm", "5:00pm",
        "05:00pm",
    ]  # fmt: skip
    specs = [Spec(("mo", "fr"), t, "23:00", "Europe/Berlin") for t in texts]
    specs += [Spec((), "22:00", t, "") for t in texts]
    specs += [Spec(days, "1", "2", "UTC") for days in (("7",), ("-1",), ("Mo", "xx"), ("",), ("Sun", "SAT"))]
    zones = ("Local", "utc", "Europe", "Europe/", "Europe/Berlin/", "Europe//Berlin", "./UTC", "../x",
             "/etc/localtime", "zone.tab", "posixrules", "Etc/GMT-14", "Mars/Olympus")  # fmt: skip
    specs += [Spec(("su",), "1", "2", zone) for zone in zones]
    replies = oracle([spec.line(None) for spec in specs])
    for spec, reply in zip(specs, replies, strict=True):
        try:
            ours = f"S {TimeWindow.parse(spec.days, spec.start, spec.end, spec.zone)}"
        except ValueError as exc:
            ours = f"E {exc}"
        assert ours == reply, spec


def test_parse_time_of_day_is_kured_s_for_every_minute() -> None:
    """Every minute of the day in the 24-hour layouts parses to itself (the window tests rely on it)."""
    for minute in range(24 * 60):
        h, m = divmod(minute, 60)
        assert parse_time_of_day(f"{h}:{m:02d}") == datetime.time(h, m)
