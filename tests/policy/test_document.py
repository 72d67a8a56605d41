import datetime

import pytest

from pykured.policy.document import PolicyDoc, PolicyMapError, parse_policy_map
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
        ({"freeze": "{"}, "key freeze: freeze record is not JSON"),
    ],
)
def test_a_bad_map_is_refused_whole(data: dict[str, str], message: str) -> None:
    with pytest.raises(PolicyMapError, match=message):
        parse_policy_map(data, zone=UTC)
