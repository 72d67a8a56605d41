"""Prometheus metrics: kured's ``kured_reboot_required{node}`` gauge and pykured's own, on ``/metrics``.

``registry`` defines them (:class:`Metrics`, and :class:`NullMetrics`, which records nothing),
``exposition`` serves ``/metrics`` as kured does, on the bounded ``listener``. This face names what the
agent's components use.
"""

from pykured.metrics.registry import BLOCK_REASONS, DRAIN_REASONS, REBOOT_OUTCOMES, Metrics, NullMetrics

__all__ = ["BLOCK_REASONS", "DRAIN_REASONS", "REBOOT_OUTCOMES", "Metrics", "NullMetrics"]
