import datetime
import time
import tracemalloc
import zoneinfo

import pytest

from pykured.core.errors import ConfigError
from pykured.policy.recurrence import CalendarWindow, WindowError

UTC = datetime.UTC
BERLIN = zoneinfo.ZoneInfo("Europe/Berlin")


def win(text: str, zone: str = "Europe/Berlin") -> CalendarWindow:
    return CalendarWindow.parse(text, default_zone=zoneinfo.ZoneInfo(zone), default_zone_name=zone)


def z(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text).astimezone(UTC)


SECOND_TUESDAY = "FREQ=MONTHLY;BYDAY=+2TU;BYHOUR=1;BYMINUTE=0;BYSECOND=0;DURATION=4h"


def test_second_tuesday_of_the_month() -> None:
    w = win(SECOND_TUESDAY)
    assert not w.contains(z("2026-03-09T23:59:59+00:00"))
    assert w.contains(z("2026-03-10T00:00:00+00:00"))  # 01:00 CET
    assert w.contains(z("2026-03-10T03:59:59+00:00"))
    assert not w.contains(z("2026-03-10T04:00:00+00:00"))  # 05:00 CET: the end is excluded
    assert not w.contains(z("2026-03-03T02:00:00+00:00"))  # the first Tuesday
    # April 14 is in summer time: 01:00 CEST
    assert w.next_open(z("2026-03-11T00:00:00+00:00")) == z("2026-04-13T23:00:00+00:00")


def test_next_open_is_now_when_open_and_keeps_the_callers_zone() -> None:
    w = win(SECOND_TUESDAY)
    now = datetime.datetime(2026, 3, 10, 2, 0, tzinfo=BERLIN)
    assert w.next_open(now) == now
    later = w.next_open(datetime.datetime(2026, 3, 10, 6, 0, tzinfo=BERLIN))
    assert later is not None and later.tzinfo is BERLIN
    assert later == datetime.datetime(2026, 4, 14, 1, 0, tzinfo=BERLIN)


def test_spring_forward_night_ends_at_the_wall_clock_end() -> None:
    w = win("FREQ=DAILY;BYHOUR=1;DURATION=4h")
    # 2026-03-29: 02:00 CET -> 03:00 CEST. 01:00 CET = 00:00Z; 05:00 CEST = 03:00Z (3 real hours)
    assert w.contains(z("2026-03-29T00:00:00+00:00"))
    assert w.contains(z("2026-03-29T02:59:59+00:00"))
    assert not w.contains(z("2026-03-29T03:00:00+00:00"))


def test_fall_back_night_ends_at_the_wall_clock_end() -> None:
    w = win("FREQ=DAILY;BYHOUR=1;DURATION=4h")
    # 2026-10-25: 03:00 CEST -> 02:00 CET. 01:00 CEST = 23:00Z (24th); 05:00 CET = 04:00Z (5 real hours)
    assert not w.contains(z("2026-10-24T22:59:59+00:00"))
    assert w.contains(z("2026-10-24T23:00:00+00:00"))
    assert w.contains(z("2026-10-25T03:59:59+00:00"))
    assert not w.contains(z("2026-10-25T04:00:00+00:00"))


def test_a_start_in_the_spring_gap_moves_forward_by_the_gap() -> None:
    w = win("FREQ=DAILY;BYHOUR=2;BYMINUTE=30;DURATION=1h")
    # 02:30 does not exist on 2026-03-29: the window is 03:30-04:30 CEST (01:30Z-02:30Z)
    assert not w.contains(z("2026-03-29T01:29:59+00:00"))
    assert w.contains(z("2026-03-29T01:30:00+00:00"))
    assert w.contains(z("2026-03-29T02:29:59+00:00"))
    assert not w.contains(z("2026-03-29T02:30:00+00:00"))
    assert w.next_open(z("2026-03-28T12:00:00+00:00")) == z("2026-03-29T01:30:00+00:00")


