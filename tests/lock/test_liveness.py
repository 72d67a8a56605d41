"""HolderLiveness: which holders are gone, how often they are checked, what is reported."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from pykured.core.errors import ForbiddenError, KubeError, NotFoundError
from pykured.lock.liveness import HolderLiveness
from pykured.lock.record import MANUAL_HOLDER, UNKNOWN_HOLDER, LockEntry


class FakeNodes:
    def __init__(self, answers: dict[str, Exception | None]) -> None:
        self.answers = answers
        self.calls: list[str] = []

    def get_node(self, name: str) -> dict[str, Any]:
        self.calls.append(name)
        answer = self.answers.get(name)
        if answer is not None:
            raise answer
        return {"metadata": {"name": name}}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def entries(*names: str) -> list[LockEntry]:
    return [LockEntry(n) for n in names]


@pytest.mark.parametrize(
    ("answer", "gone"),
    [
        (None, False),
        (NotFoundError("nodes not found", status=404), True),
        (ForbiddenError("forbidden", status=403), False),
        (KubeError("internal", status=500), False),
        (KubeError("timeout", status=0), False),
    ],
    ids=["exists", "404-gone", "403-kept", "500-kept", "timeout-kept"],
)
def test_only_a_definite_404_is_gone(answer: Exception | None, gone: bool) -> None:
    liveness = HolderLiveness(FakeNodes({"a": answer}))
    assert liveness.gone(entries("a"), exclude="me") == (frozenset({"a"}) if gone else frozenset())


def test_never_freed_holders_and_self_are_not_checked() -> None:
    nodes = FakeNodes({})
    liveness = HolderLiveness(nodes)
    assert liveness.gone(entries(MANUAL_HOLDER, UNKNOWN_HOLDER, "", "me"), exclude="me") == frozenset()
    assert nodes.calls == []


def test_each_holder_is_checked_at_most_once_per_interval() -> None:
    nodes, clock = FakeNodes({}), Clock()
    liveness = HolderLiveness(nodes, recheck_interval=30.0, clock=clock)
    liveness.gone(entries("a", "b"), exclude="me")
    clock.now += 29.9
    liveness.gone(entries("a", "b"), exclude="me")
    assert sorted(nodes.calls) == ["a", "b"]
    clock.now += 0.1
    liveness.gone(entries("a"), exclude="me")
    assert sorted(nodes.calls) == ["a", "a", "b"]


def test_disabled_check_never_asks() -> None:
    nodes = FakeNodes({"a": NotFoundError("gone", status=404)})
    assert HolderLiveness(nodes, recheck_interval=None).gone(entries("a"), exclude="me") == frozenset()
    assert nodes.calls == []


def test_report_logs_calls_the_hook_and_allows_a_recheck(caplog: pytest.LogCaptureFixture) -> None:
    nodes, clock = FakeNodes({"a": NotFoundError("gone", status=404)}), Clock()
    freed: list[str] = []
    liveness = HolderLiveness(nodes, clock=clock, on_gone_holder=freed.append)
    assert liveness.gone(entries("a"), exclude="me") == {"a"}
    with caplog.at_level(logging.WARNING):
        liveness.report("a", backend="lease")
    assert freed == ["a"]
    assert "Lock held by node a which no longer exists: releasing" in caplog.text
    assert liveness.gone(entries("a"), exclude="me") == {"a"}  # a new holder of that name is checked again


def test_a_failing_hook_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    def hook(name: str) -> None:
        raise RuntimeError("metric broke")

    liveness = HolderLiveness(FakeNodes({}), on_gone_holder=hook)
    with caplog.at_level(logging.ERROR):
        liveness.report("a", backend="annotation")
    assert "on_gone_holder hook failed" in caplog.text
