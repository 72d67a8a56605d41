"""Time windows: kured's days_test/timewindow_test tables as parity tests, DST cases and properties."""

from __future__ import annotations

import datetime
import zoneinfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pykured.gocompat.goflags import GoValueError
from pykured.policy.weekly import TimeWindow, load_location, parse_time_of_day, parse_weekdays

UTC = datetime.UTC
LA = zoneinfo.ZoneInfo("America/Los_Angeles")
BERLIN = zoneinfo.ZoneInfo("Europe/Berlin")
ALL_DAYS = ["su", "mo", "tu", "we", "th", "fr", "sa"]


def at(text: str, zone: datetime.tzinfo) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text).replace(tzinfo=zone)


@pytest.mark.parametrize(
    ("days", "expected"),
    [
        (["0", "4", "5"], {0, 4, 5}),
        (["+1", "01", "6"], {1, 6}),
        (["su", "mo", "tu", "we", "th", "fr", "sa"], set(range(7))),
        (["sun", "mon", "tue", "wed", "thu", "fri", "sat"], set(range(7))),
        (["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"], set(range(7))),
        (["SUN", "Mon", "tUeSdAy", "WE"], {0, 1, 2, 3}),
        (["mo", "mon", "monday", "1"], {1}),
        ([], set()),
        ([""], set()),
        (["", "", "", ""], set()),
        (["", "fr", ""], {5}),
    ],
    ids=["numbers", "signed-and-padded-numbers", "two-letter", "three-letter", "full-names", "mixed-case",
         "duplicates", "empty-list", "empty-string", "commas-only", "empty-elements-skipped"],
)  # fmt: skip
def test_parse_weekdays(days: list[str], expected: set[int]) -> None:
    assert parse_weekdays(days) == expected


@pytest.mark.parametrize(
    ("day", "message"),
    [
        ("15", "invalid weekday, number out of range: 15"),
        ("-8", "invalid weekday, number out of range: -8"),
        ("8", "invalid weekday, number out of range: 8"),
        ("7", "invalid weekday, number out of range: 7"),
        ("fridayyyy", "invalid weekday: fridayyyy"),
        ("m", "invalid weekday: m"),
        (" mo", "invalid weekday:  mo"),
    ],
    ids=["15", "-8", "8", "7", "fridayyyy", "single-letter", "leading-space"],
)
def test_parse_weekdays_errors(day: str, message: str) -> None:
    with pytest.raises(GoValueError) as err:
        parse_weekdays(["mo", day])
    assert str(err.value) == message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0:00", (0, 0, 0)),
        ("9:05", (9, 5, 0)),
        ("22:00", (22, 0, 0)),
        ("23:59:59", (23, 59, 59)),
        ("23:59:59.5", (23, 59, 59)),
        ("22", (22, 0, 0)),
        ("7", (7, 0, 0)),
        ("10am", (10, 0, 0)),
        ("9pm", (21, 0, 0)),
        ("11:30am", (11, 30, 0)),
        ("09:30am", (9, 30, 0)),
        ("05:00pm", (17, 0, 0)),
        ("00:01am", (0, 1, 0)),
        ("12am", (0, 0, 0)),
        ("12pm", (12, 0, 0)),
        ("00pm", (12, 0, 0)),
        ("03pm", (15, 0, 0)),
    ],
    ids=lambda v: str(v),
)
def test_parse_time_of_day_go_layouts(text: str, expected: tuple[int, int, int]) -> None:
    assert parse_time_of_day(text) == datetime.time(*expected)


@pytest.mark.parametrize(
    "text",
    ["5:00pm", "9:30am", "10 AM", "10AM", "10Am", "24:00", "23:60", "9:5", "13pm", "13:00pm", "", " 9:00",
     "9:00 ", "123", "9:00:00pm", "23:59:59.", "noon", "٩:٠٠"],
    ids=repr,
)  # fmt: skip
def test_parse_time_of_day_rejects(text: str) -> None:
    with pytest.raises(GoValueError) as err:
        parse_time_of_day(text)
    assert str(err.value) == f"invalid time format: {text}"


@pytest.mark.parametrize(
    ("name", "expected"),
    [("UTC", UTC), ("", UTC), ("Europe/Berlin", BERLIN), ("Local", UTC)],
    ids=["utc", "empty", "iana", "local-defaults-to-utc"],
)
def test_load_location(name: str, expected: datetime.tzinfo) -> None:
    assert load_location(name) == expected


