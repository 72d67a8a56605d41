"""Node bookkeeping: the only writer of the cycle's annotations and of the pre/post reboot labels.

Concept: everything the reboot cycle writes on a Node except ``spec.unschedulable`` (:mod:`pykured.drain`)
and the taint (:mod:`pykured.kube.taints`): kured's reboot annotations, the labels, pykured's
``pykured.dev/*`` memory, the back-off, FleetLock's mark, the autoscalers' annotations and the quarantine
(:mod:`pykured.policy.quarantine`). Reading returns a :class:`~pykured.cycle.state.NodeState`.

Invariants:
* Every write is a patch of only the keys concerned (never the whole object), so it cannot clobber
  concurrent edits by others and does not conflict on ``resourceVersion``; several keys change in one merge
  patch, atomically.
* Errors are :class:`pykured.core.errors.KubeError` (the caller logs them and retries on its next pass).

kured mirrored (kured 1.23.0's ``cmd/kured/main.go``): ``--annotate-nodes`` writes
``weave.works/kured-reboot-in-progress`` and ``weave.works/kured-most-recent-reboot-needed`` together; the
in-progress one is removed with a JSON Patch ``remove``; ``--pre/post-reboot-node-labels`` are a
strategic-merge patch of ``metadata.labels``. kured sends the whole Node JSON for the annotations (it can
conflict); pykured sends only the two annotations.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Mapping

from pykured.core import errors
from pykured.cycle.nodecopy import NodeCopy
from pykured.cycle.state import (
    IN_PROGRESS_ANNOTATION,
    KEEP,
    Keep,
    NodeState,
    Patch,
    forget_patch,
    json_pointer_escape,
    reboot_annotations,
    state_patch,
)
from pykured.kube.api import KubeApi
from pykured.kube.client import JSON_PATCH, MERGE_PATCH, Obj
from pykured.lock.record import LockEntry
from pykured.policy.quarantine import QuarantineRecord, set_quarantine

logger = logging.getLogger(__name__)

_UNPROCESSABLE = 422


class NodeBook:
    """Reads the cycle's state of one Node and writes its bookkeeping."""

    def __init__(self, kube: KubeApi, *, node: str, copy: NodeCopy | None = None) -> None:
        self._kube = kube
        self.node = node
        self.copy = copy
        """The Node as its watch keeps it (:mod:`pykured.cycle.nodecopy`): read instead of a GET."""

    def view(self, entry: LockEntry | None = None) -> NodeState:
        """The node, decoded (with the node's lock entry, when given): the watched copy while the watch is
        live, else a GET."""
        obj = self.copy.get() if self.copy is not None else None
        if obj is None:
            obj = self._kube.get_node(self.node)
            if self.copy is not None:
                self.copy.offer(obj)
        return NodeState.from_obj(obj, entry=entry)

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
        also: Patch | None = None,
    ) -> NodeState | None:
        """Set (a value) or clear (``None``) several ``pykured.dev/*`` annotations in one merge patch, with
        the changes ``also`` names (the autoscalers' annotations).

        Returns the patched node, or ``None`` when every argument was ``KEEP`` (no call made).
        """
        changes = state_patch(
            unschedulable_before=unschedulable_before,
            reboot_boot_id=reboot_boot_id,
            reboot_triggered_at=reboot_triggered_at,
            release_after=release_after,
            reboot_attempts=reboot_attempts,
        )
        return self._write({**changes, **(also or {})})

    def quarantine(self, record: QuarantineRecord) -> None:
        """Write the quarantine (``pykured.dev/quarantined``) on the Node."""
        set_quarantine(self._kube, self.node, record)
        logger.debug("node %s quarantined: %s", self.node, record.to_json())

    def mark(self, ident: str | None) -> None:
        """Set (or, with ``None``, remove) FleetLock's mark: the Zincati id that runs this node's cycle."""
        self._write(state_patch(fleetlock_id=ident))

    def forget(
        self,
        *,
        backoff_until: datetime.datetime | Keep | None = KEEP,
        fleetlock_id: Keep | None = KEEP,
        backoff_reason: str | Keep | None = KEEP,
        also: Patch | None = None,
    ) -> None:
        """Clear the cycle's memory (and, when named, set or clear the back-off, with its reason, and
        FleetLock's mark), with the changes ``also`` names (the autoscalers' annotations), in one patch."""
        changes = forget_patch(
            backoff_until=backoff_until, fleetlock_id=fleetlock_id, backoff_reason=backoff_reason
        )
        self._write({**changes, **(also or {})})

    def _write(self, changes: Patch) -> NodeState | None:
        if not changes:
            return None
        node = NodeState.from_obj(self._merge(changes))
        logger.debug("node %s state annotations: %s", self.node, changes)
        return node
