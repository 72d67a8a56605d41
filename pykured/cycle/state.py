"""A node's reboot-cycle state: every annotation key of the cycle, the one type that reads them, the patches.

Concept: the cycle keeps no memory in the process. What it knows about a node is the Node object (boot ID,
``spec.unschedulable``, readiness, kured's and pykured's annotations) plus the node's lock entry, and
:class:`NodeState` is that, decoded once per pass. The sentinel-driven daemon and FleetLock read the same
type, so ``pykured lock status``, the daemon and FleetLock see one truth. Pure: no I/O, no clock reads.

Invariants:
* Decoding never raises on a malformed or partial Node: a garbled annotation reads as ``None``/default, so a
  hand-edited value cannot crash the agent.
* Timestamps are written as kured writes them: Go ``time.RFC3339`` at second precision in UTC, read
  leniently (fractions and offsets accepted).
* The patch builders name only the keys they are told to change: ``KEEP`` leaves a key alone, ``None``
  removes it (a JSON merge patch), so concurrent edits by others are never clobbered.

kured mirrored (kured 1.23.0's ``cmd/kured/main.go``): ``weave.works/kured-reboot-in-progress`` and
``weave.works/kured-most-recent-reboot-needed``. kured keeps "was the node unschedulable before I cordoned
it" only in the lock entry; pykured also writes it on the Node (``pykured.dev/unschedulable-before``) so
losing the lock does not lose it.

Autoscalers (pykured's extension): from the lock slot until the cycle ends the Node carries the annotations
that keep the cluster-autoscaler (``cluster-autoscaler.kubernetes.io/scale-down-disabled: "true"``) and
Karpenter (``karpenter.sh/do-not-disrupt: "true"``) from deleting a node that looks empty because it is
drained. Each is set only where the Node has none, and ``pykured.dev/autoscaler-annotations`` names the ones
pykured set: those, and only those, are removed when the cycle ends (an operator's own stays).
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
from collections.abc import Mapping, Sequence
from typing import Any, Final

from pykured.core.times import format_rfc3339, parse_rfc3339
from pykured.kube.node import PYKURED_PREFIX as PYKURED_PREFIX  # noqa: PLC0414 (re-exported: every key here)
from pykured.kube.node import NodeView
from pykured.lock.record import LockEntry
from pykured.policy.quarantine import quarantine_record

# -- every annotation key of the cycle ----------------------------------------------------------------------

IN_PROGRESS_ANNOTATION: Final = "weave.works/kured-reboot-in-progress"
MOST_RECENT_REBOOT_NEEDED_ANNOTATION: Final = "weave.works/kured-most-recent-reboot-needed"

UNSCHEDULABLE_BEFORE_ANNOTATION: Final = PYKURED_PREFIX + "unschedulable-before"
REBOOT_BOOT_ID_ANNOTATION: Final = PYKURED_PREFIX + "reboot-boot-id"
REBOOT_TRIGGERED_AT_ANNOTATION: Final = PYKURED_PREFIX + "reboot-triggered-at"
RELEASE_AFTER_ANNOTATION: Final = PYKURED_PREFIX + "release-after"
REBOOT_ATTEMPTS_ANNOTATION: Final = PYKURED_PREFIX + "reboot-attempts"
BACKOFF_UNTIL_ANNOTATION: Final = PYKURED_PREFIX + "backoff-until"
"""No new cycle before this time (a reboot that did not clear the sentinel, or one that never happened)."""
BACKOFF_REASON_ANNOTATION: Final = PYKURED_PREFIX + "backoff-reason"
"""Why the back-off was written: ``sentinel`` (it holds the sentinel only, not a reboot request) or
``no-reboot`` (it holds every trigger); absent or anything else holds every trigger."""
FLEETLOCK_ID_ANNOTATION: Final = PYKURED_PREFIX + "fleetlock-id"
"""On a Node while FleetLock runs its cycle: the Zincati id that asked; the daemon keeps off it."""
AUTOSCALER_RECORD_ANNOTATION: Final = PYKURED_PREFIX + "autoscaler-annotations"
"""The autoscalers' annotations the cycle put on the Node (comma-separated keys): the ones it removes."""
AUTOSCALER_VALUE: Final = "true"
"""The value of an autoscaler's annotation as the cycle writes it (and the only one it removes)."""

