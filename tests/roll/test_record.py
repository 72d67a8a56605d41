"""The roll's own record on the Node: its text, its total parse, the fallback to an older agent's status."""

from __future__ import annotations

import datetime

import pytest

from pykured.roll import record as rollrecord
from pykured.roll.order import Member
from pykured.status import agent as agentstatus

LAST = datetime.datetime(2026, 11, 28, 3, 0, tzinfo=datetime.UTC)
SINCE = datetime.datetime(2026, 11, 30, 9, 0, tzinfo=datetime.UTC)


def test_the_record_is_compact_json_without_absent_facts_and_reads_back() -> None:
    place = rollrecord.Place(last_reboot=LAST, waiting_since=SINCE)
    text = rollrecord.encode(place)
    assert text == '{"lastReboot":"2026-11-28T03:00:00Z","waitingSince":"2026-11-30T09:00:00Z"}'
    assert rollrecord.decode(text) == place
    assert rollrecord.encode(rollrecord.Place()) == "{}"
    assert rollrecord.decode("{}") == rollrecord.Place()
    assert place.member("node-a") == Member("node-a", last_reboot=LAST, waiting_since=SINCE)


@pytest.mark.parametrize(
    "text",
    [None, "", "{", "[]", '"x"', "null", '{"lastReboot":7,"waitingSince":["2026-11-30T09:00:00Z"]}'],
)
def test_an_unreadable_record_is_absent_or_without_facts(text: str | None) -> None:
    place = rollrecord.decode(text)
    assert place is None or place == rollrecord.Place()


def test_an_agent_that_predates_the_record_is_read_from_its_status() -> None:
    status = agentstatus.AgentStatus(boot_id="b", sentinel=True, last_reboot=LAST, waiting_since=SINCE)
    annotations = {agentstatus.STATUS_ANNOTATION: agentstatus.encode(status)}
    assert rollrecord.LEGACY_ANNOTATION == agentstatus.STATUS_ANNOTATION
    assert rollrecord.read(annotations) == rollrecord.Place(last_reboot=LAST, waiting_since=SINCE)
    assert rollrecord.read({}) is None


def test_the_roll_record_wins_over_the_status_and_an_unreadable_one_falls_back() -> None:
    status = agentstatus.AgentStatus(boot_id="b", sentinel=True, last_reboot=LAST, waiting_since=SINCE)
    own = rollrecord.Place(last_reboot=SINCE)
    annotations = {
        agentstatus.STATUS_ANNOTATION: agentstatus.encode(status),
        rollrecord.ROLL_ANNOTATION: rollrecord.encode(own),
    }
    assert rollrecord.read(annotations) == own
    annotations[rollrecord.ROLL_ANNOTATION] = "{broken"
    assert rollrecord.read(annotations) == rollrecord.Place(last_reboot=LAST, waiting_since=SINCE)
