"""A Node as pykured sees it: a pure, typed view decoded once from the API's JSON, and RFC 3339 times.

Concept: every component that reads a Node (the cycle, the drainer, the taint helper) reads the same few
facts — unschedulable, boot ID, readiness, labels, annotations, taints, conditions. :class:`NodeView`
decodes them in one place. The reboot cycle's own annotations and its state live in
:mod:`pykured.cycle.state`. No I/O, no clock reads (times are passed in).

Invariants:
* Decoding never raises on a malformed or partial Node: unknown or garbled values read as defaults; a garbled
  or oversized condition list reads as no conditions, with why (:func:`read_conditions`).
* Timestamps are written as kured writes them: Go ``time.RFC3339`` at second precision in UTC
  (``2026-06-30T11:29:16Z``), and read leniently (fractions and offsets accepted).
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping
from typing import Any, Final

from pykured.core.times import parse_rfc3339

PYKURED_PREFIX: Final = "pykured.dev/"
"""The prefix of every annotation pykured writes (the cycle's keys are in :mod:`pykured.cycle.state`)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Taint:
    """One entry of ``spec.taints``; ``raw`` is the JSON as read (for JSON Patch ``test`` ops)."""

    key: str
    effect: str
    value: str = ""
    raw: Mapping[str, Any] = dataclasses.field(default_factory=dict, compare=False)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str_map(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        return {}
    return {str(k): str(v) for k, v in value.items() if isinstance(v, str)}


def _taints(spec: Mapping[str, Any]) -> tuple[Taint, ...]:
    raw = spec.get("taints")
    if not isinstance(raw, list):
        return ()
    out = []
    for item in raw:
        if isinstance(item, dict):
            out.append(
                Taint(
                    key=str(item.get("key", "")),
                    effect=str(item.get("effect", "")),
                    value=str(item.get("value", "") or ""),
                    raw=dict(item),
                )
            )
    return tuple(out)


def _ready(status: Mapping[str, Any]) -> bool:
    conditions = status.get("conditions")
    if not isinstance(conditions, list):
        return False
    return any(
        isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True" for c in conditions
    )


MAX_CONDITIONS: Final = 64
"""A Node carries a dozen conditions (the kubelet's five, a node problem detector's few); a longer list is
not read."""
MAX_CONDITION_TYPE: Final = 316
"""A condition's type is a qualified name (a 253-character prefix, ``/``, 63 characters)."""
MAX_CONDITION_TEXT: Final = 1024
"""A condition's reason and message are cut to this many characters (they are shown, never parsed)."""


@dataclasses.dataclass(frozen=True, slots=True)
class NodeCondition:
    """One entry of ``status.conditions``, as read: ``since`` is its ``lastTransitionTime`` (``None`` when
    missing or not an RFC 3339 time)."""

    type: str
    status: str
    since: datetime.datetime | None = None
    reason: str = ""
    message: str = ""


def read_conditions(status: Mapping[str, Any]) -> tuple[tuple[NodeCondition, ...], str]:  # noqa: PLR0911
    """``status.conditions`` read totally and within bounds: the conditions and ``""``, or ``()`` and why the
    list cannot be read (not a list, longer than :data:`MAX_CONDITIONS`, an entry that is not an object with
    a string type and status, a type too long): a garbled list is read as none at all, never in part."""
    raw = status.get("conditions")
    if raw is None:
        return (), ""
    if not isinstance(raw, list):
        return (), "status.conditions is not a list"
    if len(raw) > MAX_CONDITIONS:
        return (), f"status.conditions has {len(raw)} entries (more than {MAX_CONDITIONS})"
    out = []
    for index, item in enumerate(raw):
        if not isinstance(item, dict):
            return (), f"status.conditions[{index}] is not an object"
        kind, state = item.get("type"), item.get("status")
        if not isinstance(kind, str) or not isinstance(state, str) or not kind:
            return (), f"status.conditions[{index}]: type and status must be strings"
        if len(kind) > MAX_CONDITION_TYPE or len(state) > MAX_CONDITION_TYPE:
            return (), f"status.conditions[{index}]: type or status longer than {MAX_CONDITION_TYPE}"
        stamp, reason, message = item.get("lastTransitionTime"), item.get("reason"), item.get("message")
        out.append(
            NodeCondition(
                type=kind,
                status=state,
                since=parse_rfc3339(stamp) if isinstance(stamp, str) and len(stamp) <= 64 else None,
                reason=reason[:MAX_CONDITION_TEXT] if isinstance(reason, str) else "",
                message=message[:MAX_CONDITION_TEXT] if isinstance(message, str) else "",
            )
        )
    return tuple(out), ""


@dataclasses.dataclass(frozen=True, slots=True)
class NodeView:
    """The facts pykured reads from a Node object."""

    name: str
    uid: str = ""
    resource_version: str = ""
    unschedulable: bool = False
    boot_id: str = ""
    ready: bool = False
    annotations: Mapping[str, str] = dataclasses.field(default_factory=dict)
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    spec: Mapping[str, Any] = dataclasses.field(default_factory=dict, compare=False)
    """``spec`` exactly as read, for JSON Patch ``test`` operations."""
    conditions: tuple[NodeCondition, ...] = dataclasses.field(default=(), compare=False)
    """``status.conditions`` (:func:`read_conditions`: none when the list cannot be read)."""
    conditions_unreadable: str = dataclasses.field(default="", compare=False)
    """Why ``status.conditions`` could not be read ("" when it could)."""

    @classmethod
    def from_obj(cls, obj: Mapping[str, Any]) -> NodeView:
        """Decode a Node dict as returned by the API server (missing parts read as defaults)."""
        meta = _dict(obj.get("metadata"))
        spec = _dict(obj.get("spec"))
        status = _dict(obj.get("status"))
        node_info = _dict(status.get("nodeInfo"))
        conditions, unreadable = read_conditions(status)
        return cls(
            name=str(meta.get("name", "")),
            uid=str(meta.get("uid", "")),
            resource_version=str(meta.get("resourceVersion", "")),
            unschedulable=spec.get("unschedulable") is True,
            boot_id=str(node_info.get("bootID", "") or ""),
            ready=_ready(status),
            annotations=_str_map(meta.get("annotations")),
            labels=_str_map(meta.get("labels")),
            taints=_taints(spec),
            spec=dict(spec),
            conditions=conditions,
            conditions_unreadable=unreadable,
        )

    def has_taint(self, key: str, effect: str) -> bool:
        """Is there a taint with this key and effect?"""
        return any(t.key == key and t.effect == effect for t in self.taints)