def test_load_location_local_uses_the_given_zone() -> None:
    assert load_location("Local", local=BERLIN) is BERLIN


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("Mars/Olympus", "unknown time zone Mars/Olympus"),
        ("utc", "unknown time zone utc"),
        ("../etc/passwd", "time: invalid location name"),
        ("/etc/localtime", "time: invalid location name"),
        ("Europe/", "is a directory"),
        ("Europe", "is a directory"),
        ("Europe/Berlin/", "not a directory"),
        ("zone.tab", "malformed time zone information"),
    ],
    ids=str,
)  # Go's texts, checked against kured's pkg/timewindow in test_window_kured.py
def test_load_location_errors(name: str, message: str) -> None:
    with pytest.raises(GoValueError) as err:
        load_location(name)
    assert str(err.value) == message


def test_load_location_reads_the_zone_file_like_go() -> None:
    assert str(TimeWindow.parse(["su"], "1", "2", "Europe//Berlin")).endswith("Europe//Berlin")
    assert TimeWindow.parse(["su"], "1", "2", "./UTC").contains(
        datetime.datetime(2026, 11, 29, 1, 30, tzinfo=UTC)
    )


def test_parse_checks_days_then_zone_then_start_then_end() -> None:
    with pytest.raises(GoValueError, match="invalid weekday: x"):
        TimeWindow.parse(["x"], "bad", "bad", "Mars/Olympus")
    with pytest.raises(GoValueError, match="unknown time zone"):
        TimeWindow.parse(["mo"], "bad", "bad", "Mars/Olympus")
    with pytest.raises(GoValueError, match="invalid time format: start"):
        TimeWindow.parse(["mo"], "start", "end", "UTC")
    with pytest.raises(GoValueError, match="invalid time format: end"):
        TimeWindow.parse(["mo"], "9:00", "end", "UTC")