STATE_ANNOTATIONS: Final = (
    UNSCHEDULABLE_BEFORE_ANNOTATION,
    REBOOT_BOOT_ID_ANNOTATION,
    REBOOT_TRIGGERED_AT_ANNOTATION,
    RELEASE_AFTER_ANNOTATION,
    REBOOT_ATTEMPTS_ANNOTATION,
    AUTOSCALER_RECORD_ANNOTATION,
)
"""The ``pykured.dev/*`` annotations of one cycle, in a stable order (cleared together when it ends)."""


class Keep(enum.Enum):
    """Marker for "leave this annotation as it is" in the patch builders."""

    KEEP = "keep"


KEEP: Final = Keep.KEEP


def _bool_annotation(text: str | None) -> bool | None:
    if text is None:
        return None
    lowered = text.strip().lower()
    if lowered == "true":
        return True
    if lowered == "false":
        return False
    return None


def _time_annotation(text: str | None) -> datetime.datetime | None:
    return parse_rfc3339(text) if text is not None else None


def ready_since(obj: Mapping[str, Any]) -> datetime.datetime | None:
    """``lastTransitionTime`` of the node's ``Ready=True`` condition (``None`` when not Ready or unknown)."""
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    if not isinstance(conditions, list):
        return None
    for condition in conditions:
        if isinstance(condition, dict) and condition.get("type") == "Ready":
            if condition.get("status") != "True":
                return None
            stamp = condition.get("lastTransitionTime")
            return parse_rfc3339(stamp) if isinstance(stamp, str) else None
    return None


