import datetime

import pytest

from pykured.policy.freeze import FreezeError, FreezeRecord, parse_until

UTC = datetime.UTC
NOW = datetime.datetime(2026, 11, 30, 21, 0, tzinfo=UTC)


def test_round_trip_and_describe() -> None:
    record = FreezeRecord("INC-123", "alice", NOW, NOW + datetime.timedelta(hours=2))
    text = record.to_json()
    assert '"at": "2026-11-30T21:00:00Z"' in text
    assert FreezeRecord.from_json(text) == record
    assert record.describe() == "frozen by alice at 2026-11-30T21:00:00Z until 2026-11-30T23:00:00Z: INC-123"


def test_active_until() -> None:
    open_ended = FreezeRecord("x", "bob", NOW)
    assert open_ended.active(NOW + datetime.timedelta(days=365))
    timed = FreezeRecord("x", "bob", NOW, NOW + datetime.timedelta(hours=1))
    assert timed.active(NOW + datetime.timedelta(minutes=59))
    assert not timed.active(NOW + datetime.timedelta(hours=1))


@pytest.mark.parametrize(
    "text",
    [
        "nope",
        "[]",
        '{"at": 5}',
        '{"at": "2026-11-30T21:00:00"}',
        '{"at": "x"}',
        '{"reason": 1, "at": "2026-11-30T21:00:00Z"}',
    ],
)
def test_bad_records(text: str) -> None:
    with pytest.raises(FreezeError):
        FreezeRecord.from_json(text)


def test_until() -> None:
    assert parse_until("+90m", now=NOW, zone=UTC) == NOW + datetime.timedelta(minutes=90)
    assert parse_until("2026-12-01T06:00+01:00", now=NOW, zone=UTC) == datetime.datetime(
        2026, 12, 1, 5, tzinfo=UTC
    )
    assert parse_until("2026-12-01T06:00", now=NOW, zone=UTC) == datetime.datetime(2026, 12, 1, 6, tzinfo=UTC)
    for bad in ("+soon", "tomorrow", "2026-11-30T20:00Z", "+0s"):
        with pytest.raises(FreezeError):
            parse_until(bad, now=NOW, zone=UTC)
