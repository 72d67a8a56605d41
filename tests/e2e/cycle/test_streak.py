"""``--max-failed-drains`` on the real API server: the fleet-wide count on the policy ConfigMap, its reset by
a completed drain, concurrent agents counting each failure, and the halt at the limit."""

from __future__ import annotations

import datetime
import threading
from typing import Any

import pytest

from pykured.cycle.streak import DrainStreak, Streak, read
from pykured.kube.events import EventRecorder
from pykured.notify import Notifier
from pykured.policy.command import read_freeze
from tests.testenv import TestEnv

pytestmark = pytest.mark.k8s
NOW = datetime.datetime(2026, 11, 30, 21, 40, tzinfo=datetime.UTC)


def policy(k8s: TestEnv, ns: str) -> dict[str, Any]:
    return k8s.kube().request("GET", f"/api/v1/namespaces/{ns}/configmaps/kured-policy")


def streak_for(k8s: TestEnv, ns: str, me: str, *, limit: int = 3) -> DrainStreak:
    kube = k8s.kube()
    return DrainStreak(
        kube=kube, namespace=ns, configmap="kured-policy", me=me, limit=limit, notifier=Notifier(),
        events_for=lambda name: EventRecorder(kube, node=name), clock=lambda: NOW,
    )  # fmt: skip


@pytest.fixture
def ns(k8s: TestEnv) -> str:
    namespace = k8s.new_namespace("streak")
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kured-policy"}}
    k8s.kube().request("POST", f"/api/v1/namespaces/{namespace}/configmaps", body=body)
    return namespace


def test_failures_count_a_completed_drain_resets_and_the_limit_halts(k8s: TestEnv, ns: str) -> None:
    a, b = k8s.add_nodes(k8s.unique("sa"), k8s.unique("sb"))
    streak = streak_for(k8s, ns, a)
    streak.drained(a, "timeout")
    streak.drained(b, "webhook denied")
    assert read(policy(k8s, ns)) == Streak(2, f"{b}: webhook denied")
    streak.drained(a, None)  # a drain completed: the failures are no longer consecutive
    assert read(policy(k8s, ns)) == Streak()
    assert read_freeze(k8s.kube(), namespace=ns, name="kured-policy") is None
    for node in (a, b, a):
        streak.drained(node, "PDB")
    record = read_freeze(k8s.kube(), namespace=ns, name="kured-policy")
    assert record is not None and record.halted == a and record.by == f"pykured on {a}"
    assert record.reason == f"3 consecutive drains failed (last: {a}: PDB)"
    assert read(policy(k8s, ns)) == Streak()  # the halt took the count back to zero
    events = k8s.kube().get(
        "/api/v1/namespaces/default/events", query={"fieldSelector": f"involvedObject.name={a}"}
    )
    assert any(e["reason"] == "RebootHalted" for e in events["items"])


def test_agents_failing_at_once_count_every_failure(k8s: TestEnv, ns: str) -> None:
    nodes = k8s.add_nodes(*(k8s.unique("sc") for _ in range(4)))
    streaks = [streak_for(k8s, ns, node, limit=100) for node in nodes]
    threads = [
        threading.Thread(target=s.drained, args=(n, "timeout")) for s, n in zip(streaks, nodes, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert read(policy(k8s, ns)).count == 4


def test_a_missing_configmap_never_raises_into_the_cycle(k8s: TestEnv) -> None:
    (node,) = k8s.add_nodes(k8s.unique("sd"))
    streak_for(k8s, k8s.new_namespace("none"), node).drained(node, "timeout")  # logged, not raised
    assert Streak.parse("not json") == Streak() and Streak.parse('{"count":-3}') == Streak()
