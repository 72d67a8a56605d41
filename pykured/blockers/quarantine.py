"""A quarantined node (``--drain-escalation=…,quarantine``): it takes no lock again while its Node carries a
quarantine.

The quarantine is the Node's ``pykured.dev/quarantined`` annotation (:mod:`pykured.policy.quarantine`: the
record, how it is read and written); any value under the key holds, a garbled one too. Message
``quarantined at …: why (pods that would not leave: …) (pykured unquarantine NODE ends it)``. A Node that
cannot be read blocks (fail safe). One blocker per node, on every path: the agent and FleetLock.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pykured.blockers.base import read_node_marks
from pykured.blockers.options import NodeInputs
from pykured.core.errors import KubeError
from pykured.core.model import Reason
from pykured.policy.quarantine import quarantine_record

if TYPE_CHECKING:
    from pykured.kube.api import KubeApi


class QuarantineBlocker:
    """Blocks ``node``'s new reboots (it takes no lock) while its Node carries a quarantine.

    ``read`` reads the Node (the agent's own: its watched copy); without it, a GET. A Node that cannot be
    read blocks (fail safe)."""

    def __init__(self, kube: KubeApi, node: str, *, read: Callable[[], dict[str, Any]] | None = None) -> None:
        self._kube = kube
        self.node = node
        self._read = read

    def check(self, *, now: datetime.datetime) -> Reason | None:
        try:
            marks = read_node_marks(self._kube, self.node, self._read)
        except KubeError as exc:
            return Reason("quarantined", f"cannot read node {self.node} to check for a quarantine: {exc}")
        record = quarantine_record(marks.annotations)
        if record is None:
            return None
        return Reason("quarantined", record.describe() + f" (pykured unquarantine {self.node} ends it)")


def build(inputs: NodeInputs) -> QuarantineBlocker:
    """Every node's: on ``inputs.read`` (the agent's own Node view), else a GET of the node."""
    return QuarantineBlocker(inputs.kube, inputs.node, read=inputs.read)
