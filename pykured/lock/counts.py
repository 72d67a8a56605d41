"""Reading the node counts a percentage budget is taken of (:mod:`pykured.lock.budget`).

* :func:`daemonset_count`: the nodes the DaemonSet runs on, ``status.desiredNumberScheduled`` of
  ``--ds-name``: the DaemonSet controller's own count of the nodes that should run the agent (its node
  selector, affinity and the taints it tolerates all applied), read with the ``get`` on daemonsets every
  agent already has (the drain's DaemonSet check and the annotation lock use it). Counting Nodes that match
  the pod template's ``nodeSelector`` instead would need ``list`` on nodes and would still miss affinity
  and taints.
* :func:`label_count`: the Nodes carrying a ``--concurrency-label`` value (a LIST with a label selector;
  ``list`` on nodes), kept for :data:`LABEL_FRESH` seconds.

Every count is hostile until parsed (:func:`~pykured.lock.budget.parse_count`): a failed read, or a value
absent or garbled, is ``None``, said in one log line, and the budget's limit is then 1, never unlimited.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pykured.core.errors import KubeError
from pykured.lock.budget import MAX_COUNT, parse_count

if TYPE_CHECKING:
    from pykured.kube.api import KubeApi
    from pykured.kube.client import Obj

logger = logging.getLogger(__name__)

LABEL_FRESH = 60.0
"""Seconds for which a label value's node count serves the next looks (a LIST of Nodes is not cheap)."""


def desired_count(ds: Obj) -> int | None:
    """``status.desiredNumberScheduled`` of a DaemonSet as read, or ``None`` when absent or garbled."""
    status = ds.get("status") if isinstance(ds, dict) else None
    return parse_count(status.get("desiredNumberScheduled")) if isinstance(status, dict) else None


class _Once:
    """Says a failed or garbled count once until the count reads well again (no line per look)."""

    def __init__(self) -> None:
        self._said: set[str] = set()

    def bad(self, what: str, why: str) -> None:
        if what not in self._said:
            self._said.add(what)
            logger.warning("Cannot count %s (%s): the budget allows 1 node at once until it can", what, why)

    def good(self, what: str) -> None:
        self._said.discard(what)


def daemonset_count(kube: KubeApi, *, namespace: str, name: str) -> Callable[[], int | None]:
    """The nodes the DaemonSet ``namespace/name`` runs on, one GET per call (``None``: unknown)."""
    once = _Once()
    what = f"the nodes of DaemonSet {namespace}/{name}"

    def count() -> int | None:
        try:
            ds = kube.get_daemonset(namespace, name)
        except KubeError as exc:
            once.bad(what, str(exc))
            return None
        found = desired_count(ds)
        if found is None:
            once.bad(what, "status.desiredNumberScheduled is absent or not a count")
        else:
            once.good(what)
        return found

    return count


def label_count(
    kube: KubeApi, *, label: str, fresh: float = LABEL_FRESH, clock: Callable[[], float] = time.monotonic
) -> Callable[[str], int | None]:
    """The Nodes whose ``label`` is a given value (``None``: unknown), each value's count kept ``fresh``
    seconds."""
    once = _Once()
    kept: dict[str, tuple[int | None, float]] = {}
    guard = threading.Lock()

    def count(value: str) -> int | None:
        with guard:
            hit = kept.get(value)
            if hit is not None and clock() - hit[1] < fresh:
                return hit[0]
        what = f"the nodes with {label}={value}"
        try:
            answer = kube.list_nodes(label_selector=f"{label}={value}")
        except KubeError as exc:
            once.bad(what, str(exc))
            return None  # not kept: the next look reads again
        items: Any = answer.get("items") if isinstance(answer, dict) else None
        found = len(items) if isinstance(items, list) and len(items) <= MAX_COUNT else None
        if found is None:
            once.bad(what, "the answer lists no items")
        else:
            once.good(what)
        with guard:
            kept[value] = (found, clock())
        return found

    return count
