"""PodBlocker against the real kube-apiserver."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from pykured import blockers
from pykured.core.model import Reason
from tests.testenv import TestEnv

NOW = datetime.datetime(2026, 1, 1, 0, 0, 0, 500000, tzinfo=datetime.UTC)


# -- PodBlocker: the query, without a cluster ---------------------------------------------------------------


def pods(*names: str, more: bool = False) -> dict[str, Any]:
    return {
        "items": [{"metadata": {"name": n}} for n in names],
        "metadata": {"continue": "t" if more else ""},
    }


# -- PodBlocker against the real apiserver ----------------------------------------------------------------


def _set_phase(k8s: TestEnv, namespace: str, name: str, phase: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/pods/{name}/status"
    k8s.kube().request(
        "PATCH", path, body={"status": {"phase": phase}}, content_type="application/merge-patch+json"
    )


@pytest.mark.k8s
@pytest.mark.parametrize(
    ("where", "phase", "labels", "selectors", "blocked"),
    [
        ("this", "Running", {"app": "blocker"}, ["app=blocker"], True),
        ("this", "Pending", {"app": "blocker"}, ["app=blocker"], True),
        ("other", "Running", {"app": "blocker"}, ["app=blocker"], False),
        ("this", "Succeeded", {"app": "blocker"}, ["app=blocker"], False),
        ("this", "Failed", {"app": "blocker"}, ["app=blocker"], False),
        ("this", "Running", {"app": "other"}, ["app=blocker"], False),
        ("this", "Running", {"app": "b"}, ["app=a", "app=b"], True),
        ("this", "Running", {"app": "a", "tier": "db"}, ["app=a,tier=db"], True),
        ("this", "Running", {"app": "a", "tier": "web"}, ["app=a,tier=db"], False),
    ],
    ids=[
        "running-here",
        "pending-here",
        "other-node",
        "succeeded",
        "failed",
        "label-mismatch",
        "or-of-selectors",
        "comma-and-match",
        "comma-and-mismatch",
    ],
)
def test_pod_blocker_on_the_apiserver(
    k8s: TestEnv,
    where: str,
    phase: str,
    labels: dict[str, str],
    selectors: list[str],
    blocked: bool,
) -> None:
    namespace = k8s.new_namespace()
    here, there = k8s.add_nodes(k8s.unique("node"), k8s.unique("node"))
    node = here if where == "this" else there
    k8s.create_pod(namespace, "blocker-pod", node=node, labels=labels, phase_running=phase == "Running")
    if phase not in ("Running", "Pending"):
        _set_phase(k8s, namespace, "blocker-pod", phase)
    reason = blockers.PodBlocker(k8s.kube(), node=here, selectors=selectors).check(now=NOW)
    assert reason == (Reason("pods", "matching pods: [blocker-pod]") if blocked else None)


@pytest.mark.k8s
def test_pod_blocker_lists_ten_then_dots(k8s: TestEnv) -> None:
    namespace = k8s.new_namespace()
    (node,) = k8s.add_nodes(k8s.unique("node"))
    for i in range(11):
        k8s.create_pod(namespace, f"p{i:02d}", node=node, labels={"app": "many"}, phase_running=False)
    reason = blockers.PodBlocker(k8s.kube(), node=node, selectors=["app=many"]).check(now=NOW)
    assert reason is not None
    names = reason.message.removeprefix("matching pods: [").removesuffix("]").split(" ")
    assert len(names) == 11
    assert names[-1] == "..."
