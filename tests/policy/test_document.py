import datetime

import pytest

from pykured.policy.document import MAX_BLACKOUTS_CHARS, PolicyDoc, PolicyMapError, parse_policy_map
from pykured.policy.freeze import FreezeRecord

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
    assert refused.value.freeze is None


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
    assert refused.value.freeze == record
    with pytest.raises(PolicyMapError, match="key blackouts") as garbled:
        parse_policy_map({"blackouts": "next week", "freeze": "[" * 100}, zone=UTC)
    assert garbled.value.freeze is not None and garbled.value.freeze.unreadable