def test_an_ambiguous_start_in_the_fold_is_its_first_occurrence() -> None:
    w = win("FREQ=DAILY;BYHOUR=2;BYMINUTE=30;DURATION=1h")
    # 02:30 happens twice on 2026-10-25; the first is 02:30 CEST = 00:30Z, the end 03:30 CET = 02:30Z
    assert w.next_open(z("2026-10-24T12:00:00+00:00")) == z("2026-10-25T00:30:00+00:00")
    assert w.contains(z("2026-10-25T02:29:00+00:00"))
    assert not w.contains(z("2026-10-25T02:30:00+00:00"))


def test_us_weekend_window_across_the_november_change() -> None:
    w = win("FREQ=WEEKLY;BYDAY=SA;BYHOUR=22;DURATION=6h", zone="America/New_York")
    # Sat 2026-10-31 22:00 EDT = Nov 1 02:00Z; ends Sun 04:00 EST = 09:00Z
    assert w.contains(z("2026-11-01T02:00:00+00:00"))
    assert w.contains(z("2026-11-01T08:59:59+00:00"))
    assert not w.contains(z("2026-11-01T09:00:00+00:00"))


def test_last_day_of_the_month_spans_into_the_next_month() -> None:
    w = win("FREQ=MONTHLY;BYMONTHDAY=-1;BYHOUR=22;DURATION=4h", zone="UTC")
    assert w.contains(z("2026-02-28T22:00:00+00:00"))
    assert w.contains(z("2026-03-01T01:59:59+00:00"))
    assert not w.contains(z("2026-03-01T02:00:00+00:00"))
    assert w.next_open(z("2026-03-01T03:00:00+00:00")) == z("2026-03-31T22:00:00+00:00")
    assert w.next_open(z("2028-02-01T03:00:00+00:00")) == z("2028-02-29T22:00:00+00:00")  # leap year


def test_day_31_skips_short_months() -> None:
    w = win("FREQ=MONTHLY;BYMONTHDAY=31;DURATION=1h", zone="UTC")
    assert w.next_open(z("2026-04-01T00:00:00+00:00")) == z("2026-05-31T00:00:00+00:00")


def test_first_weekend_of_each_quarter() -> None:
    w = win("FREQ=MONTHLY;BYMONTH=1,4,7,10;BYDAY=SA;BYSETPOS=1;DURATION=48h")
    assert w.contains(datetime.datetime(2026, 4, 4, 0, 0, tzinfo=BERLIN))
    assert w.contains(datetime.datetime(2026, 4, 5, 23, 59, tzinfo=BERLIN))
    assert not w.contains(datetime.datetime(2026, 4, 6, 0, 0, tzinfo=BERLIN))
    assert not w.contains(datetime.datetime(2026, 5, 2, 12, 0, tzinfo=BERLIN))
    nxt = w.next_open(datetime.datetime(2026, 4, 6, tzinfo=BERLIN))
    assert nxt == datetime.datetime(2026, 7, 4, tzinfo=BERLIN)
    # the October weekend spans the fall-back night (Sat 24 - Mon 26): 49 real hours
    start = datetime.datetime(2026, 10, 3, tzinfo=BERLIN)
    assert w.next_open(datetime.datetime(2026, 9, 1, tzinfo=BERLIN)) == start


def test_given_dates() -> None:
    w = win("RDATE=20261205T010000,20261219T010000;DURATION=3h")
    assert w.contains(datetime.datetime(2026, 12, 5, 3, 59, tzinfo=BERLIN))
    assert not w.contains(datetime.datetime(2026, 12, 12, 2, 0, tzinfo=BERLIN))
    assert w.next_open(datetime.datetime(2026, 12, 6, tzinfo=BERLIN)) == datetime.datetime(
        2026, 12, 19, 1, 0, tzinfo=BERLIN
    )
    assert w.next_open(datetime.datetime(2026, 12, 20, tzinfo=BERLIN)) is None


def test_tzid_overrides_the_default_zone() -> None:
    w = win("FREQ=DAILY;BYHOUR=3;DURATION=1h;TZID=Asia/Tokyo")
    assert w.contains(z("2026-06-01T18:30:00+00:00"))  # 03:30 JST
    assert str(w).endswith("(Asia/Tokyo)")


