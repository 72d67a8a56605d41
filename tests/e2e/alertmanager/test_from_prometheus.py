"""The whole chain on real servers: a rule that really fires in a real Prometheus is sent to a real
Alertmanager, the Alertmanager gate blocks on it, an operator's silence there lets the node go, and when the
rule resolves the alert leaves Alertmanager."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from pykured.blockers.alertmanager import AlertmanagerAlertBlocker
from pykured_dev.eventually import eventually
from pykured_dev.testenv.alertmanager import Alertmanager
from pykured_dev.testenv.prometheus import Exporter, Prometheus

pytestmark = pytest.mark.prometheus

RULE = """groups:
  - name: nodes
    rules:
      - alert: NodeDiskPressure
        expr: disk_pressure == 1
        labels: {severity: critical}
"""


def test_a_prometheus_rule_reaches_alertmanager_blocks_and_is_silenced(
    tmp_path: Path, alertmanager: Alertmanager
) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULE)
    am_target = f"127.0.0.1:{alertmanager.port}"
    with (
        Exporter() as target,
        Prometheus(tmp_path / "prometheus", rule_files=[rules], alertmanagers=[am_target]) as prom,
    ):
        target.set("disk_pressure", 0)
        prom.scrape("nodes", target.address)
        blocker = AlertmanagerAlertBlocker(alertmanager.url)

        def reason() -> str | None:
            found = blocker.check(now=datetime.datetime.now(datetime.UTC))
            return None if found is None else str(found)

        assert eventually(lambda: prom.targets_up("nodes") == 1, timeout=90)
        assert reason() is None

        target.set("disk_pressure", 1)  # the rule fires in Prometheus, which sends it to Alertmanager
        assert eventually(lambda: prom.alert_state("NodeDiskPressure") == "firing", timeout=90)
        blocked = "1 active alerts: [NodeDiskPressure] in Alertmanager"
        assert eventually(lambda: reason() == blocked, timeout=60)
        (alert,) = alertmanager.alerts()
        assert alert["labels"]["alertname"] == "NodeDiskPressure" and alert["labels"]["job"] == "nodes"

        alertmanager.silence({"alertname": "NodeDiskPressure"})  # the operator's silence lets the node go
        assert eventually(lambda: reason() is None, timeout=90)
        assert prom.alert_state("NodeDiskPressure") == "firing"  # still firing in Prometheus: only silenced

        target.set("disk_pressure", 0)  # resolved: Prometheus sends its end; the alert leaves Alertmanager
        assert eventually(lambda: prom.alert_state("NodeDiskPressure") is None, timeout=90)
        assert eventually(lambda: not alertmanager.call("GET", "alerts"), timeout=90)  # silenced ones too
        assert reason() is None
