"""A Node as pykured sees it: a pure, typed view decoded once from the API's JSON, and RFC 3339 times.

Concept: every component that reads a Node (the cycle, the drainer, the taint helper) reads the same few
facts — unschedulable, boot ID, readiness, labels, annotations, taints. :class:`NodeView` decodes them in one
place. The reboot cycle's own annotations and its state live in :mod:`pykured.cycle.state`. Standard
library only, no I/O, no clock reads (times are passed in).

Invariants:
* Decoding never raises on a malformed or partial Node: unknown or garbled values read as defaults.
* Timestamps are written as kured writes them: Go ``time.RFC3339`` at second precision in UTC
  (``2026-06-30T11:29:16Z``), and read leniently (fractions and offsets accepted).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Final

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

    @classmethod
    def from_obj(cls, obj: Mapping[str, Any]) -> NodeView:
        """Decode a Node dict as returned by the API server (missing parts read as defaults)."""
        meta = _dict(obj.get("metadata"))
        spec = _dict(obj.get("spec"))
        status = _dict(obj.get("status"))
        node_info = _dict(status.get("nodeInfo"))
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
        )

    def has_taint(self, key: str, effect: str) -> bool:
        """Is there a taint with this key and effect?"""
        return any(t.key == key and t.effect == effect for t in self.taints)
