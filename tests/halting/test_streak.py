"""``--max-failed-drains`` on FakeKube's policy ConfigMap: the fleet-wide count, its reset by a completed
drain, a conflict, the halt at the limit, a missing ConfigMap (agents counting at once under the API
server's optimistic concurrency: tests/e2e/cycle/test_streak.py)."""

from __future__ import annotations

import datetime
from typing import Any

from pykured.fleet.freeze import read_freeze
from pykured.halting.streak import DrainStreak, Streak, read
from pykured.kube.events import EventRecorder
from pykured.notify import Notifier
from tests.fakes import FakeKube

NOW = datetime.datetime(2026, 11, 30, 21, 40, tzinfo=datetime.UTC)
NS = "kube-system"
POLICY = f"/api/v1/namespaces/{NS}/configmaps/kured-policy"


def policy(kube: FakeKube) -> dict[str, Any]:
    return kube.request("GET", POLICY)


def streak_for(kube: Any, me: str, *, limit: int = 3, namespace: str = NS) -> DrainStreak:
    return DrainStreak(
        kube=kube, namespace=namespace, configmap="kured-policy", me=me, limit=limit, notifier=Notifier(),
        events_for=lambda name: EventRecorder(kube, node=name), clock=lambda: NOW,
    )  # fmt: skip


def with_policy() -> FakeKube:
    kube = FakeKube()
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kured-policy"}}
    kube.request("POST", f"/api/v1/namespaces/{NS}/configmaps", body=body)
    return kube


def test_failures_count_a_completed_drain_resets_and_the_limit_halts() -> None:
    kube = with_policy()
    a, b = "node-a", "node-b"
    kube.add_node(a)
    kube.add_node(b)
    streak = streak_for(kube, a)
    streak.drained(a, "timeout")
    streak.drained(b, "webhook denied")
    assert read(policy(kube)) == Streak(2, f"{b}: webhook denied")
    streak.drained(a, None)  # a drain completed: the failures are no longer consecutive
    assert read(policy(kube)) == Streak()
    assert read_freeze(kube, namespace=NS, name="kured-policy") is None
    for node in (a, b, a):
        streak.drained(node, "PDB")
    record = read_freeze(kube, namespace=NS, name="kured-policy")
    assert record is not None and record.halted == a and record.by == f"pykured on {a}"
    assert record.reason == f"3 consecutive drains failed (last: {a}: PDB)"
    assert read(policy(kube)) == Streak()  # the halt took the count back to zero
    assert [e["involvedObject"]["name"] for e in kube.events if e["reason"] == "RebootHalted"] == [a]


def test_a_conflicting_write_is_read_again_and_counted_once() -> None:
    kube = with_policy()
    streak = streak_for(kube, "node-a", limit=100)
    other = streak_for(kube, "node-b", limit=100)
    interleaved: list[bool] = []

    def other_counts_first(method: str, path: str, body: Any) -> None:
        """Another agent counts between this one's GET and its PUT (once); no error of its own."""
        if method == "PUT" and not interleaved:
            interleaved.append(True)
            other.drained("node-b", "timeout")

    kube.fail_next(other_counts_first)
    streak.drained("node-a", "timeout")
    assert read(policy(kube)).count == 2
    assert kube.calls("PUT", "kured-policy") == 3  # ours (409), the other's, ours again


def test_a_missing_configmap_never_raises_into_the_cycle() -> None:
    kube = FakeKube()
    kube.add_node("node-d")
    streak_for(kube, "node-d").drained("node-d", "timeout")  # logged, not raised
    assert Streak.parse("not json") == Streak() and Streak.parse('{"count":-3}') == Streak()
