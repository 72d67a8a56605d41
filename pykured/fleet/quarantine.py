"""``pykured unquarantine NODE``: end a node's quarantine (``--drain-escalation=…,quarantine``).

The quarantine is the ``pykured.dev/quarantined`` record on the Node (:mod:`pykured.policy.quarantine`).
Ending it removes the record and, when the record says pykured's cordon is the one that holds the node
(the node was schedulable before the cycle), uncordons it, in one merge patch conditional on the Node's
``resourceVersion`` (a record rewritten since it was read is not removed blind: 409, retried). A record that
cannot be read is removed but leaves the cordon: whose cordon it is cannot be known. Once the record is gone
the node's agent may take the lock again: if the node still needs its reboot, it drains again.

RBAC: ``patch`` on nodes; under the admission policies the requester role may remove the record (and undo
the cordon it names), never write one.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from pykured.conditions.record import COUNT_ANNOTATION
from pykured.core.errors import ConflictError, KubeError
from pykured.kube.node import NodeView
from pykured.policy.quarantine import (
    MERGE_PATCH,
    QUARANTINED_ANNOTATION,
    QuarantineRecord,
    quarantine_record,
)

if TYPE_CHECKING:
    from pykured.kube.api import KubeApi

ATTEMPTS = 5


@dataclasses.dataclass(frozen=True, slots=True)
class Unquarantined:
    """What ``unquarantine`` did to one node."""

    node: str
    record: QuarantineRecord | None
    """The quarantine it ended (None: the node was not quarantined)."""
    uncordoned: bool = False
    """pykured's cordon was undone."""
    left_cordoned: bool = False
    """The node stays cordoned: the cordon was not pykured's (or the record could not say)."""

    def describe(self) -> str:
        if self.record is None:
            return f"node {self.node} is not quarantined"
        if self.uncordoned:
            return f"node {self.node}: quarantine ended, uncordoned"
        if self.left_cordoned:
            why = "cannot tell whose cordon it is" if self.record.unreadable else "not cordoned by pykured"
            return f"node {self.node}: quarantine ended; left cordoned ({why})"
        return f"node {self.node}: quarantine ended"


def unquarantine(kube: KubeApi, node: str) -> Unquarantined:
    """End ``node``'s quarantine (raises :class:`KubeError`, e.g. NotFound for an unknown node)."""
    for _ in range(ATTEMPTS):
        obj = kube.get_node(node)
        view = NodeView.from_obj(obj)
        record = quarantine_record(view.annotations)
        if record is None:
            return Unquarantined(node, None)
        ours = record.cordoned and not record.unreadable
        metadata = obj.get("metadata") or {}
        patch: dict[str, object] = {
            "metadata": {
                "resourceVersion": metadata.get("resourceVersion"),
                # the count of condition reboots that tripped the breaker goes with it: a fresh start
                "annotations": {QUARANTINED_ANNOTATION: None, COUNT_ANNOTATION: None},
            }
        }
        uncordon = ours and view.unschedulable
        if uncordon:
            patch["spec"] = {"unschedulable": None}
        try:
            kube.patch_node(node, patch, patch_type=MERGE_PATCH)
        except ConflictError:
            continue
        return Unquarantined(node, record, uncordoned=uncordon, left_cordoned=view.unschedulable and not ours)
    raise KubeError(f"node {node} kept changing; its quarantine was not ended")
