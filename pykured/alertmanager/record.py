"""``pykured.dev/silence``: the record on the Node of the node's reboot silence in Alertmanager.

The value is compact JSON: ``{"id":"<silence id>","until":"<RFC 3339>"}`` while the silence belongs to a
running cycle; ``"expireDue":"<RFC 3339>"`` is added when its cycle freed the slot (or ended) and the expiry
failed: from then on the silence is a leftover, retried until it is expired or ends by itself at ``until``
(:mod:`pykured.alertmanager.silence`; :func:`leftover`). The record is parsed whole and bounded
(:func:`parse_record`): a bad one is absent, with one log line; it is changed only if it is still the value
read (:func:`record_patch`).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
from collections.abc import Mapping
from typing import Any

from pykured.alertmanager.api import SILENCE_ID
from pykured.core import boundedjson
from pykured.core.times import format_rfc3339, parse_rfc3339
from pykured.cycle.state import NodeState

logger = logging.getLogger(__name__)

SILENCE_ANNOTATION = "pykured.dev/silence"
MAX_RECORD = 256
_POINTER = "/metadata/annotations/" + SILENCE_ANNOTATION.replace("~", "~0").replace("/", "~1")


@dataclasses.dataclass(frozen=True, slots=True)
class SilenceRecord:
    """``pykured.dev/silence``: the silence's id in Alertmanager and when it ends by itself."""

    ident: str
    until: datetime.datetime
    due: datetime.datetime | None = None
    """Since when the silence should be gone (its slot freed, or its cycle ended) while its expiry failed;
    ``None``: it belongs to a running cycle."""

    def to_json(self) -> str:
        value = {"id": self.ident, "until": format_rfc3339(self.until)}
        if self.due is not None:
            value["expireDue"] = format_rfc3339(self.due)
        return json.dumps(value, separators=(",", ":"))

    def overdue(self, at: datetime.datetime) -> SilenceRecord:
        """The record of a silence whose expiry failed at ``at`` (the first failure's moment is kept)."""
        return self if self.due is not None else dataclasses.replace(self, due=at.replace(microsecond=0))


def parse_record(text: object, *, log: bool = True) -> SilenceRecord | None:
    """The record from the annotation's value; ``None`` (and, with ``log``, one log line) when it is not
    one."""
    if text is None:
        return None
    try:
        value = boundedjson.loads(text, max_chars=MAX_RECORD, max_depth=2)
    except boundedjson.UnreadableJSON as exc:
        if log:
            logger.warning("Ignoring annotation %s: %s", SILENCE_ANNOTATION, exc)
        return None
    fields = value if isinstance(value, dict) else {}
    ident = fields.get("id")
    until = _time(fields.get("until"))
    due = _time(fields["expireDue"]) if "expireDue" in fields else None
    bad_due = "expireDue" in fields and due is None
    if not isinstance(ident, str) or SILENCE_ID.fullmatch(ident) is None or until is None or bad_due:
        if log:
            logger.warning("Ignoring annotation %s: not a silence record", SILENCE_ANNOTATION)
        return None
    return SilenceRecord(ident, until, due)


def _time(value: object) -> datetime.datetime | None:
    return parse_rfc3339(value) if isinstance(value, str) else None


def record_text(obj: Mapping[str, Any]) -> str | None:
    """The annotation's raw value on a Node object (``None`` when it has none)."""
    metadata = obj.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    value = annotations.get(SILENCE_ANNOTATION) if isinstance(annotations, dict) else None
    return value if isinstance(value, str) else None


def record_of(obj: Mapping[str, Any]) -> SilenceRecord | None:
    """The record on a Node object (``None`` when it has none, or a bad one)."""
    return parse_record(record_text(obj))


def leftover(view: NodeState) -> SilenceRecord | None:
    """The record of a silence that outlived its cycle: marked ``expireDue``, or on a Node that runs no cycle
    (the record of a running cycle is not one)."""
    record = parse_record(view.annotations.get(SILENCE_ANNOTATION), log=False)
    if record is None or (record.due is None and view.has_memory):
        return None
    return record


def record_patch(text: str | None, value: str | None) -> list[dict[str, Any]]:
    """A JSON patch that sets (``value``) or removes (``None``) the record if it is still ``text``."""
    if text is None:
        return [{"op": "add", "path": _POINTER, "value": value}]
    test = {"op": "test", "path": _POINTER, "value": text}
    if value is None:
        return [test, {"op": "remove", "path": _POINTER}]
    return [test, {"op": "replace", "path": _POINTER, "value": value}]
