"""Reboot requests bound to a boot: format, parse, classify (pure)."""

from __future__ import annotations

import datetime
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pykured.core import errors
from pykured.requests import record as rr
from tests.fakes import json_patch

NOW = datetime.datetime(2026, 11, 30, 21, 40, tzinfo=datetime.UTC)


def req(**kw: str) -> rr.RebootRequest:
    fields = {"boot_id": "boot-a", "reason": "kernel 6.12", "requested_by": "alice", "rollout": ""}
    fields.update(kw)
    return rr.make_request(now=NOW, **fields)


def test_format_is_compact_sorted_json_with_the_documented_keys() -> None:
    text = rr.format_request(req())
    assert text == (
        '{"bootID":"boot-a","reason":"kernel 6.12",'
        '"requestedAt":"2026-11-30T21:40:00Z","requestedBy":"alice"}'
    )
    with_rollout = json.loads(rr.format_request(req(rollout="r20261130-214000-ab12")))
    assert with_rollout["rollout"] == "r20261130-214000-ab12"


def test_round_trip() -> None:
    original = req(rollout="r1")
    assert rr.parse_request(rr.format_request(original)) == original


@given(reason=st.text(max_size=400), boot=st.text(min_size=1, max_size=40), who=st.text(max_size=40))
def test_round_trip_any_text(reason: str, boot: str, who: str) -> None:
    original = rr.make_request(boot_id=boot, reason=reason, requested_by=who, now=NOW)
    parsed = rr.parse_request(rr.format_request(original))
    assert parsed == original
    assert "\n" not in parsed.reason and len(parsed.reason) <= rr.MAX_REASON


def test_reason_is_one_trimmed_line() -> None:
    assert req(reason="  kernel\n 6.12\t args ").reason == "kernel 6.12 args"
    assert len(req(reason="x" * 1000).reason) == rr.MAX_REASON


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "not JSON"),
        ("[1]", "not a JSON object"),
        ('{"requestedAt":"2026-11-30T21:40:00Z"}', "bootID is missing"),
        ('{"bootID":"a"}', "requestedAt is missing"),
        ('{"bootID":"a","requestedAt":"yesterday"}', "not an RFC 3339 time"),
        ('{"bootID":1,"requestedAt":"2026-11-30T21:40:00Z"}', "bootID is not a string"),
        ('{"bootID":"a","requestedAt":"2026-11-30T21:40:00Z","rollout":"Bad Id"}', "invalid rollout id"),
        (
            '{"bootID":"a","requestedAt":"2026-11-30T21:40:00Z","requestedBy":"mallory","requestedBy":"alice"}',
            "a key appears twice",
        ),
    ],
)
def test_parse_errors_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        rr.parse_request(text)


def test_make_request_refuses_a_node_without_boot_id() -> None:
    with pytest.raises(ValueError, match="no bootID"):
        req(boot_id="")


def request_annotations(r: rr.RebootRequest) -> dict[str, str]:
    return {rr.REQUEST_ANNOTATION: rr.format_request(r), "other": "x"}


def test_classify_none() -> None:
    result = rr.classify({"other": "x"}, "boot-a", now=NOW)
    assert result.state is rr.RequestState.NONE and not result.pending and not result.cleanup


def test_classify_pending_for_the_current_boot() -> None:
    result = rr.classify(request_annotations(req()), "boot-a", now=NOW + datetime.timedelta(minutes=5))
    assert result.state is rr.RequestState.PENDING and result.pending and not result.cleanup
    assert result.request is not None and result.request.reason == "kernel 6.12"
    assert "5m ago by alice" in result.why


def test_classify_satisfied_when_the_node_left_the_requested_boot() -> None:
    result = rr.classify(request_annotations(req()), "boot-b", previous_boot_ids=("boot-a",), now=NOW)
    assert result.state is rr.RequestState.SATISFIED and result.cleanup and not result.pending
    assert "boot-a -> boot-b" in result.why


def test_classify_stale_for_an_unknown_boot() -> None:
    result = rr.classify(
        request_annotations(req(boot_id="boot-old")), "boot-b", previous_boot_ids=("boot-a",), now=NOW
    )
    assert result.state is rr.RequestState.STALE and result.cleanup and not result.pending
    assert "boot-old" in result.why and "boot-b" in result.why


def test_classify_invalid_is_cleaned_and_never_acted_on() -> None:
    result = rr.classify({rr.REQUEST_ANNOTATION: "reboot please"}, "boot-a", now=NOW)
    assert result.state is rr.RequestState.INVALID and result.cleanup and not result.pending
    assert result.raw == "reboot please"


