"""``--max-failed-drains`` on the real API server: concurrent agents count each failure on the policy
ConfigMap under optimistic concurrency (the count, its reset and the halt: tests/cycle/test_streak.py)."""

from __future__ import annotations

import datetime
import threading
from typing import Any

import pytest

from pykured.halting.streak import DrainStreak, read
from pykured.kube.events import EventRecorder
from pykured.notify import Notifier
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
