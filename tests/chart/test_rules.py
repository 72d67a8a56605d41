"""The shipped alerting rules (charts/pykured/rules/pykured.rules.yaml): ``promtool check rules``, ``promtool
test rules`` on their unit tests (pykured.rules.test.yaml, beside this file), every rule both firing and quiet
there, and the chart's optional PrometheusRule carrying exactly the file's groups."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from pykured_dev.testenv.prometheus import find_prometheus
from tests.chart.test_pykured_chart import CHART, by_key, render

RULES = CHART / "rules" / "pykured.rules.yaml"
UNIT_TESTS = Path(__file__).with_name("pykured.rules.test.yaml")

pytestmark = [pytest.mark.prometheus, pytest.mark.reference]  # promtool; helm renders the chart


def promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(find_prometheus() / "promtool"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=cwd,
    )


def alerts() -> list[dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def test_promtool_checks_the_rules() -> None:
    done = promtool("check", "rules", str(RULES))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(alerts())} rules found" in done.stdout + done.stderr


def test_every_rule_is_an_alert_with_a_severity_and_a_summary() -> None:
    names = [rule.get("alert") for rule in alerts()]
    assert names and all(names) and len(set(names)) == len(names), names
    for rule in alerts():
        assert rule["labels"]["severity"] in ("info", "warning", "critical"), rule
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], rule


def test_the_unit_tests_of_the_rules_pass() -> None:
    done = promtool("test", "rules", str(UNIT_TESTS))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout + done.stderr


def test_every_rule_has_a_case_where_it_fires_and_one_where_it_does_not() -> None:
    cases = [
        check for test in yaml.safe_load(UNIT_TESTS.read_text())["tests"] for check in test["alert_rule_test"]
    ]
    for rule in alerts():
        mine = [c for c in cases if c["alertname"] == rule["alert"]]
        assert any(c["exp_alerts"] for c in mine), f"{rule['alert']}: no case where it fires"
        assert any(not c["exp_alerts"] for c in mine), f"{rule['alert']}: no case where it stays quiet"


def test_a_wrong_expectation_fails_the_unit_tests(tmp_path: Path) -> None:
    """The unit tests can fail: each firing expectation, emptied in turn, fails ``promtool test rules``."""
    doc = yaml.safe_load(UNIT_TESTS.read_text())
    doc["rule_files"] = [str(RULES)]
    firing = [
        (t, c) for t, test in enumerate(doc["tests"]) for c, check in enumerate(test["alert_rule_test"])
        if check["exp_alerts"]
    ]  # fmt: skip
    assert len(firing) >= len(alerts())
    for t, c in firing:
        broken = yaml.safe_load(yaml.safe_dump(doc))
        broken["tests"][t]["alert_rule_test"][c]["exp_alerts"] = []
        path = tmp_path / f"broken-{t}-{c}.yaml"
        path.write_text(yaml.safe_dump(broken))
        name = re.escape(doc["tests"][t]["name"])
        done = promtool("test", "rules", f"--run=^{name}$", str(path))  # only the broken case's group
        assert done.returncode != 0, (t, c, done.stdout)
        assert "FAILED" in done.stdout + done.stderr, (t, c, done.stdout)


def test_the_chart_renders_the_file_s_groups_as_a_prometheusrule(tmp_path: Path) -> None:
    assert not [o for o in render("pykured", None, tmp_path / "default") if o["kind"] == "PrometheusRule"]
    values = {"pykured": {"prometheusRule": {"enabled": True, "labels": {"release": "prometheus"}}}}
    ours = by_key(render("pykured", values, tmp_path / "on"))
    rule = ours[("PrometheusRule", "kured")]
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    assert rule["metadata"]["labels"]["app.kubernetes.io/name"] == "kured"
    assert "namespace" not in rule["metadata"]
    assert rule["spec"] == {"groups": yaml.safe_load(RULES.read_text())["groups"]}
    elsewhere = {"pykured": {"prometheusRule": {"enabled": True, "namespace": "monitoring"}}}
    placed = by_key(render("pykured", elsewhere, tmp_path / "ns"))[("PrometheusRule", "kured")]
    assert placed["metadata"]["namespace"] == "monitoring"
