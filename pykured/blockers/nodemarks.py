"""``--blocking-node-label``, ``--blocking-node-annotation`` (pykured): no reboot while the node's own Node
carries a blocking mark.

Repeatable, each ``key`` or ``key=value`` (:class:`~pykured.blockers.options.NodeMark`); the labels are
checked first, then the annotations, each in flag order, and the first match blocks: message ``node has
blocking label <key[=value]>`` (or ``annotation``). A Node that cannot be read blocks (fail safe).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pykured.blockers.base import read_node_marks
from pykured.blockers.options import NodeInputs, NodeMark
from pykured.core.errors import KubeError
from pykured.core.model import Reason

if TYPE_CHECKING:
    from pykured.kube.api import KubeApi


def node_marks_block(
    *,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    blocking_labels: Sequence[NodeMark],
    blocking_annotations: Sequence[NodeMark],
) -> Reason | None:
    """The pure check: the first blocking label, then annotation, the Node carries (in flag order)."""
    for kind, marks, found in (
        ("label", blocking_labels, labels),
        ("annotation", blocking_annotations, annotations),
    ):
        for mark in marks:
            if mark.matches(found):
                return Reason("node", f"node has blocking {kind} {mark}")
    return None


class NodeMarkBlocker:
    """Blocks ``node``'s new reboots while its Node carries a blocking label or annotation.

    ``read`` reads the Node (for the agent's own, the view its pass already has); without it, a GET. A Node
    that cannot be read blocks (fail safe)."""

    def __init__(
        self,
        kube: KubeApi,
        node: str,
        *,
        labels: Sequence[NodeMark],
        annotations: Sequence[NodeMark],
        read: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        self._kube = kube
        self.node = node
        self.labels = tuple(labels)
        self.annotations = tuple(annotations)
        self._read = read

    def check(self, *, now: datetime.datetime) -> Reason | None:
        try:
            marks = read_node_marks(self._kube, self.node, self._read)
        except KubeError as exc:
            return Reason("node", f"cannot read node {self.node} to check its blocking labels: {exc}")
        return node_marks_block(
            labels=marks.labels,
            annotations=marks.annotations,
            blocking_labels=self.labels,
            blocking_annotations=self.annotations,
        )


def build(inputs: NodeInputs) -> NodeMarkBlocker | None:
    """The node's blocker when ``--blocking-node-label`` or ``--blocking-node-annotation`` is given: on
    ``inputs.read`` (the agent's own Node view), else a GET of the node."""
    labels, annotations = inputs.options.blocking_node_labels, inputs.options.blocking_node_annotations
    if not labels and not annotations:
        return None
    return NodeMarkBlocker(inputs.kube, inputs.node, labels=labels, annotations=annotations, read=inputs.read)
