"""Unit tests for pykured.nodeinfo: decoding Nodes, RFC 3339 handling and the state patch."""

from __future__ import annotations

import datetime

import pytest

from pykured import nodeinfo
from pykured.nodeinfo import KEEP, NodeView, format_rfc3339, parse_rfc3339, state_patch

UTC = datetime.UTC
T0 = datetime.datetime(2026, 6, 30, 11, 29, 16, tzinfo=UTC)


@pytest.mark.parametrize(
    ("moment", "expected"),
    [
        (T0, "2026-06-30T11:29:16Z"),
        (T0.replace(microsecond=999_999), "2026-06-30T11:29:16Z"),
        (
            datetime.datetime(2026, 6, 30, 13, 29, 16, tzinfo=datetime.timezone(datetime.timedelta(hours=2))),
            "2026-06-30T11:29:16Z",
        ),
        (datetime.datetime(2026, 6, 30, 11, 29, 16), "2026-06-30T11:29:16Z"),
    ],
    ids=["utc", "drops-fraction", "offset-converted", "naive-is-utc"],
)
def test_format_rfc3339(moment: datetime.datetime, expected: str) -> None:
    assert format_rfc3339(moment) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-06-30T11:29:16Z", T0),
        ("2026-06-30T13:29:16+02:00", T0),
        ("2026-06-30T11:29:16.123456789Z", T0.replace(microsecond=123456)),
        ("2026-06-30T11:29:16.5Z", T0.replace(microsecond=500000)),
        ("2026-06-30t11:29:16z", T0),
        ("2026-06-30 11:29:16Z", None),
        ("2026-06-30T11:29:16", None),
        ("yesterday", None),
        ("", None),
        ("2026-13-30T11:29:16Z", None),
    ],
    ids=[
        "z",
        "offset",
        "nanos",
        "short-fraction",
        "lowercase",
        "space",
        "no-zone",
        "garbage",
        "empty",
        "bad-month",
    ],
)
def test_parse_rfc3339(text: str, expected: datetime.datetime | None) -> None:
    assert parse_rfc3339(text) == expected


def _node(**overrides: object) -> dict[str, object]:
    node: dict[str, object] = {
        "metadata": {
            "name": "n1",
            "uid": "u-1",
            "resourceVersion": "42",
            "labels": {"a": "b"},
            "annotations": {},
        },
        "spec": {},
        "status": {
            "nodeInfo": {"bootID": "boot-1"},
            "conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": "True"},
            ],
        },
    }
    node.update(overrides)
    return node


def test_decode_full_node() -> None:
    obj = _node(spec={"unschedulable": True, "taints": [{"key": "k", "effect": "NoSchedule", "value": "v"}]})
    view = NodeView.from_obj(obj)
    assert (view.name, view.uid, view.resource_version) == ("n1", "u-1", "42")
    assert view.unschedulable is True
    assert view.boot_id == "boot-1"
    assert view.ready is True
    assert view.labels == {"a": "b"}
    assert [(t.key, t.effect, t.value) for t in view.taints] == [("k", "NoSchedule", "v")]
    assert view.has_taint("k", "NoSchedule") and not view.has_taint("k", "PreferNoSchedule")
    assert view.spec == obj["spec"]


@pytest.mark.parametrize(
    "obj",
    [
        {},
        {"metadata": None, "spec": "x", "status": []},
        {"metadata": {"annotations": {"a": 1}}, "spec": {"taints": "x"}},
    ],
    ids=["empty", "wrong-types", "garbled-fields"],
)
def test_decode_never_raises(obj: dict[str, object]) -> None:
    view = NodeView.from_obj(obj)
    assert view.name == "" and view.unschedulable is False and view.ready is False
    assert view.taints == () and view.annotations == {}


@pytest.mark.parametrize(
    ("conditions", "ready"),
    [
        ([{"type": "Ready", "status": "True"}], True),
        ([{"type": "Ready", "status": "Unknown"}], False),
        ([], False),
    ],
    ids=["true", "unknown", "absent"],
)
def test_ready(conditions: list[dict[str, str]], ready: bool) -> None:
    assert NodeView.from_obj(_node(status={"conditions": conditions})).ready is ready


