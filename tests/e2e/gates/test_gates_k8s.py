"""Settle gates on the real API server: pods' readiness, PodDisruptionBudgets, Nodes' readiness (the gate
objects alone; the daemon's use of them is covered by the agent tests; the reboot hooks: tests/gates/)."""

from __future__ import annotations

import datetime

import pytest

from pykured.gates.settle import (
    DRAINED_PDBS_ANNOTATION,
    NodesReadyGate,
    PdbGate,
    PodsReadyGate,
    record_drained_pdbs,
)
from pykured_dev.eventually import eventually
from tests.testenv import TestEnv

pytestmark = pytest.mark.k8s
UTC = datetime.UTC


def test_settle_on_an_unready_pod_then_ready(k8s: TestEnv) -> None:
    ns = k8s.new_namespace("settle")
    node = k8s.add_nodes(k8s.unique("settle"))[0]
    k8s.create_pod(ns, "web-0", node=node, labels={"app": "web"}, phase_running=False)
    k8s.create_pod(ns, "other", node=node, labels={"app": "other"}, phase_running=False)
    gate = PodsReadyGate(k8s.kube(), node=node, selectors=["app=web"])
    now = datetime.datetime.now(UTC)
    reason = gate.check({}, now)
    assert reason is not None and str(reason) == f"pods not ready: [{ns}/web-0]"
    ready = {"type": "Ready", "status": "True", "lastTransitionTime": now.strftime("%Y-%m-%dT%H:%M:%SZ")}
    k8s.kube().request(
        "PATCH",
        f"/api/v1/namespaces/{ns}/pods/web-0/status",
        body={"status": {"phase": "Running", "conditions": [ready]}},
        content_type="application/strategic-merge-patch+json",
    )
    assert gate.check({}, now) is None


def test_settle_on_a_pdb_that_allows_no_disruption_then_does(k8s: TestEnv) -> None:
    ns = k8s.new_namespace("settle")
    node = k8s.add_nodes(k8s.unique("settle"))[0]
    k8s.create_pod(ns, "db-0", node=node, labels={"app": "db"})
    k8s.create_pdb(ns, "db", {"app": "db"}, min_available=1)
    k8s.create_pdb(ns, "unrelated", {"app": "nope"}, min_available=1)
    assert record_drained_pdbs(k8s.kube(), node) == [f"{ns}/db"]
    obj = k8s.kube().get_node(node)
    assert obj["metadata"]["annotations"][DRAINED_PDBS_ANNOTATION] == f"{ns}/db"
    gate = PdbGate(k8s.kube())
    now = datetime.datetime.now(UTC)
    k8s.set_pdb_status(ns, "db", disruptions_allowed=0)
    reason = gate.check(obj, now)
    assert reason is not None and str(reason) == f"PodDisruptionBudgets allow no disruption: [{ns}/db]"
    # A second healthy pod, so that a disruption controller running against this API server (another test
    # of the session may have started kube-controller-manager) computes the same status as the one set here.
    k8s.create_pod(ns, "db-1", node=node, labels={"app": "db"})
    k8s.set_pdb_status(ns, "db", disruptions_allowed=1, healthy=2)

    def passes() -> bool:
        k8s.set_pdb_status(ns, "db", disruptions_allowed=1, healthy=2)
        return gate.check(obj, now) is None

    assert eventually(passes, timeout=90, every=0.2)


def test_settle_on_an_unready_node(k8s: TestEnv) -> None:
    node = k8s.add_nodes(k8s.unique("settle"))[0]
    gate = NodesReadyGate(k8s.kube())
    now = datetime.datetime.now(UTC)
    condition = {"type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": "test"}
    k8s.kube().patch_node_status(node, {"status": {"conditions": [condition]}})
    reason = gate.check({}, now)
    assert reason is not None and node in str(reason)
    condition.update(status="True", reason="KubeletReady")
    k8s.kube().patch_node_status(node, {"status": {"conditions": [condition]}})
    reason = gate.check({}, now)
    assert reason is None or node not in str(reason)
