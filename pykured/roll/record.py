"""The roll's own record on each Node: ``pykured.dev/roll``, the node's last reboot and since when it waits.

The order of a roll (:mod:`pykured.roll.order`) needs two facts per node: its last reboot and when it began
to need its pending reboot. The agent writes them on its Node in this record, in the same merge patch as its
status (:mod:`pykured.status.publisher`, only when the text changes), so the roll never reads the display
record. Compact JSON, absent facts omitted::

    {"lastReboot":"2026-11-30T21:40:00Z","waitingSince":"2026-11-30T23:10:00Z"}

Agents that predate this record wrote the two facts only in their status (``pykured.dev/status``:
``lastReboot``, ``waitingSince``); :func:`read` falls back to those fields on a Node without a readable roll
record, so a fleet in the middle of an upgrade still orders correctly. Pure: no I/O; every value read is
bounded before it is decoded (:mod:`pykured.core.boundedjson`) and parsed totally (unreadable = absent).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
from collections.abc import Mapping
from typing import Any

from pykured.core import boundedjson
from pykured.core.times import format_rfc3339, parse_rfc3339
from pykured.kube.node import PYKURED_PREFIX
from pykured.roll.order import Member

ROLL_ANNOTATION = PYKURED_PREFIX + "roll"
LEGACY_ANNOTATION = PYKURED_PREFIX + "status"
"""The agent's status, whose ``lastReboot``/``waitingSince`` older agents wrote instead of the roll record."""


@dataclasses.dataclass(frozen=True, slots=True)
class Place:
    """One node's facts for the roll's order."""

    last_reboot: datetime.datetime | None = None
    """The node's last reboot (None: its agent never saw one)."""
    waiting_since: datetime.datetime | None = None
    """When the node began to need its pending reboot (None: it needs none)."""

    def member(self, node: str) -> Member:
        return Member(node, last_reboot=self.last_reboot, waiting_since=self.waiting_since)


def encode(place: Place) -> str:
    """The annotation value."""
    data = {}
    if place.last_reboot is not None:
        data["lastReboot"] = format_rfc3339(place.last_reboot)
    if place.waiting_since is not None:
        data["waitingSince"] = format_rfc3339(place.waiting_since)
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def _time(data: Mapping[str, Any], key: str) -> datetime.datetime | None:
    value = data.get(key)
    return parse_rfc3339(value) if isinstance(value, str) else None


def decode(text: str | None) -> Place | None:
    """A roll record (or an older agent's status, which carries the same two fields); ``None`` when absent or
    unreadable (never raises)."""
    if not text:
        return None
    try:
        data = boundedjson.loads(text)
    except boundedjson.UnreadableJSON:
        return None
    if not isinstance(data, dict):
        return None
    return Place(last_reboot=_time(data, "lastReboot"), waiting_since=_time(data, "waitingSince"))


def read(annotations: Mapping[str, str]) -> Place | None:
    """The node's place: its roll record, else the fields of its agent's status (an agent that predates the
    roll record); ``None`` when the Node carries neither."""
    own = decode(annotations.get(ROLL_ANNOTATION))
    return own if own is not None else decode(annotations.get(LEGACY_ANNOTATION))
