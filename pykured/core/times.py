"""Times as kured writes them: Go's ``time.RFC3339`` in UTC, and the one RFC 3339 parser pykured has.

Every timestamp pykured reads (its annotations, the freeze record, hook stamps, a Node's conditions) goes
through :func:`parse_rfc3339`: ``Z`` or an offset, an optional fraction of up to nine digits (Go writes
nanoseconds); a time without a zone is invalid, never guessed, and so is one whose offset puts it outside the
years 1-9999 (``0001-01-01T00:00:00+01:00``). Total: ``None`` for anything that is not such a time.
Pure, standard library only.
"""

from __future__ import annotations

import datetime


def format_rfc3339(moment: datetime.datetime) -> str:
    """Go ``time.RFC3339`` at second precision in UTC: ``2026-06-30T11:29:16Z`` (naive = UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(text: str) -> datetime.datetime | None:
    """Parse RFC 3339 (``Z`` or offset, optional fraction) to an aware UTC time; ``None`` if invalid."""
    value = text.strip()
    if len(value) < 20 or value[10] not in "Tt":
        return None
    if value[-1] in "Zz":
        value = value[:-1] + "+00:00"
    if "." in value:  # fromisoformat takes at most 6 fractional digits; Go writes up to 9
        head, _, rest = value.partition(".")
        count = len(rest) - len(rest.lstrip("0123456789"))
        digits = rest[:count]
        value = f"{head}.{digits[:6].ljust(6, '0')}{rest[len(digits) :]}"
    try:
        moment = datetime.datetime.fromisoformat(value)
        if moment.tzinfo is None:
            return None
        return moment.astimezone(datetime.UTC)
    except (ValueError, OverflowError):  # not a time; or one whose offset puts it outside years 1-9999
        return None
