"""``charts/pykured`` on the test API server: ``helm upgrade`` from kured's chart 6.1.0 keeps names, selectors
and the lock, and the rendered pod template runs as an agent through a reboot (the renders themselves are
compared in ``tests/chart/test_pykured_chart.py``)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from pykured import __version__
from pykured_dev.eventually import eventually
from pykured_dev.testenv.fleet import Fleet
from pykured_dev.testenv.pods import PYKURED_IMAGE, PodTemplate, pykured_image
from pykured_dev.testenv.reference import helm_template, reference
from tests.chart.test_pykured_chart import (
    CHART,
    CHART_LABEL,
    KURED_CHART_LABEL,
    LOCK,
    default_cluster_rules,
    default_role_rules,
    helm,
)
from tests.testenv import TestEnv

pytestmark = pytest.mark.reference
NOTIFY_TOKEN = "s3cr3t-n0tify-t0ken"

# -- on the test control plane -------------------------------------------------------------------------------


@pytest.mark.k8s
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_helm_upgrade_from_kured_s_chart_keeps_names_selectors_and_the_lock(
    k8s: TestEnv, tmp_path: Path
) -> None:
    ns = k8s.new_namespace("upg")
    (node,) = k8s.add_nodes(k8s.unique("upg-node"))
    ref = reference(("helm", "chart"))
    values = tmp_path / "values.yaml"
    values.write_text(json.dumps({"configuration": {"period": "10s", "concurrency": 1}}))
    common = ["-n", ns, "-f", str(values), "--wait=false"]
    installed = helm(
        "install", "kured", str(ref.chart), *common, workdir=tmp_path, kubeconfig=k8s.admin_kubeconfig
    )
    assert installed.returncode == 0, installed.stderr
    kube = k8s.kube()
    before = {
        "ds": kube.get(f"/apis/apps/v1/namespaces/{ns}/daemonsets/kured"),
        "sa": kube.get(f"/api/v1/namespaces/{ns}/serviceaccounts/kured"),
        "role": kube.get(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles/kured"),
        "clusterrole": kube.get("/apis/rbac.authorization.k8s.io/v1/clusterroles/kured"),
    }
    # a kured node holds the lock and is mid-cycle when the release is upgraded
    lock = json.dumps(
        {"nodeID": node, "metadata": {"unschedulable": False}, "created": "2026-12-01T10:00:00Z", "TTL": 0}
    )
    kube.request(
        "PATCH",
        f"/apis/apps/v1/namespaces/{ns}/daemonsets/kured",
        body={"metadata": {"annotations": {LOCK: lock}}},
        content_type="application/merge-patch+json",
    )
    kube.patch_node(node, {"metadata": {"annotations": {"weave.works/kured-reboot-in-progress": "x"}}})
    upgraded = helm(
        "upgrade", "kured", str(CHART), *common, workdir=tmp_path, kubeconfig=k8s.admin_kubeconfig
    )
    assert upgraded.returncode == 0, upgraded.stderr
    ds = kube.get(f"/apis/apps/v1/namespaces/{ns}/daemonsets/kured")
    assert ds["metadata"]["uid"] == before["ds"]["metadata"]["uid"], "the same DaemonSet, updated in place"
    assert ds["spec"]["selector"] == before["ds"]["spec"]["selector"]
    assert ds["metadata"]["annotations"][LOCK] == lock, "the lock carries over"
    assert ds["spec"]["template"]["spec"]["containers"][0]["image"] == f"{PYKURED_IMAGE}:{__version__}"
    labels = ds["spec"]["template"]["metadata"]["labels"]
    assert {k: v for k, v in labels.items() if k != "helm.sh/chart"} == {
        k: v
        for k, v in before["ds"]["spec"]["template"]["metadata"]["labels"].items()
        if k != "helm.sh/chart"
    }
    sa = kube.get(f"/api/v1/namespaces/{ns}/serviceaccounts/kured")
    assert sa["metadata"]["uid"] == before["sa"]["metadata"]["uid"]
    # kured's RBAC is narrowed to pykured's least privilege (the same objects, their rules replaced)
    role = kube.get(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles/kured")
    assert role["metadata"]["uid"] == before["role"]["metadata"]["uid"]
    assert role["rules"] == default_role_rules("kured")
    clusterrole = kube.get("/apis/rbac.authorization.k8s.io/v1/clusterroles/kured")
    assert clusterrole["metadata"]["uid"] == before["clusterrole"]["metadata"]["uid"]
    assert clusterrole["rules"] == default_cluster_rules(ns, "kured")
    annotations = kube.get_node(node)["metadata"]["annotations"]
    assert annotations["weave.works/kured-reboot-in-progress"] == "x", "the cycle's marks carry over"
    history = helm(
        "history", "kured", "-n", ns, "-o", "json", workdir=tmp_path, kubeconfig=k8s.admin_kubeconfig
    )
    charts = [entry["chart"] for entry in json.loads(history.stdout)]
    assert charts == [KURED_CHART_LABEL, CHART_LABEL]
    helm("uninstall", "kured", "-n", ns, "--wait=false", workdir=tmp_path, kubeconfig=k8s.admin_kubeconfig)


@pytest.mark.k8s
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_rendered_pod_template_runs_as_an_agent_through_a_reboot(k8s: TestEnv, tmp_path: Path) -> None:
    ns = k8s.new_namespace("pch")
    release = f"kured-{ns}"
    values = {
        "configuration": {
            "period": "2s",
            "rebootCommand": "/usr/local/sbin/simulated-reboot --now",
            "metricsPort": 9103,
            # a token in the URL: into the chart's Secret, to the agent through KURED_NOTIFY_URL, never logged
            "notifyUrl": f"generic+http://127.0.0.1:9/notify?token={NOTIFY_TOKEN}",
        },
        "pykured": {"lockBackend": "lease", "policyConfigMap": "kured-policy"},
    }
    ref = dataclasses.replace(reference(("helm", "chart")), chart=CHART)
    text, objects = helm_template(
        ref, release=release, namespace=ns, values=values, workdir=tmp_path / "helm"
    )
    k8s.kubectl("apply", "--server-side", "--field-manager=helm", "-f", "-", stdin=text)
    template = PodTemplate.of(k8s.kube().get(f"/apis/apps/v1/namespaces/{ns}/daemonsets/{release}"))
    (node,) = k8s.add_nodes(f"{ns}-n1")
    # the kubelet's kind of token (bound to the pod on its node): the chart's admission policies read the node
    with Fleet(
        k8s, workdir=tmp_path / "fleet", images={PYKURED_IMAGE: pykured_image()}, bound_tokens=True
    ) as fleet:
        fleet.add_pod(node, template)
        assert eventually(lambda: fleet.probe(node, 9103, "/metrics"), timeout=60, every=0.2), fleet.log_text(
            node
        )
        fleet.touch(node)
        assert fleet.wait_for(lambda: fleet.slots[node].reboots >= 1, timeout=120), fleet.log_text(node)

        def released() -> bool:
            leases = k8s.kube().get(f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases")["items"]
            holders = [lease.get("spec", {}).get("holderIdentity") for lease in leases]
            return (
                bool(leases)
                and not any(holders)
                and not k8s.kube().get_node(node)["spec"].get("unschedulable")
            )

        assert fleet.wait_for(released, timeout=120), fleet.log_text(node)
        log = fleet.log_text(node)
        # the URL came through the environment (a notification was attempted) and is in no log line
        assert "Error notifying: generic:" in log and NOTIFY_TOKEN not in log, log
        assert "forbidden" not in log.lower(), (
            log
        )  # the chart's RBAC covers the Lease lock, policy and settle
    assert {o["kind"] for o in objects} >= {"DaemonSet", "ServiceAccount", "ClusterRole", "Role", "Secret"}
    ds = next(o for o in objects if o["kind"] == "DaemonSet")
    assert not any(NOTIFY_TOKEN in arg for arg in ds["spec"]["template"]["spec"]["containers"][0]["args"])