def test_count_and_until_end_the_rule() -> None:
    w = win("FREQ=DAILY;COUNT=2;DTSTART=20260101T000000;DURATION=1h", zone="UTC")
    assert w.next_open(z("2026-01-01T12:00:00+00:00")) == z("2026-01-02T00:00:00+00:00")
    assert w.next_open(z("2026-01-02T12:00:00+00:00")) is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("FREQ=MONTHLY;BYDAY=2TU", "DURATION is required"),
        ("FREQ=MONTHLY;DURATION=soon", "invalid DURATION"),
        ("FREQ=MONTHLY;DURATION=-1h", "DURATION must be positive"),
        ("FREQ=MINUTELY;DURATION=1h", "FREQ must be one of"),
        ("DURATION=1h", "needs FREQ"),
        ("FREQ=MONTHLY;BYDAY=XX;DURATION=1h", "invalid RRULE"),
        ("FREQ=MONTHLY;BYMONTHDAY=40;DURATION=1h", "invalid RRULE"),
        ("FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30;DURATION=1h", "never occurs"),
        ("FREQ=MONTHLY;BOGUS=1;DURATION=1h", "invalid RRULE"),
        ("FREQ=DAILY;DURATION=1h;TZID=Mars/Olympus", "unknown time zone Mars/Olympus"),
        ("RDATE=2026-12-05;DURATION=1h", "invalid RDATE"),
        ("FREQ=DAILY;DURATION", "invalid part"),
        ("FREQ=DAILY;DURATION=1h;DURATION=2h", "DURATION given twice"),
    ],
)
def test_invalid_windows_are_one_clear_error(text: str, message: str) -> None:
    with pytest.raises(WindowError, match=message) as info:
        win(text)
    assert "\n" not in str(info.value)


def test_naive_now_is_refused() -> None:
    with pytest.raises(ValueError, match="aware"):
        win(SECOND_TUESDAY).contains(datetime.datetime(2026, 3, 10, 1))


# -- bounded cost: caps at parse, expansion from near now ----------------------------------------------------

EVERY_MINUTE = (
    "FREQ=DAILY;BYHOUR=" + ",".join(map(str, range(24))) + ";BYMINUTE=" + ",".join(map(str, range(60)))
    + ";BYSECOND=0;DURATION=30s"
)  # fmt: skip


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (EVERY_MINUTE.replace("BYSECOND=0", "BYSECOND=0,30"), "at most 1440 starts a day"),
        ("FREQ=DAILY;BYMINUTE=" + ",".join(map(str, range(60))) + ";BYSECOND=" + ",".join(map(str, range(60)))
         + ";DURATION=1s", "this rule has 3600"),
        ("FREQ=MONTHLY;DURATION=745h", r"DURATION must be at most 744h \(31 days\)"),
        ("FREQ=DAILY;COUNT=1001;DURATION=1h", "COUNT must be at most 1000"),
        ("FREQ=DAILY;COUNT=2;UNTIL=20270101T000000;DURATION=1h", "UNTIL and COUNT"),
        ("RDATE=" + ",".join(["20260101T000000"] * 1001) + ";DURATION=1h", "at most 1000 RDATE"),
    ],
    ids=["two-a-minute", "every-second", "duration", "count", "until-and-count", "rdates"],
)  # fmt: skip
def test_costly_windows_are_refused_in_one_line(text: str, message: str) -> None:
    with pytest.raises(WindowError, match=message) as info:
        win(text)
    assert "\n" not in str(info.value)


def test_the_caps_admit_their_limits() -> None:
    assert win(EVERY_MINUTE).contains(z("2026-03-10T12:34:10+01:00"))
    assert win("FREQ=MONTHLY;DURATION=744h").duration == datetime.timedelta(days=31)


def test_the_cap_is_a_clear_startup_error() -> None:
    from pykured.config.startup import parse

    with pytest.raises(
        ConfigError, match=r"invalid --maintenance-window .*: at most 1440 starts a day"
    ) as info:
        parse(
            ["--maintenance-window=" + EVERY_MINUTE.replace("BYSECOND=0", "BYSECOND=0,30")],
            {"KURED_NODE_ID": "n"},
        )
    assert info.value.exit_code == 1
    assert "\n" not in str(info.value)