@dataclasses.dataclass(frozen=True, slots=True)
class NodeState(NodeView):
    """What the Node and the lock say about one node's reboot cycle: the Node as
    :class:`~pykured.kube.node.NodeView` reads it, plus its readiness time and its lock entry."""

    ready_since: datetime.datetime | None = None
    holding: bool = False
    """The node holds a lock slot (an expired one too: the holder always finishes its cycle)."""
    entry_unschedulable: bool | None = None
    """The lock entry's "unschedulable before" (kured's memory); ``None`` without an entry."""

    @classmethod
    def from_obj(cls, obj: Mapping[str, Any], *, entry: LockEntry | None = None) -> NodeState:
        """Decode a Node dict as the API server returns it, with the node's lock entry (if any)."""
        view = NodeView.from_obj(obj)
        fields = {f.name: getattr(view, f.name) for f in dataclasses.fields(NodeView)}
        return cls(**fields, ready_since=ready_since(obj)).with_entry(entry)

    def with_entry(self, entry: LockEntry | None) -> NodeState:
        """The same Node with this lock entry."""
        return dataclasses.replace(
            self,
            holding=entry is not None,
            entry_unschedulable=entry.unschedulable if entry is not None else None,
        )

    # -- kured's annotations ---------------------------------------------------------------------------------

    @property
    def in_progress(self) -> bool:
        """Does the node carry ``weave.works/kured-reboot-in-progress`` (any value)?"""
        return IN_PROGRESS_ANNOTATION in self.annotations

    @property
    def most_recent_reboot_needed(self) -> datetime.datetime | None:
        """``weave.works/kured-most-recent-reboot-needed`` as a time, if present and valid."""
        return _time_annotation(self.annotations.get(MOST_RECENT_REBOOT_NEEDED_ANNOTATION))

    # -- pykured's memory ------------------------------------------------------------------------------------

    @property
    def unschedulable_before(self) -> bool | None:
        """Was the node unschedulable before the cycle cordoned it? ``None`` when not recorded."""
        return _bool_annotation(self.annotations.get(UNSCHEDULABLE_BEFORE_ANNOTATION))

    @property
    def reboot_boot_id(self) -> str | None:
        """The boot ID recorded when the reboot was triggered (a different current one proves the reboot)."""
        return self.annotations.get(REBOOT_BOOT_ID_ANNOTATION) or None

    @property
    def reboot_triggered_at(self) -> datetime.datetime | None:
        """When the reboot was triggered (FleetLock: granted)."""
        return _time_annotation(self.annotations.get(REBOOT_TRIGGERED_AT_ANNOTATION))

    @property
    def release_after(self) -> datetime.datetime | None:
        """When the lock may be released (``--lock-release-delay`` that survives a pod restart)."""
        return _time_annotation(self.annotations.get(RELEASE_AFTER_ANNOTATION))

    @property
    def reboot_attempts(self) -> int:
        """How many reboots were triggered for the current need (0 when absent or garbled)."""
        try:
            return max(0, int(self.annotations.get(REBOOT_ATTEMPTS_ANNOTATION, "").strip()))
        except ValueError:
            return 0

    @property
    def backoff_until(self) -> datetime.datetime | None:
        """No new cycle before this time."""
        return parse_rfc3339(self.annotations.get(BACKOFF_UNTIL_ANNOTATION, ""))

    @property
    def backoff_reason(self) -> str:
        """Why the back-off was written (``""`` when not said): see :data:`BACKOFF_REASON_ANNOTATION`."""
        return self.annotations.get(BACKOFF_REASON_ANNOTATION, "")

    @property
    def fleetlock_id(self) -> str | None:
        """The Zincati id while FleetLock runs this node's cycle (``None``: not FleetLock's)."""
        return self.annotations.get(FLEETLOCK_ID_ANNOTATION)

    @property
    def autoscaler_marks(self) -> tuple[str, ...]:
        """The autoscalers' annotations this cycle put on the Node (its record; empty when none)."""
        return autoscaler_record(self.annotations)

    @property
    def quarantined(self) -> bool:
        """The node carries a quarantine (``pykured.dev/quarantined``, a garbled one too): its cordon stays
        and no cycle drains it (:mod:`pykured.policy.quarantine`)."""
        return quarantine_record(self.annotations) is not None

    @property
    def cycle_started(self) -> bool:
        """``unschedulable-before`` is recorded: a cycle took the lock and may have cordoned."""
        return self.unschedulable_before is not None

    @property
    def has_memory(self) -> bool:
        """Any of a cycle's memory is on the Node: its start, the reboot's bootID, the release time, or the
        autoscalers' annotations it put there."""
        return (
            self.cycle_started
            or self.reboot_boot_id is not None
            or self.release_after is not None
            or bool(self.autoscaler_marks)
        )


# -- the patches ---------------------------------------------------------------------------------------------

Patch = dict[str, str | None]
"""Annotation changes: key → value, or ``None`` to remove."""


def state_patch(
    *,
    unschedulable_before: bool | Keep | None = KEEP,
    reboot_boot_id: str | Keep | None = KEEP,
    reboot_triggered_at: datetime.datetime | Keep | None = KEEP,
    release_after: datetime.datetime | Keep | None = KEEP,
    reboot_attempts: int | Keep | None = KEEP,
    backoff_until: datetime.datetime | Keep | None = KEEP,
    fleetlock_id: str | Keep | None = KEEP,
    backoff_reason: str | Keep | None = KEEP,
) -> Patch:
    """The annotation changes for the cycle's memory; ``KEEP`` is omitted. A back-off set or cleared without
    its reason clears the reason (a back-off is never left with another's reason)."""
    out: Patch = {}
    if not isinstance(unschedulable_before, Keep):
        out[UNSCHEDULABLE_BEFORE_ANNOTATION] = (
            None if unschedulable_before is None else ("true" if unschedulable_before else "false")
        )
    if not isinstance(reboot_boot_id, Keep):
        out[REBOOT_BOOT_ID_ANNOTATION] = reboot_boot_id or None
    if not isinstance(reboot_triggered_at, Keep):
        out[REBOOT_TRIGGERED_AT_ANNOTATION] = _stamp(reboot_triggered_at)
    if not isinstance(release_after, Keep):
        out[RELEASE_AFTER_ANNOTATION] = _stamp(release_after)
    if not isinstance(reboot_attempts, Keep):
        out[REBOOT_ATTEMPTS_ANNOTATION] = None if reboot_attempts is None else str(int(reboot_attempts))
    if not isinstance(backoff_until, Keep):
        out[BACKOFF_UNTIL_ANNOTATION] = _stamp(backoff_until)
        if isinstance(backoff_reason, Keep):
            backoff_reason = None
    if not isinstance(backoff_reason, Keep):
        out[BACKOFF_REASON_ANNOTATION] = backoff_reason or None
    if not isinstance(fleetlock_id, Keep):
        out[FLEETLOCK_ID_ANNOTATION] = fleetlock_id
    return out


