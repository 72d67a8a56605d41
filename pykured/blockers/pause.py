"""A paused node (``pykured freeze NODE…``): no new reboot of it while its Node carries an active pause.

The pause is the Node's ``pykured.dev/paused`` annotation (:mod:`pykured.policy.pause`: the record, how it is
read and written). While it is active the node takes no slot (``Reboot blocked: paused by …``); other nodes
go on rolling. A Node that cannot be read blocks (fail safe). One blocker per node, on every path: the agent
and FleetLock.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pykured.blockers.base import read_node_marks
from pykured.blockers.options import NodeInputs
from pykured.core.errors import KubeError
from pykured.core.model import Reason
from pykured.policy.pause import describe, paused_record

if TYPE_CHECKING:
    from pykured.kube.api import KubeApi


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
            marks = read_node_marks(self._kube, self.node, self._read)
        except KubeError as exc:
            return Reason("pause", f"cannot read node {self.node} to check for a pause: {exc}")
        record = paused_record(marks.annotations)
        if record is not None and record.active(now):
            return Reason("pause", describe(record))
        return None


def build(inputs: NodeInputs) -> PauseBlocker:
    """Every node's: on ``inputs.read`` (the agent's own Node view), else a GET of the node."""
    return PauseBlocker(inputs.kube, inputs.node, read=inputs.read)
