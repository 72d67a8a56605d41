"""A drain's progress (pure): refusals read, holds kept, the record written and read back as hostile input,
when to write it and when a drain is slow."""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest

from pykured.core import boundedjson
from pykured.drain import progress as p
from pykured.metrics import DRAIN_REASONS

T0 = datetime.datetime(2026, 3, 1, 12, 0, tzinfo=datetime.UTC)
PDB_MESSAGE = "Cannot evict pod as it would violate the pod's disruption budget. (HTTP 429)"
PDB_CAUSE = ("DisruptionBudget", "The disruption budget web-pdb needs 2 healthy pods and has 2 currently")


def at(seconds: float) -> datetime.datetime:
    return T0 + datetime.timedelta(seconds=seconds)


def hold(name: str, reason: str, since: float = 0, detail: str = "", ns: str = "apps") -> p.PodHold:
    return p.PodHold(ns, name, reason, at(since), detail)


def test_the_metric_labels_are_the_reasons() -> None:
    assert DRAIN_REASONS == p.REASONS


def test_a_budget_is_named_from_the_429s_causes_or_its_message() -> None:
    assert p.budget_name(PDB_MESSAGE, [PDB_CAUSE]) == "web-pdb"
    processing = (
        "Cannot evict pod as it would violate the pod's disruption budget. "
        "The disruption budget db is still being processed by the server."
    )
    assert p.budget_name(processing) == "db"
    assert p.budget_name(PDB_MESSAGE) == ""
    assert p.budget_name("The disruption budget \x1b[31mevil needs 1") == ""
    assert p.budget_name("x" * 1_000_000 + " The disruption budget late needs 1") == ""  # bounded scan


def test_refusals_are_read_by_kind() -> None:
    assert p.refusal(PDB_MESSAGE, too_many=True, webhook=False, causes=[PDB_CAUSE]) == (p.PDB, "web-pdb")
    assert p.refusal(PDB_MESSAGE, too_many=True, webhook=False) == (p.PDB, "")
    assert p.refusal("throttled (HTTP 429)", too_many=True, webhook=False) == (p.REFUSED, "throttled")
    text = 'admission webhook "x.example" denied the request: \x1b[2Jno\u202e\n way\x00 (HTTP 500)'
    reason, detail = p.refusal(text, too_many=False, webhook=True)
    assert (reason, detail) == (p.WEBHOOK, 'admission webhook "x.example" denied the request: [2Jno way')
    assert detail.isprintable()
    _, long = p.refusal("w " * 10_000, too_many=False, webhook=True)
    assert len(long) == p.MAX_DETAIL and long.endswith("…")


def test_a_pod_is_overdue_once_its_deletion_timestamp_passed() -> None:
    pod: dict[str, Any] = {"metadata": {"deletionTimestamp": "2026-03-01T12:00:10Z"}}
    assert p.overdue_since(pod, now=at(10)) is None
    assert p.overdue_since(pod, now=at(11)) == at(10)
    assert p.overdue_since({"metadata": {}}, now=at(11)) is None
    assert p.overdue_since({"metadata": {"deletionTimestamp": "soon"}}, now=at(11)) is None
    assert p.overdue_since({"metadata": ["x"]}, now=at(11)) is None


def test_a_hold_keeps_its_since_while_its_reason_stays() -> None:
    first = p.held(None, "apps", "web", p.PDB, "web-pdb", now=at(1))
    assert p.held(first, "apps", "web", p.PDB, "web-pdb", now=at(9)) is first
    assert p.held(first, "apps", "web", p.TERMINATING, "", now=at(9)).since == at(9)


def test_progress_names_the_held_first_bounded_and_counts_all() -> None:
    holds = [hold(f"e{i:02}", p.EVICTING) for i in range(20)] + [
        hold("t", p.TERMINATING), hold("b", p.PDB, detail="web-pdb"), hold("o", p.OVERDUE),
    ]  # fmt: skip
    value = p.progress(holds, started=T0)
    assert value.total == 23 and len(value.pods) == p.MAX_PODS
    assert [h.name for h in value.pods[:4]] == ["o", "b", "t", "e00"]
    assert value.counts == ((p.OVERDUE, 1), (p.PDB, 1), (p.TERMINATING, 1), (p.EVICTING, 20))
    assert value.count(p.WEBHOOK) == 0


def test_the_record_round_trips() -> None:
    value = p.progress([hold("b", p.PDB, 3, "web-pdb"), hold("w", p.WEBHOOK, 4, "denied: no")], started=T0)
    text = json.dumps(p.to_json(value))
    assert p.from_json(boundedjson.loads(text)) == value


