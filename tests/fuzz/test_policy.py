"""The policy ConfigMap (pykured.policy.document), its freeze record (pykured.policy.freeze), its blackouts
(pykured.policy.blackout) and the failed-drain count beside them (pykured.halting.streak)."""

from __future__ import annotations

import contextlib
import datetime

from hypothesis import given
from hypothesis import strategies as st

from pykured.halting.streak import Streak
from pykured.policy.document import PolicyMapError, parse_policy_map
from pykured.policy.freeze import FreezeError, FreezeRecord
from tests.fuzz.hostile import FUZZ, any_text, hostile

FREEZE = {"reason": "INC-1", "by": "alice", "at": "2026-11-30T21:00:00Z", "until": "2026-12-30T21:00:00Z",
          "halted": "n1"}  # fmt: skip
NOW = datetime.datetime(2026, 11, 30, 21, 0, tzinfo=datetime.UTC)
ZONES = st.sampled_from([datetime.UTC, datetime.timezone(datetime.timedelta(hours=14)),
                         datetime.timezone(datetime.timedelta(hours=-12))])  # fmt: skip
blackout_lines = st.lists(
    st.one_of(
        hostile(),
        st.text(alphabet=st.sampled_from("0123456789-/T: #x"), max_size=40),
        st.just("9999-12-31T23:59/9999-12-31T23:59:59 end of time"),
        st.just("0001-01-01/0001-01-02 start of time"),
    ),
    max_size=5,
).map("\n".join)


@FUZZ
@given(hostile(FREEZE))
def test_a_freeze_record_parses_or_raises_freeze_error(text: str) -> None:
    with contextlib.suppress(FreezeError):  # anything else fails the test
        FreezeRecord.from_json(text)


@FUZZ
@given(
    st.fixed_dictionaries(
        {}, optional={"freeze": hostile(FREEZE), "halt": hostile(FREEZE), "blackouts": blackout_lines}
    ),
    st.dictionaries(any_text, any_text, max_size=2),
    ZONES,
)
def test_a_policy_map_parses_or_is_refused_and_a_freeze_never_goes_blind(
    data: dict[str, str], extra: dict[str, str], zone: datetime.tzinfo
) -> None:
    data = {**extra, **data}
    try:
        doc = parse_policy_map(data, zone=zone)
    except PolicyMapError as exc:
        doc = exc.doc
    if (data.get("freeze") or "").strip():
        assert doc.freeze is not None  # a freeze key is never read as no freeze
        if doc.freeze.unreadable:
            assert doc.freeze.active(NOW)
    if "halt" in data:  # a halt key, whatever it holds, halts
        assert doc.halt is not None and doc.in_force(NOW) is doc.halt


@FUZZ
@given(hostile({"count": 2, "last": "node-3: evicting"}))
def test_a_failed_drain_count_is_a_count(text: str) -> None:
    streak = Streak.parse(text)
    assert streak.count >= 0 and isinstance(streak.last, str)
