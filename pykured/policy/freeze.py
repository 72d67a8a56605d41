"""The cluster-wide freeze switch: who stopped new reboots, when, why, and until when.

``pykured freeze --reason INC-123 [--until TIME]`` writes a :class:`FreezeRecord` as JSON under the
``freeze`` key of the policy ConfigMap; ``pykured unfreeze`` removes the key. Agents watch the ConfigMap
and, while a record is active, block every NEW reboot like a blocker (``Reboot blocked: frozen by …``). A
node already holding the lock and past the gates finishes its cycle. ``by`` is the user name the API
server reports for the caller (SelfSubjectReview). A record whose ``until`` has passed is inactive.

A halt (:mod:`pykured.policy.halt`) is the same record under the policy ConfigMap's own ``halt`` key, set by
an agent when a node did not come back from its reboot in time (or drains kept failing, or a canary failed):
it names that node in ``halted`` (and the reboot's start in ``began``) and lasts until ``pykured unfreeze``.

Fail safe: a freeze record that cannot be read (not JSON, too large or deep, wrong types) is not "no freeze"
but :meth:`FreezeRecord.unreadable`, a freeze that is always active and says why: someone meant to stop
reboots, and a garbled record must never let them start. ``pykured freeze`` or ``pykured unfreeze``
rewrites it. Decoding is bounded (:mod:`pykured.core.boundedjson`) and total (only :class:`FreezeError`).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
from typing import Any

from pykured.core import boundedjson
from pykured.core.errors import ConfigError
from pykured.core.times import parse_rfc3339
from pykured.gocompat.goflags import GoValueError, parse_duration


class FreezeError(ConfigError, ValueError):
    """A freeze record that does not parse."""


def _parse_time(value: Any, what: str) -> datetime.datetime:
    if not isinstance(value, str):
        raise FreezeError(f"freeze record: {what} must be an RFC 3339 time string")
    moment = parse_rfc3339(value)
    if moment is None:
        raise FreezeError(f"freeze record: invalid {what} {value!r} (RFC 3339 with a zone, e.g. Z)")
    return moment


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def _rfc3339(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclasses.dataclass(frozen=True, slots=True)
class FreezeRecord:
    """A freeze: set ``at`` by ``by`` for ``reason``, in force until ``until`` (None: until unfrozen)."""

    reason: str
    by: str
    at: datetime.datetime
    until: datetime.datetime | None = None
    halted: str = ""
    """For a halt: the node that did not come back ("" for an operator's freeze)."""
    began: str = ""
    """For a halt of a node that did not come back: its reboot's start as the node recorded it
    (``pykured.dev/reboot-triggered-at``), which ``pykured unfreeze`` remembers as lifted."""
    unreadable: str = ""
    """Why the stored record could not be read ("" for a record that was): such a freeze is always active."""

    @classmethod
    def garbled(cls, why: str) -> FreezeRecord:
        """The fail-safe freeze that stands for a record that cannot be read (``why``: what is wrong)."""
        return cls(reason="", by="", at=_EPOCH, unreadable=why)

    def active(self, now: datetime.datetime) -> bool:
        return bool(self.unreadable) or self.until is None or now < self.until

    def to_json(self) -> str:
        if self.unreadable:
            return json.dumps({"unreadable": self.unreadable}, sort_keys=True)
        data: dict[str, str] = {"reason": self.reason, "by": self.by, "at": _rfc3339(self.at)}
        if self.until is not None:
            data["until"] = _rfc3339(self.until)
        if self.halted:
            data["halted"] = self.halted
        if self.began:
            data["began"] = self.began
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> FreezeRecord:
        """Decode a stored record; :class:`FreezeError` (only) when it is not one."""
        try:
            data = boundedjson.loads(text)
        except boundedjson.UnreadableJSON as exc:
            raise FreezeError(f"freeze record is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise FreezeError("freeze record is not a JSON object")
        reason, by = data.get("reason", ""), data.get("by", "")
        if not isinstance(reason, str) or not isinstance(by, str):
            raise FreezeError("freeze record: reason and by must be strings")
        until = data.get("until")
        halted, began = data.get("halted", ""), data.get("began", "")
        return cls(
            reason=reason,
            by=by,
            at=_parse_time(data.get("at"), "at"),
            until=None if until in (None, "") else _parse_time(until, "until"),
            halted=halted if isinstance(halted, str) else "",
            began=began if isinstance(began, str) else "",
        )

    def describe(self) -> str:
        """One line: ``frozen by alice at 2026-…Z until 2026-…Z: INC-123`` (``halted by …`` for a halt)."""
        if self.unreadable:
            return f"frozen: the freeze record cannot be read ({self.unreadable}); it holds until rewritten"
        verb = "halted" if self.halted else "frozen"
        until = f" until {_rfc3339(self.until)}" if self.until else ""
        why = f": {self.reason}" if self.reason else ""
        return f"{verb} by {self.by or 'unknown'} at {_rfc3339(self.at)}{until}{why}"


def parse_until(text: str, *, now: datetime.datetime, zone: datetime.tzinfo) -> datetime.datetime:
    """``--until``: an RFC 3339/ISO time (local in ``zone`` without an offset) or a Go-style ``+2h``.

    Raises :class:`FreezeError`; the time must be in the future.
    """
    stripped = text.strip()
    if stripped.startswith("+"):
        try:
            ns = parse_duration(stripped[1:])
        except GoValueError as exc:
            raise FreezeError(f"invalid --until {text!r}: {exc}") from None
        moment = now + datetime.timedelta(microseconds=ns // 1000)
    else:
        try:
            moment = datetime.datetime.fromisoformat(stripped)
        except ValueError:
            raise FreezeError(f"invalid --until {text!r}: want an ISO time or +DURATION (e.g. +4h)") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=zone)
    if moment <= now:
        raise FreezeError(f"invalid --until {text!r}: it is not in the future")
    return moment.astimezone(datetime.UTC)
