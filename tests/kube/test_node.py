"""Unit tests for pykured.kube.node: decoding Nodes and RFC 3339 handling."""

from __future__ import annotations

import datetime

import pytest

from pykured.core.times import format_rfc3339, parse_rfc3339
from pykured.kube.node import NodeView
from tests.fakes import sample_node

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


def test_decode_full_node() -> None:
    obj = sample_node(
        spec={"unschedulable": True, "taints": [{"key": "k", "effect": "NoSchedule", "value": "v"}]}
    )
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
    assert NodeView.from_obj(sample_node(status={"conditions": conditions})).ready is ready
