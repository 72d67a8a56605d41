"""Drain: cordon a node, evict its pods as kubectl's drain helper does for kured, and uncordon it.

``filters`` holds the pure decision (which pods go, which stay and why); ``drainer`` talks to the API server
(cordon, list, evict in parallel with PodDisruptionBudget retries, wait for deletion). See each module.
"""

from __future__ import annotations

from pykured.drain.drainer import Drainer, DrainResult
from pykured.drain.filters import (
    DAEMONSET_WARNING,
    LOCAL_STORAGE_WARNING,
    MIRROR_ANNOTATION,
    UNMANAGED_WARNING,
    PodDelete,
    PodRef,
    PodSelection,
    PodSkip,
    select_pods,
)

__all__ = [
    "DAEMONSET_WARNING",
    "LOCAL_STORAGE_WARNING",
    "MIRROR_ANNOTATION",
    "UNMANAGED_WARNING",
    "DrainResult",
    "Drainer",
    "PodDelete",
    "PodRef",
    "PodSelection",
    "PodSkip",
    "select_pods",
]
