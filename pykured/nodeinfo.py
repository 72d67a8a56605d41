"""A Node as pykured sees it: a pure, typed view decoded once from the API's JSON, and the annotation keys.

Concept: every component that reads a Node (daemon, drainer, taint helper, node book) reads the same few
facts — unschedulable, boot ID, readiness, labels, annotations, taints — and pykured's own memory kept in
``pykured.dev/*`` annotations. :class:`NodeView` decodes them in one place; :func:`state_patch` builds the
merge patch that writes that memory. Standard library only, no I/O, no clock reads (times are passed in).

Invariants:
* Decoding never raises on a malformed or partial Node: unknown or garbled values read as ``None``/defaults,
  so a hand-edited annotation cannot crash the daemon (it is logged by the caller instead).
* Timestamps are written as kured writes them: Go ``time.RFC3339`` at second precision in UTC
  (``2026-06-30T11:29:16Z``), and read leniently (fractions and offsets accepted).
* ``state_patch`` only names the keys it is told to change: ``KEEP`` leaves a key alone, ``None`` removes it.

kured mirrored: the ``weave.works/kured-reboot-in-progress`` and
``weave.works/kured-most-recent-reboot-needed`` annotations (kured.md §4). kured keeps "was the node
unschedulable before I cordoned it" only in the lock entry; pykured also writes it on the Node
(``pykured.dev/unschedulable-before``) so losing the lock does not lose it.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
from collections.abc import Mapping
from typing import Any

IN_PROGRESS_ANNOTATION = "weave.works/kured-reboot-in-progress"
MOST_RECENT_REBOOT_NEEDED_ANNOTATION = "weave.works/kured-most-recent-reboot-needed"

PYKURED_PREFIX = "pykured.dev/"
UNSCHEDULABLE_BEFORE_ANNOTATION = PYKURED_PREFIX + "unschedulable-before"
REBOOT_BOOT_ID_ANNOTATION = PYKURED_PREFIX + "reboot-boot-id"
REBOOT_TRIGGERED_AT_ANNOTATION = PYKURED_PREFIX + "reboot-triggered-at"
RELEASE_AFTER_ANNOTATION = PYKURED_PREFIX + "release-after"
REBOOT_ATTEMPTS_ANNOTATION = PYKURED_PREFIX + "reboot-attempts"

FLEETLOCK_ID_ANNOTATION = PYKURED_PREFIX + "fleetlock-id"
"""On a Node while FleetLock runs its cycle: the Zincati id that asked; the daemon keeps off it."""

STATE_ANNOTATIONS = (
    UNSCHEDULABLE_BEFORE_ANNOTATION,
    REBOOT_BOOT_ID_ANNOTATION,
    REBOOT_TRIGGERED_AT_ANNOTATION,
    RELEASE_AFTER_ANNOTATION,
    REBOOT_ATTEMPTS_ANNOTATION,
)
"""Every ``pykured.dev/*`` state annotation, in a stable order."""


class Keep(enum.Enum):
    """Marker for "leave this annotation as it is" in :func:`state_patch`."""

    KEEP = "keep"


KEEP = Keep.KEEP


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
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return moment.astimezone(datetime.UTC)


def _bool_annotation(text: str | None) -> bool | None:
    if text is None:
        return None
    lowered = text.strip().lower()
    if lowered == "true":
        return True
    if lowered == "false":
        return False
    return None


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

    # -- kured's annotations ---------------------------------------------------------------------------------

    @property
    def in_progress(self) -> bool:
        """Does the node carry ``weave.works/kured-reboot-in-progress`` (any value)?"""
        return IN_PROGRESS_ANNOTATION in self.annotations

    @property
    def most_recent_reboot_needed(self) -> datetime.datetime | None:
        """``weave.works/kured-most-recent-reboot-needed`` as a time, if present and valid."""
        text = self.annotations.get(MOST_RECENT_REBOOT_NEEDED_ANNOTATION)
        return parse_rfc3339(text) if text is not None else None

    # -- pykured's memory ------------------------------------------------------------------------------------

    @property
    def unschedulable_before(self) -> bool | None:
        """Was the node unschedulable before pykured cordoned it? ``None`` when not recorded."""
        return _bool_annotation(self.annotations.get(UNSCHEDULABLE_BEFORE_ANNOTATION))

    @property
    def reboot_boot_id(self) -> str | None:
        """The boot ID recorded when the reboot was triggered (a different current one proves the reboot)."""
        value = self.annotations.get(REBOOT_BOOT_ID_ANNOTATION)
        return value or None

    @property
    def reboot_triggered_at(self) -> datetime.datetime | None:
        """When pykured triggered the reboot."""
        text = self.annotations.get(REBOOT_TRIGGERED_AT_ANNOTATION)
        return parse_rfc3339(text) if text is not None else None

    @property
    def release_after(self) -> datetime.datetime | None:
        """When the lock may be released (``--lock-release-delay`` that survives a pod restart)."""
        text = self.annotations.get(RELEASE_AFTER_ANNOTATION)
        return parse_rfc3339(text) if text is not None else None

    @property
    def reboot_attempts(self) -> int:
        """How many reboots pykured triggered for the current need (0 when absent or garbled)."""
        text = self.annotations.get(REBOOT_ATTEMPTS_ANNOTATION, "")
        try:
            return max(0, int(text.strip()))
        except ValueError:
            return 0

    def has_taint(self, key: str, effect: str) -> bool:
        """Is there a taint with this key and effect?"""
        return any(t.key == key and t.effect == effect for t in self.taints)


def state_patch(
    *,
    unschedulable_before: bool | Keep | None = KEEP,
    reboot_boot_id: str | Keep | None = KEEP,
    reboot_triggered_at: datetime.datetime | Keep | None = KEEP,
    release_after: datetime.datetime | Keep | None = KEEP,
    reboot_attempts: int | Keep | None = KEEP,
) -> dict[str, str | None]:
    """The annotation changes for pykured's state: key → value, or ``None`` to remove; ``KEEP`` is omitted."""
    out: dict[str, str | None] = {}
    if not isinstance(unschedulable_before, Keep):
        out[UNSCHEDULABLE_BEFORE_ANNOTATION] = (
            None if unschedulable_before is None else ("true" if unschedulable_before else "false")
        )
    if not isinstance(reboot_boot_id, Keep):
        out[REBOOT_BOOT_ID_ANNOTATION] = reboot_boot_id or None
    if not isinstance(reboot_triggered_at, Keep):
        out[REBOOT_TRIGGERED_AT_ANNOTATION] = (
            None if reboot_triggered_at is None else format_rfc3339(reboot_triggered_at)
        )
    if not isinstance(release_after, Keep):
        out[RELEASE_AFTER_ANNOTATION] = None if release_after is None else format_rfc3339(release_after)
    if not isinstance(reboot_attempts, Keep):
        out[REBOOT_ATTEMPTS_ANNOTATION] = None if reboot_attempts is None else str(int(reboot_attempts))
    return out
