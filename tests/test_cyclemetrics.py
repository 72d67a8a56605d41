"""The cycle's metrics as an observer of its moments: each moment moves the metric it names (the moments are
told on every driver's path: tests/parity/, tests/agent/test_daemon.py, tests/fleetlock/test_service.py)."""

from __future__ import annotations

from pykured.cyclemetrics import CycleMetrics
from pykured.metrics import Metrics


def value(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_each_moment_moves_its_metric() -> None:
    metrics = Metrics(process_collectors=False)
    observer = CycleMetrics(metrics)

    observer.blocked("n", "prometheus")
    assert value(metrics, "pykured_blocked", reason="prometheus") == 1
    observer.lock_tried("n", "lease", acquired=False, holders=2)
    assert value(metrics, "pykured_blocked", reason="lock") == 1
    assert value(metrics, "pykured_blocked", reason="prometheus") == 0
    assert value(metrics, "pykured_lock_holders", backend="lease") == 2
    assert value(metrics, "pykured_lock_wait_duration_seconds_count") == 0  # the clock runs
    observer.blocked("n", None)
    assert value(metrics, "pykured_blocked", reason="none") == 1
    observer.lock_tried("n", "lease", acquired=True, holders=1)
    assert value(metrics, "pykured_lock_wait_duration_seconds_count") == 1  # the wait observed once
    assert value(metrics, "pykured_lock_holders", backend="lease") == 1

    observer.holding("n", "settle-pods-ready")
    assert value(metrics, "pykured_lock_held_by_gate", gate="settle-pods-ready") == 1
    observer.holding("n", None)
    assert value(metrics, "pykured_lock_held_by_gate", gate="none") == 1

    observer.drain_timed("n", 3.5)
    assert value(metrics, "pykured_drain_duration_seconds_sum") == 3.5
    observer.quarantined("n")
    assert value(metrics, "pykured_quarantined", node="n") == 1

    observer.reboot_outcome("n", "handoff")
    assert value(metrics, "pykured_reboots_total", outcome="handoff") == 1
    assert value(metrics, "pykured_handoff_state", state="allowed") == 1
    observer.withdrawn("n")
    assert value(metrics, "pykured_handoff_state", state="none") == 1
    for outcome in ("triggered", "failed", "completed"):
        observer.reboot_outcome("n", outcome)
        assert value(metrics, "pykured_reboots_total", outcome=outcome) == 1

    observer.lock_tried("n", "annotation", acquired=False, holders=1)
    observer.release_tried("n", released=False)  # stops the wait's clock either way
    assert value(metrics, "pykured_lock_wait_duration_seconds_count") == 2
    observer.lock_counted("n", "annotation", 0)
    assert value(metrics, "pykured_lock_holders", backend="annotation") == 0