@pytest.mark.parametrize(
    ("annotations", "attr", "expected"),
    [
        ({nodeinfo.IN_PROGRESS_ANNOTATION: "2026-06-30T11:29:16Z"}, "in_progress", True),
        ({nodeinfo.IN_PROGRESS_ANNOTATION: ""}, "in_progress", True),
        ({}, "in_progress", False),
        (
            {nodeinfo.MOST_RECENT_REBOOT_NEEDED_ANNOTATION: "2026-06-30T11:29:16Z"},
            "most_recent_reboot_needed",
            T0,
        ),
        ({nodeinfo.UNSCHEDULABLE_BEFORE_ANNOTATION: "true"}, "unschedulable_before", True),
        ({nodeinfo.UNSCHEDULABLE_BEFORE_ANNOTATION: "false"}, "unschedulable_before", False),
        ({nodeinfo.UNSCHEDULABLE_BEFORE_ANNOTATION: "maybe"}, "unschedulable_before", None),
        ({}, "unschedulable_before", None),
        ({nodeinfo.REBOOT_BOOT_ID_ANNOTATION: "abc"}, "reboot_boot_id", "abc"),
        ({nodeinfo.REBOOT_BOOT_ID_ANNOTATION: ""}, "reboot_boot_id", None),
        ({nodeinfo.REBOOT_TRIGGERED_AT_ANNOTATION: "2026-06-30T11:29:16Z"}, "reboot_triggered_at", T0),
        ({nodeinfo.RELEASE_AFTER_ANNOTATION: "2026-06-30T11:29:16Z"}, "release_after", T0),
        ({nodeinfo.RELEASE_AFTER_ANNOTATION: "soon"}, "release_after", None),
        ({}, "release_after", None),
        ({nodeinfo.REBOOT_ATTEMPTS_ANNOTATION: "3"}, "reboot_attempts", 3),
        ({nodeinfo.REBOOT_ATTEMPTS_ANNOTATION: "-1"}, "reboot_attempts", 0),
        ({nodeinfo.REBOOT_ATTEMPTS_ANNOTATION: "x"}, "reboot_attempts", 0),
    ],
    ids=[
        "in-progress",
        "in-progress-empty",
        "not-in-progress",
        "most-recent",
        "unsched-true",
        "unsched-false",
        "unsched-garbled",
        "unsched-absent",
        "boot-id",
        "boot-id-empty",
        "triggered-at",
        "release-after",
        "release-after-garbled",
        "release-after-absent",
        "attempts",
        "attempts-negative",
        "attempts-garbled",
    ],
)
def test_accessors(annotations: dict[str, str], attr: str, expected: object) -> None:
    view = NodeView.from_obj(_node(metadata={"name": "n1", "annotations": annotations}))
    assert getattr(view, attr) == expected


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({}, {}),
        ({"unschedulable_before": False}, {nodeinfo.UNSCHEDULABLE_BEFORE_ANNOTATION: "false"}),
        ({"unschedulable_before": True}, {nodeinfo.UNSCHEDULABLE_BEFORE_ANNOTATION: "true"}),
        ({"unschedulable_before": None}, {nodeinfo.UNSCHEDULABLE_BEFORE_ANNOTATION: None}),
        (
            {"reboot_boot_id": "b", "reboot_triggered_at": T0, "reboot_attempts": 2},
            {
                nodeinfo.REBOOT_BOOT_ID_ANNOTATION: "b",
                nodeinfo.REBOOT_TRIGGERED_AT_ANNOTATION: "2026-06-30T11:29:16Z",
                nodeinfo.REBOOT_ATTEMPTS_ANNOTATION: "2",
            },
        ),
        (
            {"release_after": T0, "reboot_boot_id": KEEP},
            {nodeinfo.RELEASE_AFTER_ANNOTATION: "2026-06-30T11:29:16Z"},
        ),
        (
            {
                k: None
                for k in (
                    "unschedulable_before",
                    "reboot_boot_id",
                    "reboot_triggered_at",
                    "release_after",
                    "reboot_attempts",
                )
            },
            dict.fromkeys(nodeinfo.STATE_ANNOTATIONS),
        ),
    ],
    ids=["nothing", "unsched-false", "unsched-true", "clear-one", "several", "keep-is-omitted", "clear-all"],
)
def test_state_patch(kwargs: dict[str, object], expected: dict[str, str | None]) -> None:
    assert state_patch(**kwargs) == expected  # type: ignore[arg-type]


def test_state_patch_round_trips_through_view() -> None:
    patch = state_patch(unschedulable_before=True, reboot_boot_id="b", release_after=T0, reboot_attempts=4)
    view = NodeView.from_obj({"metadata": {"annotations": patch}})
    assert (view.unschedulable_before, view.reboot_boot_id, view.release_after, view.reboot_attempts) == (
        True,
        "b",
        T0,
        4,
    )


def test_all_pykured_keys_share_the_prefix() -> None:
    assert all(k.startswith(nodeinfo.PYKURED_PREFIX) for k in nodeinfo.STATE_ANNOTATIONS)
    assert len(set(nodeinfo.STATE_ANNOTATIONS)) == 5
