"""The PreferNoSchedule taint a node carries while it waits for the reboot lock.

Concept: when this node needs a reboot but another node holds the lock, kured adds a taint
``<--prefer-no-schedule-taint>:PreferNoSchedule`` (no value) so the scheduler prefers other nodes for new
pods, and removes it when no reboot is needed or the window is closed (kured 1.23.0's
``pkg/taints/taints.go``).

Invariants:
* Writes are JSON Patches that fail rather than overwrite when the node changed under us: adding to an empty
  or absent list carries a ``test`` of ``/spec`` as read (otherwise ``add /spec/taints`` would replace a list
  someone else just created); adding to a non-empty list appends (``/spec/taints/-``); removing tests the
  entry at its index before removing it.
* Idempotent: the node is read first; nothing is sent when the taint is already in the wanted state.
* A taint is identified by key and effect. Patch builders are pure and tested on their own.

Differences from kured: kured caches "the taint exists" from startup and treats any patch error as fatal;
pykured re-reads the node each time, retries a failed ``test`` twice, and otherwise raises
:class:`pykured.core.errors.KubeError` for the daemon to log and retry.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from pykured.core import errors
from pykured.kube.api import KubeApi
from pykured.kube.client import JSON_PATCH
from pykured.kube.node import NodeView

logger = logging.getLogger(__name__)

PREFER_NO_SCHEDULE = "PreferNoSchedule"
_ATTEMPTS = 3
_RETRY_STATUSES = (409, 422)

Patch = list[dict[str, Any]]


def add_taint_patch(spec: Mapping[str, Any], *, key: str, effect: str = PREFER_NO_SCHEDULE) -> Patch | None:
    """JSON Patch adding the taint to ``spec`` as read, or ``None`` if it is already there."""
    taints = spec.get("taints")
    entries = taints if isinstance(taints, list) else []
    if any(isinstance(t, dict) and t.get("key") == key and t.get("effect") == effect for t in entries):
        return None
    taint = {"key": key, "effect": effect}
    if not entries:
        return [
            {"op": "test", "path": "/spec", "value": dict(spec)},
            {"op": "add", "path": "/spec/taints", "value": [taint]},
        ]
    return [{"op": "add", "path": "/spec/taints/-", "value": taint}]


def remove_taint_patch(
    spec: Mapping[str, Any], *, key: str, effect: str = PREFER_NO_SCHEDULE
) -> Patch | None:
    """JSON Patch removing the taint (``test`` + ``remove`` at its index), or ``None`` if it is absent."""
    taints = spec.get("taints")
    entries = taints if isinstance(taints, list) else []
    for index, entry in enumerate(entries):
        if isinstance(entry, dict) and entry.get("key") == key and entry.get("effect") == effect:
            path = f"/spec/taints/{index}"
            return [{"op": "test", "path": path, "value": entry}, {"op": "remove", "path": path}]
    return None


class PreferNoScheduleTaint:
    """Adds and removes one PreferNoSchedule taint on one node."""

    def __init__(self, kube: KubeApi, *, node: str, key: str, effect: str = PREFER_NO_SCHEDULE) -> None:
        self._kube = kube
        self.node = node
        self.key = key
        self.effect = effect

    def enable(self) -> bool:
        """Make sure the taint is on the node; returns whether anything changed."""
        return self.set(True)

    def disable(self) -> bool:
        """Make sure the taint is not on the node; returns whether anything changed."""
        return self.set(False)

    def set(self, present: bool) -> bool:
        """Bring the taint to the wanted state; raises :class:`~pykured.core.errors.KubeError` when that
        fails."""
        for attempt in range(1, _ATTEMPTS + 1):
            spec = NodeView.from_obj(self._kube.get_node(self.node)).spec
            build = add_taint_patch if present else remove_taint_patch
            patch = build(spec, key=self.key, effect=self.effect)
            if patch is None:
                return False
            try:
                self._kube.patch_node(self.node, patch, patch_type=JSON_PATCH)
            except errors.KubeError as exc:
                if exc.status not in _RETRY_STATUSES or attempt == _ATTEMPTS:
                    raise
                logger.debug("taint patch on node %s raced another writer (%s); re-reading", self.node, exc)
                continue
            logger.info(
                "%s taint %s:%s on node %s",
                "added" if present else "removed",
                self.key,
                self.effect,
                self.node,
            )
            return True
        return False  # pragma: no cover - the loop always returns or raises
