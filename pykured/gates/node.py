"""The gates of one node's reboot cycle: the observer of its moments that holds it
(:mod:`pykured.cycle.observers`).

* ``hold`` at ``before-drain`` (:meth:`CycleGates.before_drain`) — after the lock is taken, before cordon and
  drain: the before-reboot hooks (:mod:`pykured.gates.hooks`), bounded by ``--reboot-hook-timeout``. On
  ``TIMED_OUT`` the cycle aborts.
* ``drain_starting`` (:meth:`CycleGates.note_drain`) — right before the drain: record the
  PodDisruptionBudgets covering the node's pods, for the PDB settle gate.
* ``hold`` at ``before-release`` (:meth:`CycleGates.before_release`) — the node is back and uncordoned and
  ``--lock-release-delay`` has passed: the after-reboot hooks (``--reboot-hook-timeout``), then the settle
  gates (:mod:`pykured.gates.settle`, ``--settle-timeout``). On ``TIMED_OUT`` the lock is released with a
  warning and an Event.
* ``begin`` (:meth:`CycleGates.start`) — a phase the hold found not begun: ask the hooks, or stamp the
  settle gates' start.
* ``forgetting`` (:meth:`CycleGates.clear`) — the cycle ended (released, aborted, given up): remove the hook
  marks.

Each phase's start is stamped on the Node (``pykured.dev/{before,after}-reboot-since``,
``pykured.dev/settle-since``), so the timeouts survive an agent restart. With nothing configured every call
is a no-op that answers ``OPEN`` without an API call.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pykured.core.model import GateResult, Reason, Verdict
from pykured.cycle.observers import CycleObserver
from pykured.gates.hooks import MERGE_PATCH, RebootHook, phase_since
from pykured.gates.phase import CycleGate, GatePhase, evaluate
from pykured.gates.settle import DRAINED_PDBS_ANNOTATION, record_drained_pdbs

if TYPE_CHECKING:
    from pykured.kube.api import KubeApi

SETTLE_SINCE_ANNOTATION = "pykured.dev/settle-since"
_OPEN = GateResult(Verdict.OPEN)


class CycleGates(CycleObserver):
    """Hooks and settle gates for one node (see the module docstring)."""

    def __init__(
        self,
        kube: KubeApi,
        *,
        node: str,
        before_annotations: Sequence[str] = (),
        after_annotations: Sequence[str] = (),
        hook_timeout: datetime.timedelta = datetime.timedelta(hours=1),
        settle_gates: Sequence[CycleGate] = (),
        settle_timeout: datetime.timedelta = datetime.timedelta(minutes=30),
        record_pdbs: bool = False,
    ) -> None:
        self._kube = kube
        self._node = node
        self.before = RebootHook(kube, node=node, phase="before", annotations=before_annotations)
        self.after = RebootHook(kube, node=node, phase="after", annotations=after_annotations)
        self.hook_timeout = hook_timeout
        self.settle = GatePhase("settle", tuple(settle_gates), settle_timeout)
        self.record_pdbs = record_pdbs

    def __bool__(self) -> bool:
        return bool(self.before or self.after or self.settle or self.record_pdbs)

    def _node_obj(self) -> Mapping[str, Any]:
        return self._kube.get_node(self._node)

    def _stamp(self, key: str, now: datetime.datetime) -> datetime.datetime:
        value = now.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        self._kube.patch_node(self._node, {"metadata": {"annotations": {key: value}}}, patch_type=MERGE_PATCH)
        return now.replace(microsecond=0)

    def _hook_phase(self, hook: RebootHook, node: Mapping[str, Any], now: datetime.datetime) -> GateResult:
        since = hook.since(node)
        if since is None:
            return GateResult(
                Verdict.WAIT, Reason(hook.name, f"asking the {hook.phase}-reboot hooks"), start=hook.phase
            )
        return evaluate(GatePhase(hook.name, (hook,), self.hook_timeout), node, since=since, now=now)

    def start(self, phase: str, now: datetime.datetime) -> None:
        """Begin a phase the evaluation found not begun: ask the hooks, or stamp the settle gates' start."""
        if phase == "before":
            self.before.begin(now)
        elif phase == "after":
            self.after.begin(now)
        elif phase == "settle":
            self._stamp(SETTLE_SINCE_ANNOTATION, now)

    def before_drain(self, now: datetime.datetime) -> GateResult:
        if not self.before:
            return _OPEN
        return self._hook_phase(self.before, self._node_obj(), now)

    def note_drain(self) -> list[str]:
        return record_drained_pdbs(self._kube, self._node) if self.record_pdbs else []

    def before_release(self, now: datetime.datetime) -> GateResult:
        if not (self.after or self.settle):
            return _OPEN
        node = self._node_obj()
        if self.after:
            result = self._hook_phase(self.after, node, now)
            if result.verdict is not Verdict.OPEN:
                return result
        if not self.settle:
            return _OPEN
        since = phase_since(node, SETTLE_SINCE_ANNOTATION)
        if since is None:
            return GateResult(Verdict.WAIT, Reason("settle", "starting the settle gates"), start="settle")
        return evaluate(self.settle, node, since=since, now=now)

    # -- the cycle's moments -----------------------------------------------------------------------------

    def hold(self, node: str, point: str, now: datetime.datetime) -> GateResult | None:
        if not self:
            return None
        return self.before_drain(now) if point == "before-drain" else self.before_release(now)

    def begin(self, node: str, phase: str, now: datetime.datetime) -> None:
        self.start(phase, now)

    def drain_starting(self, node: str) -> None:
        self.note_drain()

    def forgetting(self, node: str) -> None:
        self.clear()

    def clear(self) -> None:
        if not self:
            return
        if self.before:
            self.before.clear()
        if self.after:
            self.after.clear()
        annotations = {SETTLE_SINCE_ANNOTATION: None, DRAINED_PDBS_ANNOTATION: None}
        self._kube.patch_node(self._node, {"metadata": {"annotations": annotations}}, patch_type=MERGE_PATCH)