@pytest.mark.parametrize(
    "data",
    [
        None, [], "x", 1, {}, {"since": "2026-03-01T12:00:00Z", "total": 1},
        {"since": "later", "total": 1, "pods": []},
        {"since": "2026-03-01T12:00:00Z", "total": True, "pods": []},
        {"since": "2026-03-01T12:00:00Z", "total": -1, "pods": []},
        {"since": "2026-03-01T12:00:00Z", "total": 1, "pods": {}},
    ],
)  # fmt: skip
def test_what_is_not_a_record_is_absent(data: Any) -> None:
    assert p.from_json(data) is None


def test_a_hostile_record_is_read_bounded() -> None:
    good = {"namespace": "apps", "name": "web", "reason": "pdb", "since": "2026-03-01T12:00:00Z"}
    pods: list[Any] = [
        "x", {**good, "reason": "bogus"}, {**good, "since": 5}, {**good, "name": ""},
        {**good, "name": "\x1b]0;title\x07" + "n" * 1000, "detail": "d\x1b[2J" * 500},
    ] + [good] * 100  # fmt: skip
    data = {"since": "2026-03-01T12:00:00Z", "total": 3, "pods": pods, "counts": {"pdb": "7", "webhook": 2}}
    value = p.from_json(data)
    assert value is not None
    assert len(value.pods) == p.MAX_PODS - 4 and value.total == len(value.pods)
    hostile = value.pods[0]
    assert len(hostile.name) <= p.MAX_NAME and hostile.name.isprintable()
    assert len(hostile.detail) <= p.MAX_DETAIL and hostile.detail.isprintable()
    assert value.counts == ((p.WEBHOOK, 2),)


def test_the_record_is_written_on_a_change_at_most_every_few_seconds_and_cleared_at_once() -> None:
    a = p.progress([hold("b", p.PDB)], started=T0)
    b = p.progress([hold("b", p.PDB), hold("c", p.EVICTING)], started=T0)
    assert not p.write_due(None, a, seen_for=4.9, since_write=None, every=5)  # a quick drain writes nothing
    assert p.write_due(None, a, seen_for=5, since_write=None, every=5)
    assert not p.write_due(a, a, seen_for=60, since_write=60, every=5)  # unchanged: no write
    assert not p.write_due(a, b, seen_for=60, since_write=1, every=5)  # changed, written a second ago
    assert p.write_due(a, b, seen_for=60, since_write=5, every=5)
    assert p.write_due(a, None, seen_for=60, since_write=0, every=5)  # the end: at once
    assert not p.write_due(
        None, None, seen_for=1, since_write=None, every=5
    )  # nothing written, nothing to clear
    empty = p.progress([], started=T0)
    assert not p.write_due(a, empty, seen_for=60, since_write=60, every=5)  # all gone: the end clears it


def test_a_slow_drain_is_told_once_then_only_when_it_changed() -> None:
    a = p.progress([hold("b", p.PDB, detail="web-pdb")], started=T0)
    b = p.progress([hold("b", p.OVERDUE)], started=T0)
    assert not p.slow_due(a, running=59, threshold=60, since_event=None, last_key=None)
    assert p.slow_due(a, running=60, threshold=60, since_event=None, last_key=None)
    key = p.slow_key(a)
    assert not p.slow_due(a, running=500, threshold=60, since_event=400, last_key=key)  # the same: no repeat
    assert not p.slow_due(b, running=100, threshold=60, since_event=40, last_key=key)  # changed, too soon
    assert p.slow_due(b, running=130, threshold=60, since_event=70, last_key=key)
    assert not p.slow_due(
        p.progress([], started=T0), running=500, threshold=60, since_event=None, last_key=None
    )


def test_the_slow_message_names_pods_reasons_and_times_bounded() -> None:
    denied = 'admission webhook "x" denied the request: no'
    holds = [hold("b", p.PDB, 0, "web-pdb"), hold("w", p.WEBHOOK, 30, denied), hold("o", p.OVERDUE, 200)]
    holds += [hold(f"e{i}", p.EVICTING) for i in range(30)]
    message = p.slow_message("node-1", p.progress(holds, started=T0), now=at(300))
    assert message.startswith("Drain of node node-1 is slow: running for 5m00s, waiting for 33 pods: ")
    assert "apps/o: terminating past its grace period (for 100s)" in message
    assert "apps/b: PodDisruptionBudget web-pdb (for 5m00s)" in message
    assert 'apps/w: admission webhook "x" denied the request: no (for 4m30s)' in message
    assert message.endswith("; and 23 more")
