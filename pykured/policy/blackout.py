"""Blackouts: dated intervals in which no reboot starts, whatever the windows say (kured #963).

A blackout is ``START/END`` (an ISO 8601 interval) optionally followed by a reason::

    2026-12-23T16:00/2027-01-02T10:00 year-end freeze
    2027-03-01/2027-03-02
    2027-04-10T08:00+02:00/2027-04-10T20:00+02:00 launch

Each end is ``YYYY-MM-DD``, ``YYYY-MM-DDTHH:MM`` or ``YYYY-MM-DDTHH:MM:SS``, local time in the blackout's
zone (``--time-zone``) unless it carries ``Z`` or an offset. A date alone means midnight at its start, so
``2027-03-01/2027-03-02`` is all of 1 March. The start is included, the end is not; the end must be after
the start. Wall times follow :mod:`pykured.policy.weekly`'s DST rules (a gap moves forward, a fold takes the
first).

Blackouts come from ``--blackout`` (repeatable) and from the ``blackouts`` key of the policy ConfigMap (one
per line, ``#`` starts a comment line); see :mod:`pykured.policy.document`.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable

from pykured.core.errors import ConfigError


class BlackoutError(ConfigError, ValueError):
    """A blackout that does not parse (the message quotes it)."""


@dataclasses.dataclass(frozen=True, slots=True, order=True)
class Blackout:
    """One blackout interval, ``start <= t < end`` (aware datetimes in UTC)."""

    start: datetime.datetime
    end: datetime.datetime
    reason: str = ""

    def contains(self, now: datetime.datetime) -> bool:
        return self.start <= now < self.end

    def __str__(self) -> str:
        text = f"{self.start.isoformat()}/{self.end.isoformat()}"
        return f"{text} {self.reason}" if self.reason else text


def _moment(text: str, zone: datetime.tzinfo, whole: str) -> datetime.datetime:
    try:
        parsed = datetime.datetime.fromisoformat(text)
        if len(text) < 10 or text[4] != "-":
            raise ValueError(text)
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=zone, fold=0)
        return parsed.astimezone(datetime.UTC)
    except (ValueError, OverflowError):  # not a time, or one whose offset leaves the years 1-9999
        what = f"{text[:40]!r} is not YYYY-MM-DD[THH:MM[:SS]]"
        raise BlackoutError(f"invalid blackout {whole[:100]!r}: {what}") from None


def parse_blackout(text: str, *, zone: datetime.tzinfo) -> Blackout:
    """One ``START/END [reason]``; raises :class:`BlackoutError`."""
    whole = text.strip()
    interval, _, reason = whole.partition(" ")
    start_text, sep, end_text = interval.partition("/")
    if not sep or not start_text or not end_text:
        raise BlackoutError(
            f"invalid blackout {whole[:100]!r}: want START/END, e.g. 2026-12-23T16:00/2027-01-02T10:00"
        )
    start = _moment(start_text, zone, whole)
    end = _moment(end_text, zone, whole)
    if end <= start:
        raise BlackoutError(f"invalid blackout {whole[:100]!r}: the end is not after the start")
    return Blackout(start, end, reason.strip())


def parse_blackouts(lines: Iterable[str], *, zone: datetime.tzinfo) -> tuple[Blackout, ...]:
    """Several blackouts, one per item; empty items and ``#`` comment lines are skipped."""
    out = [
        parse_blackout(line, zone=zone) for line in lines if line.strip() and not line.strip().startswith("#")
    ]
    return tuple(sorted(out))


def active_blackout(blackouts: Iterable[Blackout], now: datetime.datetime) -> Blackout | None:
    """The blackout in force at ``now`` (the one ending last), or None."""
    current = [b for b in blackouts if b.contains(now)]
    return max(current, key=lambda b: b.end, default=None)
