"""The per-node pause: ``pykured freeze NODE…`` stops one node's reboots without stopping the fleet.

The pause is a :class:`~pykured.policy.freeze.FreezeRecord` (who, when, why, until when) as JSON in the
Node's ``pykured.dev/paused`` annotation; ``pykured unfreeze NODE…`` removes it. While it is active the
node's agent (and FleetLock, for a Zincati node) starts no new reboot (``Reboot blocked: paused by …``,
:mod:`pykured.blockers.pause`); a reboot already under way finishes, as with the freeze. Other nodes go on
rolling. RBAC: the agent reads its own Node already; ``pykured freeze NODE`` needs ``patch`` on nodes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from pykured.kube.node import PYKURED_PREFIX
from pykured.policy.freeze import FreezeError, FreezeRecord

if TYPE_CHECKING:
    from pykured.kube.api import KubeApi

PAUSED_ANNOTATION = PYKURED_PREFIX + "paused"
MERGE_PATCH = "application/merge-patch+json"


def paused_record(annotations: Mapping[str, str]) -> FreezeRecord | None:
    """The pause on a Node (None: none, or one that does not parse: a pause must be written by the CLI)."""
    text = annotations.get(PAUSED_ANNOTATION, "")
    if not text.strip():
        return None
    try:
        return FreezeRecord.from_json(text)
    except FreezeError as exc:
        return FreezeRecord.garbled(str(exc).removeprefix("freeze record "))


def describe(record: FreezeRecord) -> str:
    """``paused by alice at …: why``."""
    if record.unreadable:
        return f"paused: the pause record cannot be read ({record.unreadable}); it holds until rewritten"
    return "paused" + record.describe().removeprefix("frozen")


def set_pause(kube: KubeApi, node: str, record: FreezeRecord | None) -> None:
    """Write (or, with None, remove) the pause on ``node`` (raises
    :class:`~pykured.core.errors.KubeError`)."""
    value = record.to_json() if record is not None else None
    kube.patch_node(node, {"metadata": {"annotations": {PAUSED_ANNOTATION: value}}}, patch_type=MERGE_PATCH)