def reference(w: CalendarWindow, now: datetime.datetime) -> tuple[object, object]:
    """open_interval and next_open computed the old way: the whole rule from DTSTART, by dateutil."""
    assert w.rule is not None
    rule = w.rule.rule
    local = now.astimezone(w.zone).replace(tzinfo=None)
    slack = datetime.timedelta(hours=3)
    best = None
    for start in rule.between(local - w.duration - slack, local + slack, inc=True):
        begin, end = w._interval(start)
        if begin <= now < end and (best is None or end > best[1]):
            best = (begin, end)
    after = None
    if best is None:
        for start in rule.between(local - slack, local + datetime.timedelta(days=800), inc=True):
            begin, end = w._interval(start)
            if begin >= now and end > begin:
                after = begin
                break
    else:
        after = now
    return best, after


ANCHORED = [
    SECOND_TUESDAY,
    "FREQ=WEEKLY;INTERVAL=2;BYDAY=SA;BYHOUR=22;BYMINUTE=0;BYSECOND=0;DURATION=30h;DTSTART=20240106T000000",
    "FREQ=WEEKLY;INTERVAL=3;WKST=SU;BYDAY=SU,MO;DURATION=20h;DTSTART=20251228T013000",
    "FREQ=WEEKLY;BYDAY=MO,WE,FR;BYHOUR=1,13;BYMINUTE=0;BYSECOND=0;BYSETPOS=-1;DURATION=3h",
    "FREQ=MONTHLY;INTERVAL=3;BYMONTHDAY=-1;BYHOUR=23;BYMINUTE=0;BYSECOND=0;DURATION=5h",
    "FREQ=MONTHLY;BYMONTH=1,4,7,10;BYDAY=SA;BYSETPOS=1;BYHOUR=0;BYMINUTE=0;BYSECOND=0;DURATION=48h",
    "FREQ=DAILY;INTERVAL=3;BYHOUR=2;BYMINUTE=0,30;BYSECOND=0;DURATION=20m;DTSTART=20260101T020000",
    "FREQ=YEARLY;BYWEEKNO=1,27;BYDAY=MO;BYHOUR=3;BYMINUTE=0;BYSECOND=0;DURATION=4h",
    "FREQ=MONTHLY;DTSTART=20260131T010000;DURATION=2h",
    "FREQ=DAILY;UNTIL=20260601T000000;BYHOUR=4;BYMINUTE=0;BYSECOND=0;DURATION=1h",
]


@pytest.mark.parametrize("text", ANCHORED, ids=[f"rule{i}" for i in range(len(ANCHORED))])
def test_expanding_from_near_now_answers_as_from_dtstart(text: str) -> None:
    w = win(text)
    now = z("2026-01-01T00:00:00+00:00")
    for _ in range(60):  # every 5 days 7 h 13 min over ~11 months, across both DST changes
        open_interval, next_open = reference(w, now)
        assert w.open_interval(now) == open_interval, now
        assert w.next_open(now) == next_open, now
        now += datetime.timedelta(days=5, hours=7, minutes=13)


def test_a_rule_firing_every_minute_stays_cheap() -> None:
    """Measured, not asserted against a clock: the old expansion from DTSTART 2000 with dateutil's cache
    took seconds per question and grew past the agent's memory limit."""
    w = win(EVERY_MINUTE)
    now = z("2026-07-15T10:20:10+00:00")

    def ask(minutes: int) -> None:
        for minute in range(minutes):
            at = now + datetime.timedelta(minutes=minute)
            assert w.contains(at)
            assert not w.contains(at + datetime.timedelta(seconds=30))
            assert w.next_open(at + datetime.timedelta(seconds=30)) == at + datetime.timedelta(seconds=50)

    started = time.perf_counter()
    ask(100)
    elapsed = time.perf_counter() - started
    tracemalloc.start()
    ask(10)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"every-minute rule: {elapsed / 300 * 1000:.2f} ms a question, {peak / 1024:.0f} KiB peak")
    assert peak < 8 * 1024 * 1024  # nothing grows with the questions asked
