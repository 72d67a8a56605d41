"""The real Prometheus of the tests (pykured_dev/testenv/prometheus.py): it starts, scrapes a target the test
controls, evaluates a rule from that target's value (pending, firing, resolved), logs the queries it
answers, rereads its rules, takes an Alertmanager in its configuration, and stops cleanly."""

from __future__ import annotations

from pathlib import Path

import pytest

from pykured_dev.eventually import eventually
from pykured_dev.testenv.prometheus import SEEN_WITHIN, Exporter, Prometheus

pytestmark = [pytest.mark.prometheus, pytest.mark.timeout(600)]  # its waits: SEEN_WITHIN

RULE = """groups:
  - name: t
    rules:
      - alert: KnobTurned
        expr: knob == 1
        for: 5s
        labels: {severity: warning}
"""


def test_scrape_rule_evaluation_reload_and_a_clean_stop(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULE)
    with Exporter() as target, Prometheus(tmp_path / "prom", rule_files=[rules]) as prom:
        target.set("knob", 0)
        prom.scrape("knobs", target.address, {"node": "n1"})
        assert eventually(lambda: prom.targets_up("knobs") == 1, timeout=90)
        assert eventually(lambda: bool(prom.query("knob == 0")), timeout=SEEN_WITHIN)
        (sample,) = prom.query("knob")
        labels = {"__name__": "knob", "job": "knobs", "instance": target.address, "node": "n1"}
        assert sample["metric"] == labels
        assert "knob" in prom.queries()  # the query log: what clients asked
        assert prom.alert_state("KnobTurned") is None

        target.set("knob", 1)
        assert eventually(lambda: prom.alert_state("KnobTurned") is not None, timeout=90)
        assert prom.alert_state("KnobTurned") == "pending"  # for: 5s has not passed at the first evaluation
        assert eventually(lambda: prom.alert_state("KnobTurned") == "firing", timeout=90)
        # the ALERTS series, committed by the evaluation just after the alerts API shows the new state
        assert eventually(lambda: bool(prom.query('ALERTS{alertname="KnobTurned",alertstate="firing"}')))

        target.set("knob", 0)
        assert eventually(lambda: prom.alert_state("KnobTurned") is None, timeout=90)

        rules.write_text(RULE.replace("KnobTurned", "KnobRenamed").replace("knob == 1", "knob == 0"))
        prom.reload()
        assert eventually(lambda: prom.alert_state("KnobRenamed") == "pending", timeout=90)
        proc = prom.proc
        assert proc is not None
    assert proc.popen.returncode == 0, proc.tail()  # SIGTERM: Prometheus closed its TSDB and exited


def test_the_configuration_names_the_alertmanagers(tmp_path: Path) -> None:
    prom = Prometheus(tmp_path, alertmanagers=["127.0.0.1:9093"])
    assert prom.config()["alerting"] == {
        "alertmanagers": [{"api_version": "v2", "static_configs": [{"targets": ["127.0.0.1:9093"]}]}]
    }
    with prom:
        config = prom.api("status/config")["yaml"]
        assert "127.0.0.1:9093" in config
    assert "alerting" not in Prometheus(tmp_path / "none").config()
