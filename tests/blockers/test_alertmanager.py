"""Tests for pykured.blockers.alertmanager: kured's filters on Alertmanager's alerts (the blocker against a
real Alertmanager: tests/e2e/alertmanager/test_gate.py)."""

from __future__ import annotations

import datetime

from pykured.alertmanager.api import Alert
from pykured.blockers.alertmanager import AlertmanagerAlertBlocker, blocking_names
from pykured.gocompat.goregexp import compile_re2

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
ALERTS = [
    Alert({"alertname": "GatekeeperViolations"}, "active"),
    Alert({"alertname": "PodCrashing-dev", "node": "a"}, "active"),
    Alert({"alertname": "PodCrashing-dev", "node": "b"}, "unprocessed"),
    Alert({"job": "no-name"}, "active"),
]


def test_names_are_distinct_sorted_and_need_an_alertname() -> None:
    names = blocking_names(ALERTS, regexp=None, match_only=False, firing_only=False)
    assert names == ["GatekeeperViolations", "PodCrashing-dev"]


def test_filters_as_for_prometheus() -> None:
    regexp = compile_re2("^Pod")
    assert blocking_names(ALERTS, regexp=regexp, match_only=False, firing_only=False) == [
        "GatekeeperViolations"
    ]
    assert blocking_names(ALERTS, regexp=regexp, match_only=True, firing_only=False) == ["PodCrashing-dev"]
    assert blocking_names(ALERTS, regexp=None, match_only=False, firing_only=True) == [
        "GatekeeperViolations",
        "PodCrashing-dev",
    ]


def test_an_unreachable_alertmanager_blocks() -> None:
    reason = AlertmanagerAlertBlocker("http://127.0.0.1:1", timeout=1).check(now=NOW)
    assert reason is not None and reason.kind == "alertmanager"
    assert reason.message.startswith("alertmanager query error: GET 'http://127.0.0.1:1/api/v2/alerts'")


def test_a_bad_url_blocks_without_showing_the_password() -> None:
    reason = AlertmanagerAlertBlocker("ftp://u:hunter2@host/x").check(now=NOW)
    assert reason is not None
    assert reason.message == "alertmanager query error: invalid Alertmanager URL 'ftp://host/x'"
