"""Reboot hooks: other controllers approve a reboot before it happens and confirm the node after it.

The contract of the CoreOS/Flatcar update operators, on pykured's own keys. For the ``before`` phase (after
the lock is taken, before cordon and drain) the agent labels its Node ``pykured.dev/before-reboot=true``,
stamps ``pykured.dev/before-reboot-since`` and clears every annotation listed in
``--before-reboot-annotations``; each hook controller watches for the label, does its work and sets its
annotation to ``"true"``. When all are ``"true"`` the agent drains and reboots. The ``after`` phase is the
same with ``pykured.dev/after-reboot`` and ``--after-reboot-annotations``, once the node is back and
uncordoned, before the lock is released. The marks stay until the cycle ends (:meth:`RebootHook.clear`),
so an agent restarted mid-drain does not ask again. Timeouts: ``--reboot-hook-timeout`` (see
:mod:`pykured.gates.phase`): a before-reboot hook that never answers aborts the cycle (no reboot); an
after-reboot hook that never answers releases the lock with a warning and an Event.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pykured.core.model import Reason
from pykured.core.times import parse_rfc3339
from pykured.gocompat.gofmt import go_list

if TYPE_CHECKING:
    from pykured.kube.api import KubeApi

MERGE_PATCH = "application/merge-patch+json"
PHASES = ("before", "after")


def _stamp(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def phase_since(node: Mapping[str, Any], key: str) -> datetime.datetime | None:
    """The instant stored under annotation ``key`` (None when absent or unreadable)."""
    text = ((node.get("metadata") or {}).get("annotations") or {}).get(key)
    return parse_rfc3339(text) if text else None


class RebootHook:
    """One phase's hooks on one Node (a :class:`~pykured.gates.phase.CycleGate`)."""

    def __init__(self, kube: KubeApi, *, node: str, phase: str, annotations: Sequence[str]) -> None:
        if phase not in PHASES:
            raise ValueError(f"unknown hook phase {phase}")
        self._kube = kube
        self._node = node
        self.phase = phase
        self.annotations = tuple(annotations)
        self.name = f"{phase}-reboot-hooks"
        self.label = f"pykured.dev/{phase}-reboot"
        self.since_key = f"pykured.dev/{phase}-reboot-since"

    def __bool__(self) -> bool:
        return bool(self.annotations)

    def since(self, node: Mapping[str, Any]) -> datetime.datetime | None:
        return phase_since(node, self.since_key)

    def begin(self, now: datetime.datetime) -> datetime.datetime:
        """Ask the hooks: label the Node, stamp the start, clear the answers. Returns the start."""
        annotations: dict[str, str | None] = dict.fromkeys(self.annotations)
        annotations[self.since_key] = _stamp(now)
        patch = {"metadata": {"labels": {self.label: "true"}, "annotations": annotations}}
        self._kube.patch_node(self._node, patch, patch_type=MERGE_PATCH)
        return now.replace(microsecond=0)

    def check(self, node: Mapping[str, Any], now: datetime.datetime) -> Reason | None:
        current = (node.get("metadata") or {}).get("annotations") or {}
        missing = [a for a in self.annotations if current.get(a) != "true"]
        if missing:
            return Reason(self.name, f"waiting for {self.phase}-reboot hooks: {go_list(missing)}")
        return None

    def clear(self) -> None:
        """End of the cycle: remove the label, the stamp and the answers."""
        annotations: dict[str, str | None] = dict.fromkeys(self.annotations)
        annotations[self.since_key] = None
        patch = {"metadata": {"labels": {self.label: None}, "annotations": annotations}}
        self._kube.patch_node(self._node, patch, patch_type=MERGE_PATCH)
