import datetime

import pytest

from pykured.policy.document import MAX_BLACKOUTS_CHARS, PolicyDoc, PolicyMapError, parse_policy_map
from pykured.policy.freeze import FreezeRecord
from pykured.policy.halt import LiftedHalt

UTC = datetime.UTC


def test_empty_and_missing_are_an_empty_policy() -> None:
    assert parse_policy_map(None, zone=UTC) == PolicyDoc()
    assert parse_policy_map({}, zone=UTC) == PolicyDoc()
    assert parse_policy_map({"blackouts": "", "freeze": ""}, zone=UTC) == PolicyDoc()


def test_blackouts_and_freeze() -> None:
    record = FreezeRecord("INC-1", "alice", datetime.datetime(2026, 11, 30, tzinfo=UTC))
    doc = parse_policy_map(
        {"blackouts": "# year end\n2026-12-23T16:00/2027-01-02T10:00 year end\n", "freeze": record.to_json()},
        zone=UTC,
    )
    assert [b.reason for b in doc.blackouts] == ["year end"]
    assert doc.freeze == record


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"blackout": "2026-12-23/2026-12-24"}, "unknown key"),
        ({"blackouts": "next week"}, "key blackouts: invalid blackout"),
        ({"blackouts": "#" * (MAX_BLACKOUTS_CHARS + 1)}, "key blackouts: .* more than"),
    ],
)
def test_a_bad_map_is_refused_whole(data: dict[str, str], message: str) -> None:
    with pytest.raises(PolicyMapError, match=message) as refused:
        parse_policy_map(data, zone=UTC)
    assert refused.value.doc.freeze is None


@pytest.mark.parametrize("text", ["{", "[" * 2000, '{"at": 1}', '"frozen"', '{"reason": "x"}', "\ud800"])
def test_a_garbled_freeze_reads_as_frozen_not_absent(text: str) -> None:
    freeze = parse_policy_map({"freeze": text}, zone=UTC).freeze
    assert freeze is not None and freeze.unreadable
    assert freeze.active(datetime.datetime(2099, 1, 1, tzinfo=UTC))
    assert freeze.describe().startswith("frozen: the freeze record cannot be read (")


def test_a_refused_map_still_says_which_freeze_it_sets() -> None:
    record = FreezeRecord("INC-1", "alice", datetime.datetime(2026, 11, 30, tzinfo=UTC))
    with pytest.raises(PolicyMapError, match="unknown key") as refused:
        parse_policy_map({"blackout": "x", "freeze": record.to_json()}, zone=UTC)
    assert refused.value.doc.freeze == record
    with pytest.raises(PolicyMapError, match="key blackouts") as garbled:
        parse_policy_map({"blackouts": "next week", "freeze": "[" * 100, "halt": "{"}, zone=UTC)
    assert garbled.value.doc.freeze is not None and garbled.value.doc.freeze.unreadable
    assert garbled.value.doc.halt is not None and garbled.value.doc.halt.unreadable.startswith("key halt: ")


AT = datetime.datetime(2026, 11, 30, tzinfo=UTC)
LATER = datetime.datetime(2027, 1, 1, tzinfo=UTC)


def test_the_halt_is_its_own_key_and_holds_while_present() -> None:
    """An agent's halt goes under ``halt``, next to an operator's freeze; it holds whatever it says (even an
    ``until`` in the past), and before any freeze."""
    freeze = FreezeRecord("INC-1", "alice", AT, until=AT + datetime.timedelta(hours=1))
    halt = FreezeRecord("node n5 did not come back within 1h0m0s", "pykured on n1", AT, halted="n5",
                        began="2026-11-29T23:00:00Z")  # fmt: skip
    doc = parse_policy_map({"freeze": freeze.to_json(), "halt": halt.to_json()}, zone=UTC)
    assert (doc.freeze, doc.halt) == (freeze, halt)
    assert doc.in_force(AT) == halt == doc.in_force(LATER) == doc.shown()
    alone = parse_policy_map({"freeze": freeze.to_json()}, zone=UTC)
    assert alone.in_force(AT) == freeze and alone.in_force(LATER) is None and alone.shown() == freeze
    forged = FreezeRecord("x", "pykured on n2", AT, until=AT)
    assert parse_policy_map({"halt": forged.to_json()}, zone=UTC).in_force(LATER) == forged


@pytest.mark.parametrize("text", ["", "  ", "{", "[" * 2000, '"halt"', '{"reason": "x"}'])
def test_a_garbled_or_empty_halt_reads_as_halted(text: str) -> None:
    """Fail safe: a ``halt`` key that does not parse, or is empty, still halts (an empty one is no way for
    an agent to keep the key from a real halt)."""
    doc = parse_policy_map({"halt": text}, zone=UTC)
    assert doc.halt is not None and doc.halt.unreadable.startswith("key halt: ")
    assert doc.in_force(LATER) is doc.halt
    assert doc.halt.describe().startswith("frozen: the freeze record cannot be read (key halt: ")


def test_lifted_halts_are_read_and_garbled_ones_are_none() -> None:
    text = '[{"node":"n5","began":"2026-11-29T23:00:00Z"},{"node":7},"x",{"node":"n6","began":""}]'
    doc = parse_policy_map({"halts-lifted": text}, zone=UTC)
    assert doc.lifted == (LiftedHalt("n5", "2026-11-29T23:00:00Z"),)
    assert doc.in_force(AT) is None
    for garbled in ("{", "[" * 2000, '{"node":"n5"}', "x" * 20_000):
        assert parse_policy_map({"halts-lifted": garbled}, zone=UTC).lifted == ()
