import datetime
import zoneinfo

import pytest

from pykured.policy.blackout import Blackout, BlackoutError, active_blackout, parse_blackout, parse_blackouts

UTC = datetime.UTC
BERLIN = zoneinfo.ZoneInfo("Europe/Berlin")


def z(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text).astimezone(UTC)


def test_local_interval_with_a_reason() -> None:
    b = parse_blackout("2026-12-23T16:00/2027-01-02T10:00 year-end freeze", zone=BERLIN)
    assert b == Blackout(z("2026-12-23T15:00:00+00:00"), z("2027-01-02T09:00:00+00:00"), "year-end freeze")
    assert b.contains(z("2026-12-23T15:00:00+00:00"))
    assert not b.contains(z("2027-01-02T09:00:00+00:00"))  # the end is excluded


def test_a_date_alone_is_midnight_so_a_one_day_blackout_is_date_to_next_date() -> None:
    b = parse_blackout("2027-03-01/2027-03-02", zone=BERLIN)
    assert b.contains(datetime.datetime(2027, 3, 1, 23, 59, tzinfo=BERLIN))
    assert not b.contains(datetime.datetime(2027, 3, 2, 0, 0, tzinfo=BERLIN))


def test_explicit_offsets_and_z() -> None:
    b = parse_blackout("2027-04-10T08:00+02:00/2027-04-10T20:00Z", zone=BERLIN)
    assert b.start == z("2027-04-10T06:00:00+00:00") and b.end == z("2027-04-10T20:00:00+00:00")


def test_dst_uses_the_wall_clock() -> None:
    # 2026-03-29 in Berlin: 02:30 does not exist and moves forward by the gap (03:30 CEST)
    b = parse_blackout("2026-03-29T02:30/2026-03-29T04:00", zone=BERLIN)
    assert b.start == z("2026-03-29T01:30:00+00:00") and b.end == z("2026-03-29T02:00:00+00:00")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("2026-12-23", "want START/END"),
        ("2026-12-23/", "want START/END"),
        ("23 Dec/2 Jan", "want START/END"),
        ("Dec-23/Jan-02", "is not YYYY-MM-DD"),
        ("2026-13-01/2027-01-01", "is not YYYY-MM-DD"),
        ("20261223/20261224", "is not YYYY-MM-DD"),
        ("2027-01-02/2026-12-23", "the end is not after the start"),
        ("2027-01-02T10:00/2027-01-02T10:00", "the end is not after the start"),
    ],
)
def test_bad_blackouts_are_one_clear_error(text: str, message: str) -> None:
    with pytest.raises(BlackoutError, match=message) as info:
        parse_blackout(text, zone=UTC)
    assert text.strip() in str(info.value) and "\n" not in str(info.value)


def test_lists_skip_comments_and_blank_lines_and_sort() -> None:
    found = parse_blackouts(
        ["# holidays", "", "2027-03-01/2027-03-02 b", "2026-12-23/2026-12-24 a"], zone=UTC
    )
    assert [b.reason for b in found] == ["a", "b"]


def test_active_blackout_is_the_one_ending_last() -> None:
    found = parse_blackouts(["2026-12-20/2026-12-25 short", "2026-12-22/2027-01-02 long"], zone=UTC)
    assert active_blackout(found, z("2026-12-23T00:00:00+00:00")).reason == "long"  # type: ignore[union-attr]
    assert active_blackout(found, z("2027-01-03T00:00:00+00:00")) is None
