"""The agent's wiring in process (the agent as the DaemonSet runs it, FleetLock beside the daemon:
``tests/e2e/test_wiring.py``)."""

from __future__ import annotations

from pykured.agent import wiring
from pykured.alertmanager.gate import AlertmanagerAlertBlocker
from pykured.blockers import PrometheusAlertBlocker
from pykured.config.startup import parse
from pykured.cycle.state import FLEETLOCK_ID_ANNOTATION as FLEETLOCK_ANNOTATION
from pykured.fleetlock import FLEETLOCK_ID_ANNOTATION


def test_daemon_and_fleetlock_agree_on_the_hands_off_annotation() -> None:
    assert FLEETLOCK_ANNOTATION == FLEETLOCK_ID_ANNOTATION


HANDED_OFF = "FleetLock (Zincati) runs this node's reboot cycle"


def test_alert_blockers_prometheus_then_alertmanager() -> None:
    """``--alertmanager-url`` alone, or after ``--prometheus-url`` (asked first, as kured asks it)."""
    base = ["--node-id=n", "--alert-filter-regexp=^Watchdog$"]
    assert wiring.build_prometheus_blockers(parse(base, {})) == []
    alone = wiring.build_prometheus_blockers(parse([*base, "--alertmanager-url=http://am:9093"], {}))
    assert [type(b) for b in alone] == [AlertmanagerAlertBlocker]
    both = wiring.build_prometheus_blockers(
        parse([*base, "--alertmanager-url=http://am:9093"], {"KURED_PROMETHEUS_URL": "http://prom:9090"})
    )
    assert [type(b) for b in both] == [PrometheusAlertBlocker, AlertmanagerAlertBlocker]
