"""Tests for pykured.blockers.nodemarks and its flags' values (pykured.blockers.options.NodeMark): the pure
check, the parse, the blocker on a Node view or a GET."""

from __future__ import annotations

import datetime
from typing import Any, cast

import pytest

from pykured.blockers.nodemarks import NodeMarkBlocker, node_marks_block
from pykured.blockers.options import NodeMark
from pykured.core.errors import ConfigError, KubeError
from pykured.core.model import Reason
from pykured.kube.client import Kube

NOW = datetime.datetime(2026, 1, 1, 0, 0, 0, 500000, tzinfo=datetime.UTC)


# -- NodeMarkBlocker: the pure check ------------------------------------------------------------------------

HOLD = NodeMark("example.com/hold")
TIER_DB = NodeMark("tier", "db")


@pytest.mark.parametrize(
    ("labels", "annotations", "message"),
    [
        ({}, {}, None),
        ({"example.com/hold": ""}, {}, "node has blocking label example.com/hold"),
        ({"example.com/hold": "anything"}, {}, "node has blocking label example.com/hold"),
        ({"tier": "db"}, {}, "node has blocking label tier=db"),
        ({"tier": "web"}, {}, None),
        ({}, {"example.com/hold": "x"}, None),  # a label mark does not match an annotation
        ({}, {"ops/why": "disk"}, "node has blocking annotation ops/why=disk"),
        ({}, {"ops/why": "other"}, None),
        ({"tier": "db"}, {"ops/why": "disk"}, "node has blocking label tier=db"),
    ],
    ids=["none", "key-empty-value", "key-any-value", "key-value", "value-mismatch", "wrong-kind",
         "annotation", "annotation-mismatch", "label-first"],
)  # fmt: skip
def test_node_marks_block(labels: dict[str, str], annotations: dict[str, str], message: str | None) -> None:
    reason = node_marks_block(
        labels=labels,
        annotations=annotations,
        blocking_labels=[HOLD, TIER_DB],
        blocking_annotations=[NodeMark("ops/why", "disk")],
    )
    assert reason == (Reason("node", message) if message else None)


@pytest.mark.parametrize(
    ("text", "flag", "mark"),
    [
        ("hold", "blocking-node-label", NodeMark("hold")),
        ("example.com/hold=yes", "blocking-node-label", NodeMark("example.com/hold", "yes")),
        ("hold=", "blocking-node-label", NodeMark("hold", "")),
        ("ops/why=a=b c", "blocking-node-annotation", NodeMark("ops/why", "a=b c")),
    ],
)
def test_node_mark_parse(text: str, flag: str, mark: NodeMark) -> None:
    assert NodeMark.parse(text, flag=flag) == mark
    assert str(mark) == text


@pytest.mark.parametrize(
    "text",
    [
        "",
        "=v",
        "/k",
        "a/b/c",
        "UPPER.com/k",
        "k_",
        "-k",
        "k" * 64,
        ("a" * 254) + "/k",
        "k=v/w",
        "k=-v",
        "k=a b",
    ],
)
def test_node_mark_parse_refuses(text: str) -> None:
    with pytest.raises(ConfigError, match=r"^invalid --blocking-node-label ") as info:
        NodeMark.parse(text, flag="blocking-node-label")
    assert info.value.exit_code == 1


class _Kube:
    def __init__(self, obj: Any = None, error: KubeError | None = None) -> None:
        self.obj, self.error, self.gets = obj, error, 0

    def get_node(self, name: str) -> Any:
        self.gets += 1
        if self.error is not None:
            raise self.error
        return self.obj


def test_node_mark_blocker_reads_the_view_it_is_given_else_gets() -> None:
    node = {"metadata": {"name": "n1", "labels": {"example.com/hold": "1"}}}
    kube = _Kube(obj={"metadata": {"labels": {}}})
    viewed = NodeMarkBlocker(cast(Kube, kube), "n1", labels=[HOLD], annotations=[], read=lambda: node)
    assert viewed.check(now=NOW) == Reason("node", "node has blocking label example.com/hold")
    assert kube.gets == 0
    fetched = NodeMarkBlocker(cast(Kube, kube), "n1", labels=[HOLD], annotations=[])
    assert fetched.check(now=NOW) is None and kube.gets == 1


@pytest.mark.parametrize(
    "obj",
    [
        {},
        {"metadata": None},
        {"metadata": {"labels": ["example.com/hold"]}},
    ],
)
def test_node_mark_blocker_reads_a_malformed_node_as_unmarked(obj: Any) -> None:
    blocker = NodeMarkBlocker(cast(Kube, _Kube()), "n1", labels=[HOLD], annotations=[], read=lambda: obj)
    assert blocker.check(now=NOW) is None


def test_a_blocking_key_with_a_garbled_value_still_blocks() -> None:
    """Fail safe: the key is there; a value that is not a string reads as empty, and a key-only mark holds."""
    obj = {"metadata": {"labels": {"example.com/hold": 1}}}
    blocker = NodeMarkBlocker(cast(Kube, _Kube()), "n1", labels=[HOLD], annotations=[], read=lambda: obj)
    reason = blocker.check(now=NOW)
    assert reason is not None and reason.message == "node has blocking label example.com/hold"


def test_node_mark_blocker_blocks_when_the_node_cannot_be_read() -> None:
    kube = _Kube(error=KubeError("forbidden"))
    blocker = NodeMarkBlocker(cast(Kube, kube), "n1", labels=[HOLD], annotations=[])
    reason = blocker.check(now=NOW)
    assert reason is not None and reason.kind == "node"
    assert reason.message == "cannot read node n1 to check its blocking labels: forbidden"
