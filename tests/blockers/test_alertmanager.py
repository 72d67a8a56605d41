"""Tests for pykured.blockers.alertmanager: kured's filters on Alertmanager's alerts, and which silences the
gate trusts (the blocker against a real Alertmanager: tests/e2e/alertmanager/test_gate.py)."""

from __future__ import annotations

import datetime

import pytest

from pykured.alertmanager.api import Alert, Silence
from pykured.alertmanager.silence import is_reboot_silence
from pykured.blockers.alertmanager import AlertmanagerAlertBlocker, Holding, blocking_names, holds
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


def test_an_alert_holds_unless_a_trusted_silence_covers_it() -> None:
    """Trusted: any silence but pykured's reboot silences; an unknown id is not trusted (fail safe)."""
    trusted = {"ops-1"}
    assert holds(Alert({"alertname": "A"}, "active"), trusted=trusted)
    assert not holds(Alert({"alertname": "A"}, "suppressed", ("ops-1",)), trusted=trusted)
    assert not holds(Alert({"alertname": "A"}, "suppressed", ("reboot-1", "ops-1")), trusted=trusted)
    assert holds(Alert({"alertname": "A"}, "suppressed", ("reboot-1",)), trusted=trusted)
    assert holds(Alert({"alertname": "A"}, "suppressed", ("gone",)), trusted=trusted)
    assert holds(Alert({"alertname": "A"}, "suppressed"), trusted=trusted)  # suppressed, by nothing named


@pytest.mark.parametrize(
    ("created_by", "comment", "ours"),
    [
        ("pykured", "pykured: node w-1 is rebooting; expired when it is back and settled", True),
        ("pykured", "pykured: node other-cluster-node is rebooting", True),
        ("pykured", "made by a test", False),
        ("ops", "pykured: node w-1 is rebooting", False),
        ("PYKURED", "pykured: node w-1", False),
    ],
)
def test_pykureds_reboot_silences_are_known_by_their_mark(created_by: str, comment: str, ours: bool) -> None:
    assert is_reboot_silence(Silence("id", created_by, comment, "active")) is ours


def test_the_message_names_the_alerts_held_only_by_reboot_silences() -> None:
    assert Holding(["A"], []).message() == "1 active alerts: [A] in Alertmanager"
    assert Holding(["A", "Down"], ["Down"]).message() == (
        "2 active alerts: [A Down] in Alertmanager ([Down] silenced only by pykured's reboot silences, "
        "which the gate does not trust)"
    )
