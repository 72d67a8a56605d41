"""The records on a Node: the reboot request (pykured.requests.record), the agent's status
(pykured.status.agent), the roll's record (pykured.roll.record), the pause (pykured.policy.pause), and the
Node's cycle memory as the agent reads it (pykured.cycle.state)."""

from __future__ import annotations

import contextlib
import datetime

from hypothesis import given
from hypothesis import strategies as st

from pykured.cycle.state import STATE_ANNOTATIONS, NodeState
from pykured.policy.pause import PAUSED_ANNOTATION, paused_record
from pykured.requests import record as rr
from pykured.roll import record as rollrecord
from pykured.status import agent as agentstatus
from tests.fuzz.hostile import FUZZ, hostile

NOW = datetime.datetime(2026, 11, 30, 21, 40, tzinfo=datetime.UTC)
REQUEST = {"bootID": "b1", "reason": "kernel", "requestedAt": "2026-11-30T21:40:00Z", "requestedBy": "alice",
           "rollout": "r1", "newBootID": "b2", "satisfiedAt": "2026-11-30T22:40:00Z"}  # fmt: skip
STATUS = {"v": "0.1.0", "bootID": "b1", "step": "wait", "sentinel": True, "request": "x", "lastCycle": 30,
          "windowOpens": "2026-12-01T02:00:00Z", "lockHolders": ["a"], "blockedBy": "y"}  # fmt: skip
ROLL = {"lastReboot": "2026-11-30T21:40:00Z", "waitingSince": "2026-11-30T23:10:00Z"}
PAUSE = {"reason": "disk", "by": "alice", "at": "2026-11-30T21:40:00Z", "until": "2026-12-30T21:40:00Z"}


@FUZZ
@given(hostile(REQUEST))
def test_a_reboot_request_parses_or_is_invalid(text: str) -> None:
    try:
        req = rr.parse_request(text)
        assert len(req.reason) <= rr.MAX_REASON and len(req.requested_by) <= rr.MAX_REASON
    except ValueError:
        pass
    with contextlib.suppress(ValueError):
        rr.parse_satisfied(text)
    found = rr.classify({rr.REQUEST_ANNOTATION: text}, "b1", previous_boot_ids=("b0",), now=NOW)
    assert found.state is not rr.RequestState.NONE and found.raw == text


@FUZZ
@given(hostile(STATUS))
def test_a_status_parses_or_is_unreadable(text: str) -> None:
    try:
        parsed: agentstatus.AgentStatus | None = agentstatus.parse(text)
    except ValueError:
        parsed = None
    assert agentstatus.decode(text) == parsed
    assert isinstance(agentstatus.reported_boot_ids({agentstatus.STATUS_ANNOTATION: text}), tuple)


@FUZZ
@given(hostile(ROLL), hostile(STATUS))
def test_a_roll_record_is_a_place_or_absent(own: str, legacy: str) -> None:
    place = rollrecord.read({rollrecord.ROLL_ANNOTATION: own, rollrecord.LEGACY_ANNOTATION: legacy})
    assert place is None or isinstance(place, rollrecord.Place)


@FUZZ
@given(hostile(PAUSE))
def test_a_pause_is_a_record_or_a_pause_that_holds(text: str) -> None:
    record = paused_record({PAUSED_ANNOTATION: text})
    if text.strip():
        assert record is not None and (record.unreadable == "" or record.active(NOW))


@FUZZ
@given(
    st.dictionaries(st.sampled_from(sorted(STATE_ANNOTATIONS)), hostile(), max_size=len(STATE_ANNOTATIONS))
)
def test_the_cycle_memory_reads_as_values_or_absent(annotations: dict[str, str]) -> None:
    view = NodeState.from_obj({"metadata": {"name": "n", "annotations": annotations}})
    names = ("unschedulable_before", "reboot_boot_id", "reboot_triggered_at", "release_after",
             "reboot_attempts", "backoff_until", "fleetlock_id", "most_recent_reboot_needed",
             "has_memory")  # fmt: skip
    for name in names:
        getattr(view, name)