# kured pkg/timewindow/timewindow_test.go, re-created from its behaviour: schedules with
# boundary cases. 2026-01-05 is a Monday.
WINDOW_CASES = [
    (["mo", "tu", "we", "th", "fr"], "9am", "5pm", "America/Los_Angeles", [
        ("2026-01-05 08:59:59", False), ("2026-01-05 09:00:00", True), ("2026-01-05 12:00:00", True),
        ("2026-01-05 17:00:00", True), ("2026-01-05 17:00:00.999999", True), ("2026-01-05 17:00:01", False),
        ("2026-01-09 16:59:00", True), ("2026-01-10 12:00:00", False), ("2026-01-11 12:00:00", False),
    ]),
    (ALL_DAYS, "10:01", "11:30am", "UTC", [
        ("2026-01-06 10:00:59", False), ("2026-01-06 10:01:00", True), ("2026-01-06 11:30:00", True),
        ("2026-01-06 11:30:00.999999", True), ("2026-01-06 11:30:01", False),
    ]),
    (ALL_DAYS, "00:00", "23:59:59", "UTC", [
        ("2026-01-06 00:00:00", True), ("2026-01-06 12:00:00", True), ("2026-01-06 23:59:59.999999", True),
    ]),
    (ALL_DAYS, "9pm", "5am", "UTC", [
        ("2026-01-06 20:59:59", False), ("2026-01-06 21:00:00", True), ("2026-01-06 23:59:59", True),
        ("2026-01-07 00:00:00", True), ("2026-01-07 05:00:00", True), ("2026-01-07 05:00:01", False),
        ("2026-01-07 12:00:00", False),
    ]),
    (["mo", "tu", "we", "fr"], "11:59pm", "00:01am", "America/Los_Angeles", [
        ("2026-01-07 23:58:59", False), ("2026-01-07 23:59:00", True), ("2026-01-08 00:00:00", False),
        ("2026-01-08 23:59:00", False), ("2026-01-09 00:00:00", True), ("2026-01-09 00:01:00", True),
        ("2026-01-09 00:01:01", False), ("2026-01-09 23:59:30", True),
    ]),
    (["mo", "tu", "we", "fr"], "11:59pm", "00:01am", "UTC", [
        ("2026-01-08 23:59:00", False), ("2026-01-09 00:00:00", True), ("2026-01-05 00:00:30", True),
        ("2026-01-04 23:59:30", False),
    ]),
    (["fr"], "11:59pm", "00:01am", "UTC", [
        ("2026-01-08 23:59:59", False), ("2026-01-09 00:00:00", True), ("2026-01-09 23:59:00", True),
        ("2026-01-10 00:00:00", False),
    ]),
    (ALL_DAYS, "10:00", "10:00", "UTC", [
        ("2026-01-06 09:59:59.999999", False), ("2026-01-06 10:00:00", True),
        ("2026-01-06 10:00:00.999999", True), ("2026-01-06 10:00:01", False),
    ]),
    ([], "0:00", "23:59:59", "UTC", [("2026-01-06 12:00:00", False)]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("days", "start", "end", "zone", "checks"),
    WINDOW_CASES,
    ids=["weekdays-9-5-LA", "10:01-11:30am", "whole-day", "overnight-9pm-5am", "around-midnight-LA",
         "around-midnight-UTC", "friday-only-midnight", "one-second", "no-days"],
)  # fmt: skip
def test_contains_parity(
    days: list[str], start: str, end: str, zone: str, checks: list[tuple[str, bool]]
) -> None:
    window = TimeWindow.parse(days, start, end, zone)
    tz = load_location(zone)
    for moment, expected in checks:
        assert window.contains(at(moment, tz)) is expected, moment
        assert window.contains(at(moment, tz).astimezone(UTC)) is expected, moment


def test_contains_needs_an_aware_datetime() -> None:
    with pytest.raises(ValueError, match="aware"):
        TimeWindow.parse(ALL_DAYS, "0:00", "23:59:59", "UTC").contains(datetime.datetime(2026, 1, 1))


@pytest.mark.parametrize(
    ("days", "start", "end", "zone", "text"),
    [
        (["mo", "tu", "we", "th"], "8:00", "18:00", "Europe/Berlin",
         "---MonTueWedThu------ between 08:00 and 18:00 Europe/Berlin"),
        (ALL_DAYS, "0:00", "23:59:59", "UTC", "SunMonTueWedThuFriSat between 00:00 and 23:59 UTC"),
        ([], "9pm", "5am", "Local", "--------------------- between 21:00 and 05:00 Local"),
        (["sa"], "10:30:15", "11", "", "------------------Sat between 10:30 and 11:00 UTC"),
    ],
    ids=["berlin", "default", "never-local", "empty-zone"],
)  # fmt: skip
def test_str_is_kureds_log_form(days: list[str], start: str, end: str, zone: str, text: str) -> None:
    assert str(TimeWindow.parse(days, start, end, zone)) == text


# DST: 2026-03-29 Europe/Berlin springs forward 02:00 CET → 03:00 CEST; 2026-10-25 falls back 03:00 → 02:00.
# America/Los_Angeles: 2026-03-08 02:00 PST → 03:00 PDT; 2026-11-01 02:00 PDT → 01:00 PST.
DST_CASES = [
    ("berlin-gap-start-moves-forward", ALL_DAYS, "02:30", "04:00", "Europe/Berlin", [
        ("2026-03-29T01:15:00+00:00", False),  # 03:15 CEST: 02:30 does not exist, Go and pykured use 03:30
        ("2026-03-29T01:30:00+00:00", True),  # 03:30 CEST
        ("2026-03-29T02:00:00+00:00", True),  # 04:00 CEST
        ("2026-03-29T02:00:01+00:00", False),
        ("2026-03-30T00:30:00+00:00", True),  # next day 02:30 CEST exists again
    ]),
    ("berlin-gap-end-moves-forward", ALL_DAYS, "01:00", "02:30", "Europe/Berlin", [
        ("2026-03-29T00:00:00+00:00", True),  # 01:00 CET
        ("2026-03-29T01:10:00+00:00", True),  # 03:10 CEST, before the normalised end 03:30 CEST
        ("2026-03-29T01:31:00+00:00", False),
    ]),
    ("berlin-fold-as-go-time-date", ALL_DAYS, "02:00", "02:30", "Europe/Berlin", [
        ("2026-10-25T00:15:00+00:00", False),  # 02:15 CEST: Go's time.Date takes the later 02:00 east of UTC
        ("2026-10-25T01:15:00+00:00", True),  # 02:15 CET, second occurrence
    ]),
    ("la-fold-as-go-time-date", ALL_DAYS, "01:00", "01:30", "America/Los_Angeles", [
        ("2026-11-01T08:15:00+00:00", True),  # 01:15 PDT: the earlier occurrence west of UTC
        ("2026-11-01T09:15:00+00:00", False),  # 01:15 PST, second occurrence
    ]),
    ("berlin-overnight-spring", ALL_DAYS, "22:00", "06:00", "Europe/Berlin", [
        ("2026-03-28T20:59:59+00:00", False),  # 21:59:59 CET
        ("2026-03-28T21:00:00+00:00", True),  # 22:00 CET
        ("2026-03-29T03:59:00+00:00", True),  # 05:59 CEST
        ("2026-03-29T04:00:01+00:00", False),  # 06:00:01 CEST
        ("2026-03-29T19:59:59+00:00", False),  # 21:59:59 CEST
        ("2026-03-29T20:00:00+00:00", True),  # 22:00 CEST
    ]),
    ("la-overnight-autumn", ALL_DAYS, "22:00", "06:00", "America/Los_Angeles", [
        ("2026-11-01T04:59:59+00:00", False),  # 21:59:59 PDT Saturday
        ("2026-11-01T05:00:00+00:00", True),  # 22:00 PDT
        ("2026-11-01T13:59:00+00:00", True),  # 05:59 PST
        ("2026-11-01T14:00:01+00:00", False),  # 06:00:01 PST
    ]),
    ("la-weekday-of-now-across-dst", ["su"], "01:00", "03:00", "America/Los_Angeles", [
        ("2026-03-08T09:30:00+00:00", True),  # 01:30 PST Sunday
        ("2026-03-08T10:00:00+00:00", True),  # 03:00 PDT, one real hour later than 02:00 would have been
        ("2026-03-08T10:00:01+00:00", False),  # 03:00:01 PDT
    ]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("days", "start", "end", "zone", "checks"),
    [case[1:] for case in DST_CASES],
    ids=[case[0] for case in DST_CASES],
)
def test_contains_across_dst(
    days: list[str], start: str, end: str, zone: str, checks: list[tuple[str, bool]]
) -> None:
    window = TimeWindow.parse(days, start, end, zone)
    for moment, expected in checks:
        assert window.contains(datetime.datetime.fromisoformat(moment)) is expected, moment


NEXT_OPEN_CASES = [
    ("open-now-is-now", ALL_DAYS, "0:00", "23:59:59", "UTC",
     "2026-01-06T12:00:00+00:00", "2026-01-06T12:00:00+00:00"),
    ("later-today", ALL_DAYS, "22:00", "23:00", "UTC",
     "2026-01-06T12:00:00+00:00", "2026-01-06T22:00:00+00:00"),
    ("friday-evening-to-monday", ["mo", "tu", "we", "th", "fr"], "9am", "5pm", "America/Los_Angeles",
     "2026-01-10T02:00:00+00:00", "2026-01-12T17:00:00+00:00"),
    ("opens-at-midnight-of-allowed-day", ["fr"], "11:59pm", "00:01am", "UTC",
     "2026-01-08T12:00:00+00:00", "2026-01-09T00:00:00+00:00"),
    ("gap-start-normalised", ALL_DAYS, "02:30", "04:00", "Europe/Berlin",
     "2026-03-29T00:00:00+00:00", "2026-03-29T01:30:00+00:00"),
    ("overnight-on-dst-night", ALL_DAYS, "22:00", "06:00", "Europe/Berlin",
     "2026-10-24T12:00:00+00:00", "2026-10-24T20:00:00+00:00"),
    ("just-after-close", ALL_DAYS, "10:00", "10:00", "UTC",
     "2026-01-06T10:00:01+00:00", "2026-01-07T10:00:00+00:00"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("days", "start", "end", "zone", "now", "expected"),
    [case[1:] for case in NEXT_OPEN_CASES],
    ids=[case[0] for case in NEXT_OPEN_CASES],
)
def test_next_open(days: list[str], start: str, end: str, zone: str, now: str, expected: str) -> None:
    window = TimeWindow.parse(days, start, end, zone)
    result = window.next_open(datetime.datetime.fromisoformat(now))
    assert result == datetime.datetime.fromisoformat(expected)
    assert result is not None
    assert window.contains(result)


def test_next_open_never_for_empty_days() -> None:
    assert TimeWindow.parse([], "0:00", "23:59:59", "UTC").next_open(at("2026-01-06 12:00", UTC)) is None


def test_next_open_keeps_the_callers_zone() -> None:
    window = TimeWindow.parse(ALL_DAYS, "22:00", "23:00", "UTC")
    result = window.next_open(at("2026-01-06 12:00", BERLIN))
    assert result is not None
    assert result.tzinfo is BERLIN
    assert result == at("2026-01-06 23:00", BERLIN)


ZONES = ["UTC", "Europe/Berlin", "America/Los_Angeles", "Australia/Lord_Howe", "Asia/Kolkata",
         "America/Sao_Paulo", "Pacific/Apia", "America/Havana"]  # fmt: skip
times = st.times().map(lambda t: t.replace(microsecond=0))
instants = st.datetimes(
    min_value=datetime.datetime(2010, 1, 1),
    max_value=datetime.datetime(2030, 12, 31),
    timezones=st.just(UTC),
)


@settings(max_examples=300, deadline=None)
@given(
    days=st.sets(st.integers(min_value=0, max_value=6), min_size=1),
    start=times,
    end=times,
    zone=st.sampled_from(ZONES),
    now=instants,
)
def test_next_open_is_open_and_locally_earliest(
    days: set[int], start: datetime.time, end: datetime.time, zone: str, now: datetime.datetime
) -> None:
    window = TimeWindow.parse(
        [str(d) for d in days], start.strftime("%H:%M:%S"), end.strftime("%H:%M:%S"), zone
    )
    result = window.next_open(now)
    assert result is not None
    assert result >= now
    assert window.contains(result)
    assert result - now < datetime.timedelta(days=8)
    if result > now:
        assert not window.contains(result - datetime.timedelta(microseconds=1))
    if window.contains(now):
        assert result == now
