"""Tests for pykured.alerts.filters: kured's alert filters on Prometheus' samples, the message, the filter's
RE2 syntax (the same filters on Alertmanager's alerts: ``tests/blockers/test_alertmanager.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from pykured.alerts.filters import alerts_message, compile_alert_filter, filter_alerts
from pykured.core.errors import ConfigError
from pykured.gocompat.goregexp import compile_re2
from tests.blockers.test_prometheus import alert


@pytest.mark.parametrize(
    ("samples", "regexp", "match_only", "firing_only", "expected"),
    [
        ([alert("A", value="0")], None, False, False, []),
        ([{"metric": {"__name__": "ALERTS"}, "value": [0, "1"]}], None, False, False, []),
        ([alert("B"), alert("A"), alert("B", severity="x")], None, False, False, ["A", "B"]),
        ([alert("A", value="NaN")], None, False, False, ["A"]),
        ([alert("PrometheusTargetDown")], "Down", True, False, ["PrometheusTargetDown"]),
        ([alert("PrometheusTargetDown")], "^Down$", True, False, []),
        ([alert("A", "pending"), alert("A")], None, False, True, ["A"]),
        ([alert("A", value="-1")], None, False, False, ["A"]),
    ],
    ids=[
        "zero-value-ignored",
        "no-alertname-ignored",
        "distinct-sorted",
        "nan-counts",
        "unanchored-search",
        "anchored",
        "firing-only-any-sample",
        "negative-counts",
    ],
)
def test_filter_alerts(
    samples: list[dict[str, Any]],
    regexp: str | None,
    match_only: bool,
    firing_only: bool,
    expected: list[str],
) -> None:
    pattern = compile_re2(regexp) if regexp is not None else None
    got = filter_alerts(samples, regexp=pattern, match_only=match_only, firing_only=firing_only)
    assert got == expected


@pytest.mark.parametrize(
    ("count", "message"),
    [
        (1, "1 active alerts: [a00]"),
        (10, "10 active alerts: [a00 a01 a02 a03 a04 a05 a06 a07 a08 a09]"),
        (12, "12 active alerts: [a00 a01 a02 a03 a04 a05 a06 a07 a08 a09 ...]"),
    ],
    ids=["one", "ten", "twelve-truncated"],
)
def test_alerts_message(count: int, message: str) -> None:
    assert alerts_message([f"a{i:02d}" for i in range(count)]) == message


@pytest.mark.parametrize(
    ("expression", "name", "matches"),
    [
        ("^RebootRequired$", "RebootRequired", True),
        ("(?i)reboot", "RebootRequired", True),
        (r"Required\z", "RebootRequired", True),
        (r"Reboot\z", "RebootRequired", False),
    ],
    ids=["anchored", "case-insensitive-flag", "re2-end-of-text", "re2-end-of-text-no-match"],
)
def test_compile_alert_filter(expression: str, name: str, matches: bool) -> None:
    assert (compile_alert_filter(expression).search(name) is not None) is matches


@pytest.mark.parametrize(
    "expression",
    ["*", "(?=x)", "(?!x)", "(?<=x)y", r"(a)\1", "("],
    ids=["star", "la", "nla", "lb", "backref", "paren"],
)
def test_compile_alert_filter_rejects_what_re2_rejects(expression: str) -> None:
    with pytest.raises(ConfigError, match="--alert-filter-regexp"):
        compile_alert_filter(expression)
