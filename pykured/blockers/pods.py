"""``--blocking-pod-selector`` (kured): no reboot while a matching pod runs on the node.

Repeatable = OR, commas in one selector = AND. The pods on this node that are not Succeeded, Failed or
Unknown (the API server filters them: :data:`POD_FIELD_SELECTOR`), at most ten per selector; message
``matching pods: [names…]`` (plus ``...`` when more exist), errors ``pod query error: <err>``.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pykured.alerts.filters import MAX_LISTED
from pykured.blockers.options import NodeInputs
from pykured.core.errors import KubeError
from pykured.core.model import Reason
from pykured.gocompat.gofmt import go_list

if TYPE_CHECKING:
    from pykured.kube.api import KubeApi

POD_FIELD_SELECTOR = "spec.nodeName={node},status.phase!=Succeeded,status.phase!=Failed,status.phase!=Unknown"


class PodBlocker:
    """Blocks while a pod matching any selector is Pending or Running on this node."""

    def __init__(self, kube: KubeApi, *, node: str, selectors: Sequence[str]) -> None:
        self._kube = kube
        self.node = node
        self.selectors = list(selectors)

    def check(self, *, now: datetime.datetime) -> Reason | None:
        field_selector = POD_FIELD_SELECTOR.format(node=self.node)
        for selector in self.selectors:
            try:
                pods = self._kube.list_pods(
                    field_selector=field_selector, label_selector=selector, limit=MAX_LISTED
                )
            except KubeError as exc:
                return Reason("pods", f"pod query error: {exc}")
            items = pods.get("items") or []
            if items:
                names = [str(item.get("metadata", {}).get("name", "")) for item in items]
                if (pods.get("metadata") or {}).get("continue"):
                    names.append("...")
                return Reason("pods", f"matching pods: {go_list(names)}")
        return None


def build(inputs: NodeInputs) -> PodBlocker | None:
    """The node's blocker when ``--blocking-pod-selector`` is given."""
    selectors = inputs.options.blocking_pod_selector
    if not selectors:
        return None
    return PodBlocker(inputs.kube, node=inputs.node, selectors=selectors)
