"""Node bookkeeping: kured's reboot annotations, the pre/post reboot labels, and pykured's own memory.

Concept: everything pykured writes on its own Node object except ``spec.unschedulable`` (``drain``) and the
taint (``taints``). Reading goes through :class:`pykured.nodeinfo.NodeView`; this module only writes.

Invariants:
* kured's timestamps are RFC 3339 at second precision in UTC (``2026-06-30T11:29:16Z``); both kured
  annotations get the same value.
* pykured's state lives in ``pykured.dev/*`` annotations written by one merge patch per call, so several keys
  change atomically; ``None`` removes a key, ``KEEP`` leaves it alone.
* Every write is a patch of only the keys concerned (never the whole object), so it cannot clobber concurrent
  edits by others and does not conflict on ``resourceVersion``.
* Errors are :class:`pykured.errors.KubeError` (the daemon logs them and retries on its next tick).

kured mirrored (kured.md §4, §5.3–5.4): ``--annotate-nodes`` writes
``weave.works/kured-reboot-in-progress`` and ``weave.works/kured-most-recent-reboot-needed`` together; the
in-progress one is removed with a JSON Patch ``remove``; ``--pre/post-reboot-node-labels`` are a
strategic-merge patch of ``metadata.labels``. kured sends the whole Node JSON for the annotations (it can
conflict); pykured sends only the two annotations.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Mapping

from pykured import errors
from pykured.kube import JSON_PATCH, MERGE_PATCH, Kube, Obj
from pykured.nodeinfo import (
    IN_PROGRESS_ANNOTATION,
    KEEP,
    MOST_RECENT_REBOOT_NEEDED_ANNOTATION,
    Keep,
    NodeView,
    format_rfc3339,
    state_patch,
)

logger = logging.getLogger(__name__)

_UNPROCESSABLE = 422


def json_pointer_escape(key: str) -> str:
    """RFC 6901 escaping of one path segment (``weave.works/x`` → ``weave.works~1x``)."""
    return key.replace("~", "~0").replace("/", "~1")


def reboot_annotations(now: datetime.datetime) -> dict[str, str]:
    """kured's two annotations, both set to ``now`` (pure)."""
    stamp = format_rfc3339(now)
    return {IN_PROGRESS_ANNOTATION: stamp, MOST_RECENT_REBOOT_NEEDED_ANNOTATION: stamp}


class NodeBook:
    """Writes pykured's and kured's bookkeeping on one Node."""

    def __init__(self, kube: Kube, *, node: str) -> None:
        self._kube = kube
        self.node = node

    def view(self) -> NodeView:
        """GET the node and decode it."""
        return NodeView.from_obj(self._kube.get_node(self.node))

    def _merge(self, annotations: Mapping[str, str | None]) -> Obj:
        return self._kube.patch_node(
            self.node, {"metadata": {"annotations": dict(annotations)}}, patch_type=MERGE_PATCH
        )

    def add_reboot_annotations(self, now: datetime.datetime) -> None:
        """Set ``kured-reboot-in-progress`` and ``kured-most-recent-reboot-needed`` to ``now``."""
        values = reboot_annotations(now)
        self._merge(values)
        logger.info("annotated node %s with %s", self.node, values)

    def remove_in_progress_annotation(self) -> bool:
        """Remove ``kured-reboot-in-progress`` (JSON Patch, as kured); ``False`` if it was not there."""
        path = "/metadata/annotations/" + json_pointer_escape(IN_PROGRESS_ANNOTATION)
        try:
            self._kube.patch_node(self.node, [{"op": "remove", "path": path}], patch_type=JSON_PATCH)
        except errors.KubeError as exc:
            if exc.status == _UNPROCESSABLE:  # the path does not exist: nothing to remove
                logger.debug("node %s has no %s annotation", self.node, IN_PROGRESS_ANNOTATION)
                return False
            raise
        logger.info("removed annotation %s from node %s", IN_PROGRESS_ANNOTATION, self.node)
        return True

    def apply_labels(self, labels: Mapping[str, str]) -> None:
        """Strategic-merge patch ``metadata.labels`` (kured's pre/post reboot labels); no call when empty."""
        if not labels:
            return
        self._kube.patch_node(self.node, {"metadata": {"labels": dict(labels)}})
        logger.info("labelled node %s with %s", self.node, dict(labels))

    def update_state(
        self,
        *,
        unschedulable_before: bool | Keep | None = KEEP,
        reboot_boot_id: str | Keep | None = KEEP,
        reboot_triggered_at: datetime.datetime | Keep | None = KEEP,
        release_after: datetime.datetime | Keep | None = KEEP,
        reboot_attempts: int | Keep | None = KEEP,
    ) -> NodeView | None:
        """Set (a value) or clear (``None``) several ``pykured.dev/*`` annotations in one merge patch.

        Returns the patched node, or ``None`` when every argument was ``KEEP`` (no call made).
        """
        changes = state_patch(
            unschedulable_before=unschedulable_before,
            reboot_boot_id=reboot_boot_id,
            reboot_triggered_at=reboot_triggered_at,
            release_after=release_after,
            reboot_attempts=reboot_attempts,
        )
        if not changes:
            return None
        node = NodeView.from_obj(self._merge(changes))
        logger.debug("node %s state annotations: %s", self.node, changes)
        return node
