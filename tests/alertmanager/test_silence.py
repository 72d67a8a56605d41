"""Tests for pykured.alertmanager.silence and .record: the record on the Node, parsed whole and bounded, the
silence made for a node, and which record is a leftover to retry (the keeper on the real API server and a
real Alertmanager: tests/e2e/alertmanager/)."""

from __future__ import annotations

import datetime
import logging

import pytest

from pykured.alertmanager.record import SilenceRecord, leftover, parse_record, record_of
from pykured.alertmanager.silence import silence_spec
from pykured.cycle.state import NodeState

NOW = datetime.datetime(2026, 1, 1, 12, tzinfo=datetime.UTC)
IDENT = "6f9b4e2a-0b1c-4d5e-8f90-123456789abc"


def test_a_record_round_trips() -> None:
    record = SilenceRecord(IDENT, NOW)
    assert record.to_json() == f'{{"id":"{IDENT}","until":"2026-01-01T12:00:00Z"}}'
    assert parse_record(record.to_json()) == record
    obj = {"metadata": {"annotations": {"pykured.dev/silence": record.to_json()}}}
    assert record_of(obj) == record
    assert record_of({"metadata": {}}) is None
    assert record_of({"metadata": {"annotations": "x"}}) is None


@pytest.mark.parametrize(
    "text",
    ["", "[]", "{}", '{"id": 1, "until": "2026-01-01T12:00:00Z"}', f'{{"id": "{IDENT}", "until": "soon"}}',
     '{"id": "a/b", "until": "2026-01-01T12:00:00Z"}', "x" * 300, '{"id": {"id": {"id": {}}}}', 5,
     f'{{"id": "{IDENT}", "until": "2026-01-01T12:00:00Z", "expireDue": "later"}}',
     f'{{"id": "{IDENT}", "until": "2026-01-01T12:00:00Z", "expireDue": null}}'],
)  # fmt: skip
def test_a_bad_record_is_absent_with_one_line(text: object, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert parse_record(text) is None
    assert len(caplog.records) == 1 and "pykured.dev/silence" in caplog.records[0].getMessage()


def test_the_silence_for_a_node() -> None:
    spec = silence_spec(
        'node="{{.Node}}",sev!="page"', node="w-1", now=NOW, longest=datetime.timedelta(hours=2)
    )
    assert [str(m) for m in spec.matchers] == ['node="w-1"', 'sev!="page"']
    assert spec.starts == NOW and spec.ends == NOW + datetime.timedelta(hours=2)
    assert spec.created_by == "pykured" and "w-1" in spec.comment


def test_a_record_whose_expiry_failed_round_trips() -> None:
    record = SilenceRecord(IDENT, NOW).overdue(
        NOW - datetime.timedelta(minutes=5) + datetime.timedelta(microseconds=7)
    )
    assert record.due == NOW - datetime.timedelta(minutes=5)
    assert record.to_json() == (
        f'{{"id":"{IDENT}","until":"2026-01-01T12:00:00Z","expireDue":"2026-01-01T11:55:00Z"}}'
    )
    assert parse_record(record.to_json()) == record
    assert record.overdue(NOW) is record  # the first failure's moment is kept


def view(annotations: dict[str, str]) -> NodeState:
    return NodeState.from_obj({"metadata": {"name": "n", "annotations": annotations}})


def test_a_leftover_is_a_marked_record_or_one_without_a_cycle() -> None:
    running = SilenceRecord(IDENT, NOW)
    overdue = running.overdue(NOW)
    memory = {"pykured.dev/unschedulable-before": "false"}
    assert leftover(view({"pykured.dev/silence": running.to_json(), **memory})) is None  # its cycle runs
    assert leftover(view({"pykured.dev/silence": running.to_json()})) == running  # its cycle ended
    assert leftover(view({"pykured.dev/silence": overdue.to_json(), **memory})) == overdue
    assert leftover(view({"pykured.dev/silence": "{"})) is None
    assert leftover(view(memory)) is None
