"""The maintenance policy: when a reboot may start, from every window and blackout together.

A reboot may start when ANY configured window is open — kured's weekly window (``--reboot-days``,
``--start-time``, ``--end-time``) and each ``--maintenance-window`` — and NO blackout is in force. kured's
window takes part unless it is kured's default (every day, 0:00–23:59:59, i.e. always open) while calendar
windows are configured: then only the calendar windows count, as an operator who wrote "the second Tuesday"
means. Without calendar windows and blackouts this is exactly kured's window.

The object offers the daemon the same ``contains``/``next_open`` as :class:`pykured.policy.weekly.TimeWindow`.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from pykured.policy.blackout import Blackout, active_blackout
from pykured.policy.weekly import TimeWindow

if TYPE_CHECKING:  # RRULE windows: parsed at start-up only where --maintenance-window is given
    from pykured.policy.recurrence import CalendarWindow

_ALL_DAYS = frozenset(range(7))
_MIDNIGHT = datetime.time(0, 0)
_END_OF_DAY = datetime.time(23, 59, 59)
_MAX_HOPS = 1000


class Window(Protocol):
    def contains(self, now: datetime.datetime) -> bool: ...

    def next_open(self, now: datetime.datetime) -> datetime.datetime | None: ...


def always_open(window: TimeWindow) -> bool:
    """kured's default window (every day, the whole day)."""
    return window.days == _ALL_DAYS and window.start == _MIDNIGHT and window.end >= _END_OF_DAY


@dataclasses.dataclass(frozen=True, slots=True)
class MaintenancePolicy:
    """Windows (any open) minus blackouts (none in force)."""

    windows: tuple[Window, ...]
    blackouts: tuple[Blackout, ...] = ()

    @classmethod
    def build(
        cls,
        kured_window: TimeWindow,
        calendar: Sequence[CalendarWindow] = (),
        blackouts: Sequence[Blackout] = (),
    ) -> MaintenancePolicy:
        windows: list[Window] = list(calendar)
        if not calendar or not always_open(kured_window):
            windows.insert(0, kured_window)
        return cls(tuple(windows), tuple(sorted(blackouts)))

    def with_blackouts(self, extra: Sequence[Blackout]) -> MaintenancePolicy:
        """This policy with more blackouts (e.g. the ConfigMap's on top of ``--blackout``)."""
        return dataclasses.replace(self, blackouts=tuple(sorted((*self.blackouts, *extra))))

    def blackout(self, now: datetime.datetime) -> Blackout | None:
        return active_blackout(self.blackouts, now)

    def window_open(self, now: datetime.datetime) -> bool:
        return any(w.contains(now) for w in self.windows)

    def contains(self, now: datetime.datetime) -> bool:
        """Whether a reboot may start at ``now``: some window open and no blackout."""
        return self.window_open(now) and self.blackout(now) is None

    def next_open(self, now: datetime.datetime) -> datetime.datetime | None:
        """The earliest instant ``>= now`` at which :meth:`contains` holds (None: never)."""
        moment = now
        for _ in range(_MAX_HOPS):
            opens = [t for w in self.windows if (t := w.next_open(moment)) is not None]
            if not opens:
                return None
            moment = min(opens)
            blocking = self.blackout(moment)
            if blocking is None:
                return moment.astimezone(now.tzinfo)
            moment = blocking.end
        return None

    def describe(self) -> list[str]:
        """One line per window and blackout (start-up log, --dump-config)."""
        lines = [f"Maintenance window: {w}" for w in self.windows]
        lines += [f"Blackout: {b}" for b in self.blackouts]
        return lines
