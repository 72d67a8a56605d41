"""Tests for pykured.blockers.base: kured's Test_rebootBlocked, and how a node's blocker reads its Node."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from pykured.blockers.base import Blocker, NodeMarks, first_block, read_node_marks
from pykured.blockers.nodemarks import NodeMarkBlocker
from pykured.blockers.options import NodeMark
from pykured.blockers.pause import PauseBlocker
from pykured.blockers.prometheus import PrometheusAlertBlocker
from pykured.blockers.quarantine import QuarantineBlocker
from pykured.core.errors import KubeError
from pykured.core.model import Reason

NOW = datetime.datetime(2026, 1, 1, 0, 0, 0, 500000, tzinfo=datetime.UTC)


# -- kured's Test_rebootBlocked -----------------------------------------------------------------------------


@dataclass
class FixedBlocker:
    blocked: bool
    name: str = "fixed"
    calls: list[datetime.datetime] = field(default_factory=list)

    def check(self, *, now: datetime.datetime) -> Reason | None:
        self.calls.append(now)
        return Reason(self.name, f"{self.name} blocks") if self.blocked else None


@pytest.mark.parametrize(
    ("make", "expected_kind"),
    [
        (list, None),
        (lambda: [FixedBlocker(True)], "fixed"),
        (lambda: [FixedBlocker(False)], None),
        (lambda: [FixedBlocker(False), FixedBlocker(True, "second")], "second"),
        (lambda: [PrometheusAlertBlocker("http://127.0.0.1:1/broken", timeout=5)], "prometheus"),
    ],
    ids=["no-blockers", "blocker", "non-blocker", "one-of-two", "prometheus-broken-url"],
)
def test_reboot_blocked(make: Callable[[], list[Blocker]], expected_kind: str | None) -> None:
    reason = first_block(make(), now=NOW)
    assert (reason.kind if reason else None) == expected_kind


def test_first_block_wins_and_stops() -> None:
    first, second = FixedBlocker(True, "first"), FixedBlocker(True, "second")
    assert first_block([first, second], now=NOW) == Reason("first", "first blocks")
    assert (len(first.calls), len(second.calls)) == (1, 0)


# -- what a node's blocker reads of its Node ----------------------------------------------------------------


class NoKube:
    """A read is always given: a GET would be a mistake."""

    def get_node(self, name: str) -> dict[str, Any]:
        raise AssertionError(f"GET {name}")


@pytest.mark.parametrize(
    ("obj", "marks"),
    [
        ({}, NodeMarks({}, {})),
        ({"metadata": []}, NodeMarks({}, {})),
        ([], NodeMarks({}, {})),
        ({"metadata": {"labels": "x", "annotations": None}}, NodeMarks({}, {})),
        (
            {"metadata": {"labels": {"a": "1", 2: "dropped"}, "annotations": {"k": {"deep": 1}, "s": "v"}}},
            NodeMarks({"a": "1"}, {"k": "", "s": "v"}),
        ),
    ],
    ids=["empty", "metadata-a-list", "not-an-object", "maps-of-other-types", "keys-and-values"],
)
def test_a_node_s_marks_are_read_totally(obj: Any, marks: NodeMarks) -> None:
    assert read_node_marks(cast(Any, NoKube()), "n1", lambda: obj) == marks


def test_every_node_blocker_blocks_on_a_failed_read_and_reads_a_garbled_node_safely() -> None:
    def fails() -> dict[str, Any]:
        raise KubeError("the API server is away")

    def garbled() -> dict[str, Any]:
        return cast(dict[str, Any], {"metadata": {"annotations": {"pykured.dev/quarantined": 7}}})

    kube = cast(Any, NoKube())
    made: list[Blocker] = [
        PauseBlocker(kube, "n1", read=fails),
        QuarantineBlocker(kube, "n1", read=fails),
        NodeMarkBlocker(
            kube, "n1", labels=[NodeMark.parse("x", flag="--blocking-node-label")], annotations=[], read=fails
        ),
    ]
    for blocker in made:
        reason = blocker.check(now=NOW)
        assert reason is not None and "cannot read node n1" in reason.message
    # a quarantine whose value is not a string still quarantines (fail safe); a pause of no text is none
    assert QuarantineBlocker(kube, "n1", read=garbled).check(now=NOW) is not None
    assert PauseBlocker(kube, "n1", read=garbled).check(now=NOW) is None
