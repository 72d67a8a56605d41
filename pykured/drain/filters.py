"""Which pods a drain removes: kubectl's drain filters as kured configures them, as pure functions.

Concept: kured's drain helper runs with ``Force``, ``DeleteEmptyDirData`` and ``IgnoreAllDaemonSets`` (kured
1.23.0's ``cmd/kured/main.go``, ``drain.Helper``). :func:`select_pods` applies the same filters to listed
pods; the caller looks up the owning DaemonSets first and passes the result in, so the decision itself does no
I/O and reads no clock.

Invariants:
* Filters run in kubectl's order and the first "do not delete" wins: deleted longer than
  ``skip_wait_for_delete_timeout`` seconds ago → skip; DaemonSet-controlled → skip (a DaemonSet that no longer
  exists → delete with a warning); mirror pod (``kubernetes.io/config.mirror``) → skip; emptyDir → delete
  with a warning; no controller → delete with a warning (Force).
* Succeeded/Failed pods never draw the emptyDir or no-controller warnings (they are always deletable).
* Warnings are grouped by message as kubectl prints them: ``ignoring DaemonSet-managed Pods: ns/a, ns/b``.
  Unlike kubectl, a pod keeps every warning that applies to it, not only the last one.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from pykured.core.model import Reason
from pykured.core.times import parse_rfc3339

DAEMONSET_WARNING = "ignoring DaemonSet-managed Pods"
LOCAL_STORAGE_WARNING = "deleting Pods with local storage"
UNMANAGED_WARNING = "deleting Pods that declare no controller"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


@dataclasses.dataclass(frozen=True, slots=True)
class PodRef:
    """A pod by namespace, name and UID."""

    namespace: str
    name: str
    uid: str = ""

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclasses.dataclass(frozen=True, slots=True)
class PodDelete:
    """A pod the drain removes, with the warnings kubectl prints about it."""

    pod: PodRef
    warnings: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class PodSkip:
    """A pod the drain leaves alone; ``reason.kind`` is ``deleted``, ``daemonset`` or ``mirror``."""

    pod: PodRef
    reason: Reason


class PodSelection(NamedTuple):
    """The outcome of the filters: what to evict, what to skip and why, and errors that stop the drain."""

    to_evict: tuple[PodDelete, ...]
    skipped: tuple[PodSkip, ...]
    errors: tuple[str, ...]

    def warning_text(self) -> str:
        """kubectl's grouped warning (``ignoring DaemonSet-managed Pods: a/b; …``), or ``""``."""
        groups: dict[str, list[str]] = {}
        for skip in self.skipped:
            if skip.reason.kind == "daemonset":
                groups.setdefault(DAEMONSET_WARNING, []).append(str(skip.pod))
        for delete in self.to_evict:
            for warning in delete.warnings:
                groups.setdefault(warning, []).append(str(delete.pod))
        return "; ".join(f"{msg}: {', '.join(pods)}" for msg, pods in sorted(groups.items()))


def pod_ref(pod: Mapping[str, Any]) -> PodRef:
    """The reference of a Pod dict."""
    meta = pod.get("metadata") or {}
    return PodRef(str(meta.get("namespace", "")), str(meta.get("name", "")), str(meta.get("uid", "")))


def _controller(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for owner in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(owner, dict) and owner.get("controller") is True:
            return owner
    return None


def daemonset_owner(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(namespace, name)`` of the DaemonSet controlling the pod, if one does."""
    owner = _controller(pod)
    if owner is None or owner.get("kind") != "DaemonSet":
        return None
    return pod_ref(pod).namespace, str(owner.get("name", ""))


def deleted_longer_than(pod: Mapping[str, Any], seconds: int, *, now: datetime.datetime) -> bool:
    """kubectl's skip test: ``seconds > 0`` and the pod's deletionTimestamp is more than ``seconds`` old."""
    stamp = (pod.get("metadata") or {}).get("deletionTimestamp")
    if seconds <= 0 or not isinstance(stamp, str):
        return False
    moment = parse_rfc3339(stamp)
    return moment is not None and int((now - moment).total_seconds()) > seconds


def select_pods(
    pods: Iterable[Mapping[str, Any]],
    *,
    now: datetime.datetime,
    skip_wait_for_delete_timeout: int = 0,
    missing_daemonsets: Collection[tuple[str, str]] = (),
    daemonset_errors: Mapping[tuple[str, str], str] | None = None,
) -> PodSelection:
    """Apply kubectl's drain filters (Force, DeleteEmptyDirData, IgnoreAllDaemonSets) to listed pods.

    DaemonSets are looked up by the caller: ``missing_daemonsets`` were not found (404),
    ``daemonset_errors`` could not be read; any other owning DaemonSet exists.
    """
    to_evict: list[PodDelete] = []
    skipped: list[PodSkip] = []
    failed: dict[str, list[str]] = {}
    for pod in pods:
        ref = pod_ref(pod)
        warnings: list[str] = []
        if deleted_longer_than(pod, skip_wait_for_delete_timeout, now=now):
            reason = f"deleted more than {skip_wait_for_delete_timeout}s ago"
            skipped.append(PodSkip(ref, Reason("deleted", reason)))
            continue
        owner = daemonset_owner(pod)
        if owner is not None:
            if daemonset_errors and owner in daemonset_errors:
                failed.setdefault(daemonset_errors[owner], []).append(str(ref))
                continue
            if owner not in missing_daemonsets:
                skipped.append(PodSkip(ref, Reason("daemonset", DAEMONSET_WARNING)))
                continue
            warnings.append(f'daemonsets.apps "{owner[1]}" not found')
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        if MIRROR_ANNOTATION in annotations:
            skipped.append(PodSkip(ref, Reason("mirror", "mirror pod")))
            continue
        finished = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        volumes = (pod.get("spec") or {}).get("volumes") or []
        if not finished and any(isinstance(v, dict) and "emptyDir" in v for v in volumes):
            warnings.append(LOCAL_STORAGE_WARNING)
        if not finished and _controller(pod) is None:
            warnings.append(UNMANAGED_WARNING)
        to_evict.append(PodDelete(ref, tuple(warnings)))
    errors_ = tuple(f"cannot delete {msg}: {', '.join(refs)}" for msg, refs in sorted(failed.items()))
    return PodSelection(tuple(to_evict), tuple(skipped), errors_)


def retry_delay_for(attempt: int, *, base: float, cap: float, jitter: float) -> float:
    """Delay before retry ``attempt`` (0-based): ``base`` doubling up to ``cap``, scaled by ``1 + jitter``."""
    if base <= 0:
        return 0.0
    return min(base * 2.0 ** min(attempt, 20), max(cap, base)) * (1.0 + jitter)


def aggregate(messages: Sequence[str]) -> str:
    """Go's ``utilerrors.NewAggregate`` text: one message as is, several as ``[a, b]``."""
    return messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]"
