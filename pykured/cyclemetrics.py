"""The reboot cycle's metrics: its moments, gauged and counted for ``/metrics``.

Concept: the cycle announces its moments (:mod:`pykured.cycle.observers`) and :class:`CycleMetrics`, one
observer among the others, turns them into the agent's metrics (:class:`pykured.metrics.Metrics`): why a pass
is blocked (``pykured_blocked``), the lock's wait and holders (``pykured_lock_wait_seconds``,
``pykured_lock_wait_duration_seconds``, ``pykured_lock_holders``), the gate that holds the slot
(``pykured_lock_held_by_gate``), the drain's duration (``pykured_drain_duration_seconds``), a quarantine
(``pykured_quarantined``), each reboot's outcome (``pykured_reboots_total``) and the Zincati hand-off
(``pykured_handoff_state``). Every driver's cycle
registers it first (:func:`pykured.agent.wiring.build_observers`), so the metrics are the same for every
trigger and driver.

Invariants:
* It writes only to the process's own registry: no API request, nothing that can fail the cycle.
* ``lock_tried`` starts the wait's clock when the slot was not taken (and says ``lock`` blocks the pass);
  ``release_tried`` stops it, whether or not a slot was released.
"""

from __future__ import annotations

from pykured.cycle.observers import CycleObserver
from pykured.metrics import Metrics


class CycleMetrics(CycleObserver):
    """One node's cycle, as the agent's metrics see it (see the module docstring)."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def blocked(self, node: str, kind: str | None) -> None:
        self.metrics.set_blocked(kind)

    def lock_tried(self, node: str, backend: str, *, acquired: bool, holders: int) -> None:
        self.metrics.lock_waiting(not acquired)
        self.metrics.lock_holders(backend, holders)
        if not acquired:
            self.metrics.set_blocked("lock")

    def holding(self, node: str, kind: str | None) -> None:
        self.metrics.set_holding_gate(kind)

    def drain_timed(self, node: str, seconds: float) -> None:
        self.metrics.observe_drain(seconds)

    def quarantined(self, node: str) -> None:
        self.metrics.set_quarantined(node, True)

    def reboot_outcome(self, node: str, outcome: str) -> None:
        self.metrics.reboot(outcome)
        if outcome == "handoff":
            self.metrics.set_handoff("allowed")

    def withdrawn(self, node: str) -> None:
        self.metrics.set_handoff(None)

    def release_tried(self, node: str, *, released: bool) -> None:
        self.metrics.lock_waiting(False)

    def lock_counted(self, node: str, backend: str, holders: int) -> None:
        self.metrics.lock_holders(backend, holders)
