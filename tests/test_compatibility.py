"""COMPATIBILITY.md covers everything an operator can meet: every flag, every ``KURED_*`` variable, every
metric, every node annotation and every ``configuration.*`` value of kured's Helm chart.

The lists come from the code (``pykured.config.flags``, ``pykured.metrics``, ``pykured.cycle.state``,
``pykured.requests.record``, ``pykured.status.agent``, ``pykured.roll.record``,
``pykured.conditions.record``), so a new flag, metric or
annotation without a row fails
here. The chart keys are kured's Helm chart 6.1.0 ``values.yaml``. Each case is one parametrized test whose id
names the missing item.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

from pykured.conditions import record as conditionrecord
from pykured.config.flags import FLAGS
from pykured.cycle import state as nodeinfo
from pykured.metrics import Metrics
from pykured.requests import record as rebootrequest
from pykured.roll import record as rollrecord
from pykured.status import agent as agentstatus

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "COMPATIBILITY.md"

# kured's own annotations (``cmd/kured/main.go``, ``pkg/daemonsetlock``).
KURED_ANNOTATIONS = (
    "weave.works/kured-node-lock",
    "weave.works/kured-reboot-in-progress",
    "weave.works/kured-most-recent-reboot-needed",
)

# Every `configuration.*` value of the kured Helm chart 6.1.0 (``charts/kured/values.yaml``).
CHART_CONFIGURATION_KEYS = (
    "metricsHost",
    "metricsPort",
    "lockTtl",
    "lockReleaseDelay",
    "alertFilterRegexp",
    "alertFiringOnly",
    "alertFilterMatchOnly",
    "blockingPodSelector",
    "endTime",
    "lockAnnotation",
    "period",
    "forceReboot",
    "drainGracePeriod",
    "drainPodSelector",
    "drainDelay",
    "drainTimeout",
    "skipWaitForDeleteTimeout",
    "prometheusUrl",
    "rebootDays",
    "preRebootNodeLabels",
    "postRebootNodeLabels",
    "rebootSentinel",
    "useRebootSentinelHostPath",
    "rebootSentinelCommand",
    "rebootCommand",
    "rebootDelay",
    "rebootMethod",
    "rebootSignal",
    "slackChannel",
    "slackHookUrl",
    "slackUsername",
    "notifyUrl",
    "messageTemplateDrain",
    "messageTemplateReboot",
    "messageTemplateUncordon",
    "startTime",
    "timeZone",
    "annotateNodes",
    "preferNoScheduleTaint",
    "logFormat",
    "concurrency",
)


@cache
def doc() -> str:
    assert DOC.is_file(), f"{DOC.name} is missing at the repository root"
    return DOC.read_text(encoding="utf-8")


def _metric_names() -> list[str]:
    families = Metrics(process_collectors=False).registry.collect()
    return sorted({f.name for f in families if not f.name.startswith(("process_", "python_"))})


def _pykured_annotations() -> list[str]:
    values = {
        value
        for module in (nodeinfo, rebootrequest, agentstatus, rollrecord, conditionrecord)
        for value in vars(module).values()
        if isinstance(value, str)
        and value.startswith(nodeinfo.PYKURED_PREFIX)
        and value != nodeinfo.PYKURED_PREFIX
    }
    return sorted(values)


def test_lists_are_not_empty() -> None:
    assert len(FLAGS) >= 43
    assert "kured_reboot_required" in _metric_names()
    assert set(nodeinfo.STATE_ANNOTATIONS) <= set(_pykured_annotations())


@pytest.mark.parametrize("name", [spec.name for spec in FLAGS], ids=[f"--{spec.name}" for spec in FLAGS])
def test_flag_documented(name: str) -> None:
    # `--reboot-sentinel` must not be satisfied by `--reboot-sentinel-command`.
    assert re.search(rf"--{re.escape(name)}(?![\w-])", doc()), f"--{name} has no row in {DOC.name}"


@pytest.mark.parametrize("var", [spec.env_var for spec in FLAGS], ids=[spec.env_var for spec in FLAGS])
def test_env_var_documented(var: str) -> None:
    assert re.search(rf"\b{re.escape(var)}(?![A-Z0-9_])", doc()), f"{var} has no row in {DOC.name}"


@pytest.mark.parametrize("name", _metric_names())
def test_metric_documented(name: str) -> None:
    # Counters are exposed with `_total`, histograms with `_bucket`/`_sum`/`_count`; either form counts.
    pattern = rf"\b{re.escape(name)}(?:_total|_bucket|_sum|_count)?(?!\w)"
    assert re.search(pattern, doc()), f"metric {name} has no row in {DOC.name}"


@pytest.mark.parametrize("annotation", KURED_ANNOTATIONS + tuple(_pykured_annotations()))
def test_annotation_documented(annotation: str) -> None:
    assert re.search(rf"{re.escape(annotation)}(?![\w-])", doc()), f"{annotation} has no row in {DOC.name}"


@pytest.mark.parametrize(
    "key", CHART_CONFIGURATION_KEYS, ids=[f"configuration.{k}" for k in CHART_CONFIGURATION_KEYS]
)
def test_chart_configuration_key_documented(key: str) -> None:
    assert re.search(rf"configuration\.{re.escape(key)}(?!\w)", doc()), (
        f"chart value configuration.{key} has no row in {DOC.name}"
    )


CHECKED_COLUMN = "checked against the kured 1.23.0 binary"
CHECKED_VALUES = ("yes", "start-up: yes", "by reading", "n/a", "no")


def _tables() -> list[list[str]]:
    tables: list[list[str]] = []
    current: list[str] = []
    for line in doc().splitlines():
        if line.startswith("|"):
            current.append(line.rstrip())
        elif current:
            tables.append(current)
            current = []
    return [*tables, current] if current else tables


def _last_cell(row: str) -> str:
    return row.rstrip("|").rsplit("|", 1)[-1].strip()


def test_every_table_says_what_was_checked_against_the_kured_binary() -> None:
    """Each table's last column tells whether the row was run against kured 1.23.0's binary (the start-up
    differential, tests/config/test_startup_kured.py; the window oracle, tests/policy/test_weekly_kured.py) or
    settled by reading kured's source."""
    tables = _tables()
    assert len(tables) > 20
    for table in tables:
        assert _last_cell(table[0]) == CHECKED_COLUMN, table[0]
        assert set(_last_cell(table[1])) <= {"-", ":"}, table[1]
        for row in table[2:]:
            assert _last_cell(row).startswith(CHECKED_VALUES), row