def forget_patch(
    *,
    backoff_until: datetime.datetime | Keep | None = KEEP,
    fleetlock_id: Keep | None = KEEP,
    backoff_reason: str | Keep | None = KEEP,
) -> Patch:
    """End a cycle: clear every :data:`STATE_ANNOTATIONS` key (and the others named) in one patch (the
    autoscalers' annotations the record names: :func:`autoscaler_unmarks_patch`)."""
    out = state_patch(
        unschedulable_before=None, reboot_boot_id=None, reboot_triggered_at=None, release_after=None,
        reboot_attempts=None, backoff_until=backoff_until, fleetlock_id=fleetlock_id,
        backoff_reason=backoff_reason,
    )  # fmt: skip
    out[AUTOSCALER_RECORD_ANNOTATION] = None
    return out


def autoscaler_record(annotations: Mapping[str, str]) -> tuple[str, ...]:
    """The keys ``pykured.dev/autoscaler-annotations`` names, in order, once each (a garbled record names
    only what it names; never a key of pykured's or kured's own)."""
    text = annotations.get(AUTOSCALER_RECORD_ANNOTATION) or ""
    keys = (key.strip() for key in text.split(","))
    own = (PYKURED_PREFIX, "weave.works/kured-")
    return tuple(dict.fromkeys(key for key in keys if key and not key.startswith(own)))


def autoscaler_marks_patch(annotations: Mapping[str, str], wanted: Sequence[str]) -> Patch:
    """Put the ``wanted`` autoscalers' annotations on a Node that carries ``annotations``: each one it does
    not carry set to ``"true"``, and the record naming them (with those already recorded: a cycle begun
    again keeps what it put there). An annotation the Node carries already is the operator's: not touched,
    not recorded. Empty when there is nothing to write."""
    ours = autoscaler_record(annotations)
    added = [key for key in dict.fromkeys(wanted) if key and key not in annotations]
    if not added:
        return {}
    out: Patch = dict.fromkeys(added, AUTOSCALER_VALUE)
    out[AUTOSCALER_RECORD_ANNOTATION] = ",".join(dict.fromkeys([*ours, *added]))
    return out


def autoscaler_unmarks_patch(annotations: Mapping[str, str]) -> Patch:
    """Take off the autoscalers' annotations the record names (each only while it still says ``"true"``: a
    value changed since is the operator's) and the record. Empty when there is no record."""
    if AUTOSCALER_RECORD_ANNOTATION not in annotations:
        return {}
    out: Patch = {
        key: None for key in autoscaler_record(annotations) if annotations.get(key) == AUTOSCALER_VALUE
    }
    out[AUTOSCALER_RECORD_ANNOTATION] = None
    return out


def reboot_annotations(now: datetime.datetime) -> dict[str, str]:
    """kured's two annotations, both set to ``now``."""
    stamp = format_rfc3339(now)
    return {IN_PROGRESS_ANNOTATION: stamp, MOST_RECENT_REBOOT_NEEDED_ANNOTATION: stamp}


def json_pointer_escape(key: str) -> str:
    """RFC 6901 escaping of one path segment (``weave.works/x`` → ``weave.works~1x``)."""
    return key.replace("~", "~0").replace("/", "~1")


def unix_ns(moment: datetime.datetime) -> int:
    """Unix nanoseconds of an aware time, as the lock takes them."""
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1_000


def _stamp(moment: datetime.datetime | None) -> str | None:
    return None if moment is None else format_rfc3339(moment)
