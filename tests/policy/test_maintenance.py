import datetime
import zoneinfo

from pykured.policy.blackout import parse_blackouts
from pykured.policy.maintenance import MaintenancePolicy, always_open
from pykured.policy.recurrence import CalendarWindow
from pykured.policy.weekly import TimeWindow

UTC = datetime.UTC
BERLIN = zoneinfo.ZoneInfo("Europe/Berlin")
KURED_DEFAULT = TimeWindow.parse(("su", "mo", "tu", "we", "th", "fr", "sa"), "0:00", "23:59:59", "UTC")
SECOND_TUESDAY = CalendarWindow.parse(
    "FREQ=MONTHLY;BYDAY=+2TU;BYHOUR=1;DURATION=4h", default_zone=BERLIN, default_zone_name="Europe/Berlin"
)


def at(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime.datetime:
    return datetime.datetime(year, month, day, hour, minute, tzinfo=BERLIN)


def test_without_extensions_it_is_kureds_window() -> None:
    weekend = TimeWindow.parse(("sa", "su"), "1:00", "5:00", "Europe/Berlin")
    policy = MaintenancePolicy.build(weekend)
    assert policy.windows == (weekend,)
    for moment in (at(2026, 3, 7, 2), at(2026, 3, 9, 2), at(2026, 3, 8, 6)):
        assert policy.contains(moment) == weekend.contains(moment)
        assert policy.next_open(moment) == weekend.next_open(moment)


def test_kureds_default_window_steps_aside_for_calendar_windows() -> None:
    assert always_open(KURED_DEFAULT)
    policy = MaintenancePolicy.build(KURED_DEFAULT, [SECOND_TUESDAY])
    assert policy.windows == (SECOND_TUESDAY,)
    assert not policy.contains(at(2026, 3, 9, 2))
    assert policy.contains(at(2026, 3, 10, 2))


def test_any_open_window_allows_a_reboot() -> None:
    sundays = TimeWindow.parse(("su",), "1:00", "5:00", "Europe/Berlin")
    policy = MaintenancePolicy.build(sundays, [SECOND_TUESDAY])
    assert policy.contains(at(2026, 3, 8, 2))  # Sunday
    assert policy.contains(at(2026, 3, 10, 2))  # second Tuesday
    assert not policy.contains(at(2026, 3, 11, 2))
    assert policy.next_open(at(2026, 3, 9, 0)) == at(2026, 3, 10, 1)
    assert policy.next_open(at(2026, 3, 10, 6)) == at(2026, 3, 15, 1)


def test_blackouts_override_every_window_and_next_open_skips_them() -> None:
    blackouts = parse_blackouts(["2026-03-10T00:00/2026-03-10T03:00 release"], zone=BERLIN)
    policy = MaintenancePolicy.build(KURED_DEFAULT, [SECOND_TUESDAY], blackouts)
    assert not policy.contains(at(2026, 3, 10, 2))
    assert policy.blackout(at(2026, 3, 10, 2)).reason == "release"  # type: ignore[union-attr]
    assert policy.contains(at(2026, 3, 10, 3))
    assert policy.next_open(at(2026, 3, 9, 0)) == at(2026, 3, 10, 3)
    # a blackout covering a whole occurrence moves next_open to the following month
    whole = policy.with_blackouts(parse_blackouts(["2026-03-10/2026-03-11"], zone=BERLIN))
    assert whole.next_open(at(2026, 3, 9, 0)) == at(2026, 4, 14, 1)


def test_a_blackout_over_kureds_always_open_window() -> None:
    policy = MaintenancePolicy.build(
        KURED_DEFAULT, (), parse_blackouts(["2026-12-23T16:00/2027-01-02T10:00"], zone=BERLIN)
    )
    assert policy.contains(at(2026, 12, 23, 15, 59))
    assert not policy.contains(at(2026, 12, 23, 16, 0))
    assert policy.next_open(at(2026, 12, 24, 0)) == at(2027, 1, 2, 10, 0)


def test_never_open() -> None:
    nodays = TimeWindow.parse((), "1:00", "5:00", "UTC")
    policy = MaintenancePolicy.build(nodays)
    assert policy.next_open(at(2026, 3, 9, 0)) is None