def test_classify_unbound_when_the_node_reports_no_boot_id() -> None:
    result = rr.classify(request_annotations(req()), "", now=NOW)
    assert result.state is rr.RequestState.UNBOUND and not result.cleanup and not result.pending


@given(current=st.text(max_size=8), asked=st.text(min_size=1, max_size=8), prev=st.lists(st.text(max_size=8)))
def test_only_the_current_boot_is_ever_pending(current: str, asked: str, prev: list[str]) -> None:
    result = rr.classify(request_annotations(req(boot_id=asked)), current, previous_boot_ids=prev, now=NOW)
    assert result.pending == (bool(current) and asked == current)


def test_same_intent_ignores_who_and_when() -> None:
    a = req()
    b = rr.make_request(
        boot_id="boot-a", reason="kernel 6.12", requested_by="bob", now=NOW + datetime.timedelta(1)
    )
    assert a.same_intent(b)
    assert not a.same_intent(req(reason="other"))
    assert not a.same_intent(req(rollout="r1"))


def test_bind_patch_tests_the_boot_id_before_writing() -> None:
    ops = rr.bind_patch(req(), has_annotations=True)
    assert ops[0] == {"op": "test", "path": "/status/nodeInfo/bootID", "value": "boot-a"}
    assert ops[1]["path"] == "/metadata/annotations/pykured.dev~1reboot-request"
    bare = rr.bind_patch(req(), has_annotations=False)
    assert bare[1]["path"] == "/metadata/annotations" and rr.REQUEST_ANNOTATION in bare[1]["value"]


def test_a_request_replacing_a_satisfied_one_writes_its_record_in_the_same_patch() -> None:
    """The request read is tested (a newer one, or the agent's settling, makes it fail: HTTP 422) and the
    satisfied record of the one replaced is written with the new request, so neither is ever lost."""
    first = req()
    raw = rr.format_request(first)
    record = rr.satisfied_record(first, new_boot_id="boot-b", now=NOW)
    second = req(boot_id="boot-b")
    node = {
        "metadata": {"annotations": {rr.REQUEST_ANNOTATION: raw}},
        "status": {"nodeInfo": {"bootID": "boot-b"}},
    }
    ops = rr.bind_patch(second, has_annotations=True, replacing=raw, satisfied=record)
    after = json_patch(node, ops)["metadata"]["annotations"]
    assert rr.parse_request(after[rr.REQUEST_ANNOTATION]) == second
    assert rr.parse_satisfied(after[rr.SATISFIED_ANNOTATION]).request == first
    settled = {"metadata": {"annotations": {}}, "status": {"nodeInfo": {"bootID": "boot-b"}}}
    with pytest.raises(errors.KubeError) as failed:  # the agent removed it meanwhile: read again
        json_patch(settled, ops)
    assert failed.value.status == 422
    stale = rr.bind_patch(second, has_annotations=True, replacing=raw)  # not satisfied: replaced, no record
    assert rr.SATISFIED_ANNOTATION not in json_patch(node, stale)["metadata"]["annotations"]


def test_satisfy_patch_removes_only_the_request_it_read() -> None:
    raw = rr.format_request(req())
    record = rr.satisfied_record(req(), new_boot_id="boot-b", now=NOW)
    ops = rr.satisfy_patch(raw, record)
    assert ops[0] == {"op": "test", "path": "/metadata/annotations/pykured.dev~1reboot-request", "value": raw}
    assert ops[1]["op"] == "remove" and ops[2]["value"] == record
    done = rr.parse_satisfied(record)
    assert done.new_boot_id == "boot-b" and done.request == req() and done.satisfied_at == NOW


def test_rollout_ids() -> None:
    rid = rr.new_rollout_id(NOW, "AB12")
    assert rid == "r20261130-214000-ab12" and rr.valid_rollout_id(rid)
    assert (
        not rr.valid_rollout_id("Has Space") and not rr.valid_rollout_id("-x") and not rr.valid_rollout_id("")
    )


@pytest.mark.parametrize(
    ("seconds", "future", "text"),
    [
        (0, "in the future", "0s ago"),
        (119, "in the future", "119s ago"),
        (120, "in the future", "2m ago"),
        (7200, "in the future", "2h ago"),
        (172800, "in the future", "2d ago"),
        (-5, "in the future", "in the future"),
        (-5, "0s ago", "0s ago"),
    ],
)
def test_ago(seconds: int, future: str, text: str) -> None:
    assert rr.ago(NOW, NOW - datetime.timedelta(seconds=seconds), future=future) == text
