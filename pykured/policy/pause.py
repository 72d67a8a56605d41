"""The per-node pause: ``pykured freeze NODE…`` stops one node's reboots without stopping the fleet.

The pause is a :class:`~pykured.policy.freeze.FreezeRecord` (who, when, why, until when) as JSON in the
Node's ``pykured.dev/paused`` annotation; ``pykured unfreeze NODE…`` removes it. While it is active the
node's agent (and FleetLock, for a Zincati node) starts no new reboot (``Reboot blocked: paused by …``); a
reboot already under way finishes, as with the freeze. Other nodes go on rolling. RBAC: the agent reads its
own Node already; ``pykured freeze NODE`` needs ``patch`` on nodes.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from pykured.core.errors import KubeError
from pykured.core.model import Reason
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
    """Write (or, with None, remove) the pause on ``node`` (raises :class:`KubeError`)."""
    value = record.to_json() if record is not None else None
    kube.patch_node(node, {"metadata": {"annotations": {PAUSED_ANNOTATION: value}}}, patch_type=MERGE_PATCH)


class PauseBlocker:
    """Blocks ``node``'s new reboots while its Node carries an active pause (one read when a reboot is due).

    ``read`` reads the Node (the agent's own: its watched copy, or the GET its pass has just made); without
    it, a GET."""

    def __init__(self, kube: KubeApi, node: str, *, read: Callable[[], dict[str, Any]] | None = None) -> None:
        self._kube = kube
        self.node = node
        self._read = read

    def check(self, *, now: datetime.datetime) -> Reason | None:
        try:
            obj = self._read() if self._read is not None else self._kube.get_node(self.node)
        except KubeError as exc:
            return Reason("pause", f"cannot read node {self.node} to check for a pause: {exc}")
        record = paused_record((obj.get("metadata") or {}).get("annotations") or {})
        if record is not None and record.active(now):
            return Reason("pause", describe(record))
        return None
