"""In ``kube-system``, installed as users install it: one agent's token reaches no further than its node.

The policy tests (``test_admission_policies.py``, ``test_lock_policies.py``) install each profile in a fresh
namespace of the shared test API server, under another DaemonSet name too. Here ``kustomize/base`` and the
chart (release ``kured``) go into ``kube-system`` of a control plane of their own, applied as rendered (no
name made unique, no condition added), and the same writes are tried with a pod-bound token of the agents'
ServiceAccount on node M: each one aimed past M is refused, each one of M's own is admitted.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from pykured.core import errors
from pykured.fleet.freeze import freeze
from pykured.kube.client import MERGE_PATCH, Kube
from pykured.policy.freeze import FreezeRecord
from pykured.policy.source import configmaps_path
from pykured_dev.testenv.reference import helm_template, reference
from tests.chart.test_pykured_chart import CHART
from tests.e2e.test_admission_policies import refused, wait_until_refused
from tests.e2e.test_rbac_profiles import ROOT, apply_docs, pod_bound_token, token_kubeconfig
from tests.testenv import TestEnv

pytestmark = [pytest.mark.k8s, pytest.mark.slow, pytest.mark.timeout(600)]

NS = "kube-system"
KINDS = {
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "ConfigMap",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
}


def kustomize_docs(env: TestEnv, tmp_path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(env.kubectl("kustomize", str(ROOT / "kustomize/base"))) if d]


def chart_docs(env: TestEnv, tmp_path: Path) -> list[dict[str, Any]]:
    ref = dataclasses.replace(reference(("helm",)), chart=CHART)
    values = {"pykured": {"lockBackend": "lease", "policyConfigMap": "kured-policy"}}
    _text, objects = helm_template(ref, release="kured", namespace=NS, values=values, workdir=tmp_path / "h")
    return list(objects)


INSTALLS = {"kustomize": kustomize_docs, "chart": chart_docs}


@pytest.fixture(params=list(INSTALLS))
def installed(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[TestEnv, Kube, str, str]]:
    """A control plane of its own with the install in kube-system, nodes M and O, and an agent token on M."""
    env = TestEnv().start()
    try:
        docs = INSTALLS[request.param](env, tmp_path)
        apply_docs(env, docs, KINDS)
        if not any(d["kind"] == "ConfigMap" and d["metadata"]["name"] == "kured-policy" for d in docs):
            body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kured-policy"}}
            env.kube().create(configmaps_path(NS), body)  # the chart leaves it to the operator
        env.create_daemonset(NS, "kured")
        mine, other = env.add_nodes("node-m", "node-o")
        token = pod_bound_token(env, NS, "kured", mine, ds="kured")
        agent = Kube.from_kubeconfig(token_kubeconfig(env, tmp_path / "agent.json", token))

        def node_probe(n: int) -> None:
            agent.patch_node(mine, {"metadata": {"annotations": {"example.com/probe": str(n)}}})

        def lease_probe(n: int) -> None:
            agent.create_lease(NS, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                    "metadata": {"name": f"probe-{n}"}})  # fmt: skip

        def configmap_probe(n: int) -> None:
            obj = agent.request("GET", configmaps_path(NS, "kured-policy"))
            obj["metadata"].setdefault("annotations", {})["example.com/probe"] = str(n)
            agent.request("PUT", configmaps_path(NS, "kured-policy"), body=obj)

        # each policy takes effect on its own: wait until each refuses a probe
        wait_until_refused(node_probe, "not: example.com/probe")
        wait_until_refused(lease_probe, "only Leases named")
        wait_until_refused(configmap_probe, "not: example.com/probe")
        yield env, agent, mine, other
        agent.close()
    finally:
        env.stop()


def slot(holder: str) -> dict[str, Any]:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.000000Z")
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "kured-lock-0", "labels": {"pykured.dev/lock": "kured-lock"}},
        "spec": {"holderIdentity": holder, "acquireTime": now, "renewTime": now},
    }


def test_in_kube_system_an_agent_token_reaches_no_further_than_its_node(
    installed: tuple[TestEnv, Kube, str, str],
) -> None:
    env, agent, mine, other = installed
    admin = env.kube()
    # Nodes: another node's cordon or cycle state; a foreign field of its own
    refused(lambda: agent.patch_node(other, {"spec": {"unschedulable": True}}), f"Node {other}")
    refused(
        lambda: agent.patch_node(other, {"metadata": {"annotations": {"pykured.dev/halted-for": "x"}}}),
        f"may not write Node {other}",
    )
    refused(lambda: agent.patch_node(mine, {"spec": {"providerID": "aws:///x"}}), "only spec.unschedulable")
    agent.patch_node(mine, {"spec": {"unschedulable": True}})  # its own cordon: admitted
    assert admin.get_node(mine)["spec"]["unschedulable"] is True
    assert not admin.get_node(other)["spec"].get("unschedulable")
    # the lock: another node's slot is not freed nor taken; a free slot is taken for its own node only
    admin.create_lease(NS, slot(other))
    held = agent.get_lease(NS, "kured-lock-0")
    freed = {**held, "spec": {**held["spec"], "holderIdentity": None}}
    refused(lambda: agent.replace_lease(NS, "kured-lock-0", freed), f"held by node {other}")
    admin.request("DELETE", f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/kured-lock-0")
    refused(lambda: agent.create_lease(NS, slot(other)), other)
    agent.create_lease(NS, slot(mine))  # its own: admitted
    # the policy ConfigMap: an operator's freeze and blackouts stay; a halt may be added
    now = datetime.datetime.now(datetime.UTC)
    freeze(admin, namespace=NS, name="kured-policy", reason="INC-1", until=None, now=now)

    def without(key: str) -> dict[str, Any]:
        obj = agent.request("GET", configmaps_path(NS, "kured-policy"))
        obj["data"].pop(key, None)
        return obj

    refused(
        lambda: agent.request("PUT", configmaps_path(NS, "kured-policy"), body=without("freeze")),
        "not change: freeze",
    )
    halted = without("nothing")
    halt = FreezeRecord(reason="node-o did not come back", by=f"pykured on {mine}", at=now, halted=other)
    halted["data"]["halt"] = halt.to_json()
    agent.request("PUT", configmaps_path(NS, "kured-policy"), body=halted)  # a halt: admitted
    assert set(admin.request("GET", configmaps_path(NS, "kured-policy"))["data"]) == {"freeze", "halt"}
    # pods on another node: not deleted (neither RBAC nor the policy lets the base's agent)
    pod = admin.create(
        f"/api/v1/namespaces/{NS}/pods",
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "coredns-x"},
         "spec": {"nodeName": other, "containers": [{"name": "c", "image": "registry.invalid/c:1"}]}},
    )  # fmt: skip
    with pytest.raises(errors.ForbiddenError):
        agent.request("DELETE", f"/api/v1/namespaces/{NS}/pods/{pod['metadata']['name']}")
    # its own node's annotation through a merge patch, as the agent writes it: admitted
    agent.patch_node(
        mine, {"metadata": {"annotations": {"pykured.dev/reboot-boot-id": "b"}}}, patch_type=MERGE_PATCH
    )
