"""``--prefer-no-schedule-taint``: a node carries a PreferNoSchedule taint while it waits for its reboot.

Concept: kured taints a node that needs a reboot while another node holds the lock, so the scheduler prefers
other nodes for new pods, and removes the taint once no reboot is needed or the window closed (kured 1.23.0's
``pkg/taints/taints.go``); the cycle also removes it when the node is back from its reboot. With
``--prefer-no-schedule-early`` the decision (:func:`pykured.cycle.decide.decide`) calls a node waiting as
soon as it needs a reboot, not only once the lock is held by others.

:class:`WaitingTaint` is an observer of the cycle (:mod:`pykured.cycle.observers`): ``waiting`` adds the
taint, ``not_waiting`` and ``back`` remove it, ``marked`` says whether the Node carries it. The writes are
:class:`~pykured.kube.taints.PreferNoScheduleTaint`'s (guarded JSON Patches, idempotent).
"""

from __future__ import annotations

from pykured.cycle.observers import CycleObserver
from pykured.cycle.state import NodeState
from pykured.kube.taints import PreferNoScheduleTaint


class WaitingTaint(PreferNoScheduleTaint, CycleObserver):
    """The PreferNoSchedule taint of one node, put on and taken off at the cycle's moments."""

    def waiting(self, node: str) -> None:
        self.enable()

    def not_waiting(self, node: str) -> None:
        self.disable()

    def back(self, node: str) -> None:
        self.disable()

    def marked(self, view: NodeState) -> bool:
        return view.has_taint(self.key, self.effect)
