"""Tests for pykured.blockers.pods: the query and the messages, without a cluster (on the real
kube-apiserver: ``tests/e2e/test_blockers.py``)."""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from pykured.blockers.pods import PodBlocker
from pykured.core.errors import KubeError
from pykured.core.model import Reason
from pykured.kube.client import Kube

NOW = datetime.datetime(2026, 1, 1, 0, 0, 0, 500000, tzinfo=datetime.UTC)


# -- PodBlocker: the query, without a cluster ---------------------------------------------------------------


@dataclass
class ListingKube:
    answers: list[Any]
    calls: list[dict[str, Any]] = field(default_factory=list)

    def list_pods(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def pods(*names: str, more: bool = False) -> dict[str, Any]:
    return {
        "items": [{"metadata": {"name": n}} for n in names],
        "metadata": {"continue": "t" if more else ""},
    }


def test_pod_query_parameters() -> None:
    kube = ListingKube([pods(), pods()])
    assert PodBlocker(cast(Kube, kube), node="n1", selectors=["app=a", "app=b,tier=x"]).check(now=NOW) is None
    field_selector = "spec.nodeName=n1,status.phase!=Succeeded,status.phase!=Failed,status.phase!=Unknown"
    assert kube.calls == [
        {"field_selector": field_selector, "label_selector": "app=a", "limit": 10},
        {"field_selector": field_selector, "label_selector": "app=b,tier=x", "limit": 10},
    ]


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        ([pods("p1", "p2")], "matching pods: [p1 p2]"),
        (
            [pods(*(f"p{i}" for i in range(10)), more=True)],
            "matching pods: [p0 p1 p2 p3 p4 p5 p6 p7 p8 p9 ...]",
        ),
        ([pods(), pods("late")], "matching pods: [late]"),
        (
            [KubeError("pods is forbidden (HTTP 403)", status=403)],
            "pod query error: pods is forbidden (HTTP 403)",
        ),
    ],
    ids=["two-pods", "continue-token", "second-selector", "error-blocks"],
)
def test_pod_blocker_messages(answers: list[Any], message: str) -> None:
    reason = PodBlocker(cast(Kube, ListingKube(answers)), node="n1", selectors=["a=1", "b=2"]).check(now=NOW)
    assert reason == Reason("pods", message)
