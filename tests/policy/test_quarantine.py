"""The quarantine record (``pykured.dev/quarantined``): bounded, read totally, garbled reads as quarantined
(the blocker that keeps a quarantined node from the lock: tests/blockers/test_quarantine.py)."""

from __future__ import annotations

import datetime
import json

import pytest

from pykured.policy.quarantine import (
    MAX_PODS,
    MAX_REASON,
    QUARANTINED_ANNOTATION,
    QuarantineRecord,
    quarantine_record,
)

NOW = datetime.datetime(2026, 12, 3, 2, 0, tzinfo=datetime.UTC)


def test_a_record_round_trips() -> None:
    record = QuarantineRecord.make(reason="drain timed out", at=NOW, pods=["ns/a", "ns/b"], cordoned=True)
    text = record.to_json()
    assert json.loads(text) == {
        "at": "2026-12-03T02:00:00Z", "cordoned": True, "pods": ["ns/a", "ns/b"], "reason": "drain timed out",
    }  # fmt: skip
    assert QuarantineRecord.from_json(text) == record
    assert record.describe() == (
        "quarantined at 2026-12-03T02:00:00Z: drain timed out (pods that would not leave: ns/a, ns/b)"
    )


def test_a_record_is_bounded_whatever_the_drain_left() -> None:
    pods = [f"namespace-{i}/" + "p" * 300 for i in range(500)]
    record = QuarantineRecord.make(reason="r" * 5000, at=NOW, pods=pods, cordoned=False)
    text = record.to_json()
    assert len(text) < 10_000, len(text)
    back = QuarantineRecord.from_json(text)
    assert back == record and len(back.pods) == MAX_PODS and back.more == 480
    assert len(back.reason) == MAX_REASON
    assert back.describe().endswith("and 495 more)") and len(back.describe()) < 1000


def _garbled(text: str) -> str:
    record = quarantine_record({QUARANTINED_ANNOTATION: text})
    assert record is not None and record.unreadable and not record.cordoned
    return record.unreadable


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "empty"),
        ("not json", "not JSON"),
        ("[" * 5000 + "]" * 5000, "nested deeper"),
        ("x" * 100_000, "more than"),
        ('["a"]', "not a JSON object"),
        ('{"at":"2026-12-03T02:00:00Z"}', "reason must be a string"),
        ('{"reason":"r","at":"yesterday"}', "at must be an RFC 3339 time"),
        ('{"reason":"r","at":"2026-12-03T02:00:00Z","pods":"ns/a"}', "pods must be a list"),
        ('{"reason":"r","at":"2026-12-03T02:00:00Z","pods":[1]}', "pods must be a list"),
        ('{"reason":"r","at":"2026-12-03T02:00:00Z","more":-1}', "more must be a count"),
        ('{"reason":"r","at":"2026-12-03T02:00:00Z","cordoned":"yes"}', "cordoned must be true or false"),
    ],
    ids=[
        "empty",
        "not-json",
        "deep",
        "huge",
        "list",
        "no-reason",
        "bad-time",
        "pods-text",
        "pods-ints",
        "negative-more",
        "cordoned-text",
    ],
)
def test_a_garbled_record_reads_as_quarantined(text: str, why: str) -> None:
    assert why in _garbled(text)


def test_no_record_is_no_quarantine() -> None:
    assert quarantine_record({}) is None
    assert quarantine_record({"pykured.dev/paused": "{}"}) is None


def test_an_unreadable_record_says_so() -> None:
    record = quarantine_record({QUARANTINED_ANNOTATION: "\x1b2J"})
    assert record is not None
    assert record.describe().startswith("quarantined: the quarantine record cannot be read (not JSON")
    assert record.describe().endswith("it holds until pykured unquarantine")
