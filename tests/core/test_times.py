import datetime

import pytest

from pykured.core.times import format_rfc3339, parse_rfc3339
from pykured.policy.blackout import BlackoutError, parse_blackout

UTC = datetime.UTC


def test_go_times_parse_to_utc() -> None:
    moment = parse_rfc3339("2026-06-30T11:29:16.917242595+02:00")
    assert moment == datetime.datetime(2026, 6, 30, 9, 29, 16, 917242, tzinfo=UTC)
    assert format_rfc3339(moment) == "2026-06-30T09:29:16Z"


@pytest.mark.parametrize(
    "text",
    ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", "2026-06-30T11:29:16", "yesterday", ""],
    ids=["before-year-1", "after-year-9999", "no-zone", "words", "empty"],
)
def test_anything_else_is_none_never_an_error(text: str) -> None:
    assert parse_rfc3339(text) is None


def test_a_blackout_beyond_the_calendar_is_invalid_not_an_overflow() -> None:
    zone = datetime.timezone(datetime.timedelta(hours=-12))
    with pytest.raises(BlackoutError, match="is not YYYY-MM-DD"):
        parse_blackout("9999-12-31T20:00/9999-12-31T23:00 end", zone=zone)
