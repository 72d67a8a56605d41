"""``charts/pykured`` on the test API server: ``helm upgrade`` from kured's chart 6.1.0 keeps names, selectors
and the lock, and the rendered pod template runs as an agent through a reboot (the renders themselves are
compared in ``tests/chart/test_pykured_chart.py``)."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from pykured_dev.eventually import eventually
from pykured_dev.testenv.fleet import Fleet
from pykured_dev.testenv.pods import PYKURED_IMAGE, PodTemplate, pykured_image
from pykured_dev.testenv.reference import Reference, helm_template, reference
from tests.e2e.kured.values import every_key_values
from tests.testenv import TestEnv

pytestmark = pytest.mark.reference

CHART = Path(__file__).resolve().parents[3] / "charts" / "pykured"
CHART_LABEL = "pykured-0.1.0"
KURED_CHART_LABEL = "kured-6.1.0"
LOCK = "weave.works/kured-node-lock"

# pykured's additions with the chart's default `pykured:` values (COMPATIBILITY.md, "The Helm chart").
DEFAULT_ARGS: list[str] = []  # kured's lock by default: the same arguments
DEFAULT_CLUSTER_RULES = [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["watch"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
]
DEFAULT_ROLE_RULES: list[dict[str, Any]] = []  # the Lease rules come with pykured.lockBackend: lease


def prometheus_values() -> dict[str, Any]:
    return {
        "service": {
            "create": True,
            "name": "kured-prometheus-endpoint",
            "port": 8080,
            "type": "NodePort",
            "nodePort": 30000,
        },
        "metrics": {
            "create": True,
            "namespace": "monitoring",
            "labels": {"release": "prom"},
            "interval": "30s",
            "scrapeTimeout": "10s",
        },
    }


def realistic_values() -> dict[str, Any]:
    return {
        "image": {"pullSecrets": [{"name": "registry"}]},
        "updateStrategy": "OnDelete",
        "revisionHistoryLimit": 3,
        "podAnnotations": {"container.apparmor.security.beta.kubernetes.io/kured": "unconfined"},
        "dsAnnotations": {"owner": "platform"},
        "podLabels": {"team": "platform"},
        "priorityClassName": "system-node-critical",
        "hostNetwork": True,
        "tolerations": [{"operator": "Exists"}],
        "nodeSelector": {"kubernetes.io/os": "linux", "pool": "workers"},
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "pool", "operator": "NotIn", "values": ["gpu"]}]}
                    ]
                }
            }
        },
        "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
        "serviceAccount": {"name": "reboots", "extraAnnotations": {"eks.amazonaws.com/role-arn": "arn:x"}},
        "containerSecurityContext": {
            "privileged": False,
            "readOnlyRootFilesystem": True,
            "allowPrivilegeEscalation": False,
            "capabilities": {"add": ["CAP_KILL"], "drop": ["*"]},
        },
        "volumes": [{"name": "tmp", "emptyDir": {}}],
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
        "initContainers": [{"name": "wait", "image": "busybox", "command": ["true"]}],
        "extraEnvVars": [
            {"name": "KURED_NOTIFY_URL", "valueFrom": {"secretKeyRef": {"name": "n", "key": "url"}}}
        ],
        "extraArgs": {"drain-timeout": "30m", "force-reboot": ""},
        "configuration": {
            "rebootMethod": "signal",
            "timeZone": "Europe/Berlin",
            "startTime": "22:00",
            "endTime": "05:00",
            "rebootDays": ["sa", "su"],
            "period": "5m",
            "slackChannel": "{{ .Release.Namespace }}-alerts",
            "useRebootSentinelHostPath": False,
            "rebootSentinelCommand": "test -e /var/run/reboot-required",
            "concurrency": 2,
        },
    }


def kured_defaults() -> dict[str, Any]:
    chart = reference(("helm", "chart")).chart
    assert chart is not None
    values: dict[str, Any] = yaml.safe_load((chart / "values.yaml").read_text())
    return values


VALUES = {
    "no-values": lambda: None,
    "kured-defaults": kured_defaults,
    "every-key": lambda: every_key_values(1234, "x"),
    "prometheus": prometheus_values,
    "realistic": realistic_values,
}


def render(chart: str, values: dict[str, Any] | None, workdir: Path, *, release: str = "kured") -> list[Any]:
    ref = reference(("helm", "chart"))
    if chart == "pykured":
        ref = dataclasses.replace(ref, chart=CHART)
    _, objects = helm_template(
        ref, release=release, namespace="kube-system", values=values, workdir=workdir / chart
    )
    return objects


def _drop_nulls(value: Any) -> Any:
    """Keys whose value is null are absent to the API server (kured's ServiceAccount has `annotations:`)."""
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


def documented(obj: dict[str, Any], chart_label: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The object without its documented differences, and what they were."""
    obj = _drop_nulls(copy.deepcopy(obj))
    taken: dict[str, Any] = {}
    for meta in (obj["metadata"], obj.get("spec", {}).get("template", {}).get("metadata", {})):
        if "labels" in meta:
            assert meta["labels"].pop("helm.sh/chart") == chart_label
    if obj["kind"] == "DaemonSet":
        container = obj["spec"]["template"]["spec"]["containers"][0]
        taken["image"] = container.pop("image")
        taken["args"] = container.pop("args")
    if obj["kind"] in ("ClusterRole", "Role"):
        taken["rules"] = obj.pop("rules")
    return obj, taken


def helm(*args: str, workdir: Path, kubeconfig: str | None = None) -> subprocess.CompletedProcess[str]:
    ref: Reference = reference(("helm",))
    assert ref.helm is not None
    home = workdir / "helm-home"
    env = {
        **os.environ,
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }
    if kubeconfig:
        env["KUBECONFIG"] = kubeconfig
    return subprocess.run([str(ref.helm), *args], capture_output=True, text=True, env=env, timeout=300)


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
    assert ds["spec"]["template"]["spec"]["containers"][0]["image"] == f"{PYKURED_IMAGE}:0.1.0"
    labels = ds["spec"]["template"]["metadata"]["labels"]
    assert {k: v for k, v in labels.items() if k != "helm.sh/chart"} == {
        k: v
        for k, v in before["ds"]["spec"]["template"]["metadata"]["labels"].items()
        if k != "helm.sh/chart"
    }
    sa = kube.get(f"/api/v1/namespaces/{ns}/serviceaccounts/kured")
    assert sa["metadata"]["uid"] == before["sa"]["metadata"]["uid"]
    role = kube.get(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles/kured")
    assert role["rules"][: len(before["role"]["rules"])] == before["role"]["rules"]
    clusterrole = kube.get("/apis/rbac.authorization.k8s.io/v1/clusterroles/kured")
    assert clusterrole["rules"][: len(before["clusterrole"]["rules"])] == before["clusterrole"]["rules"]
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
        },
        "pykured": {"lockBackend": "lease", "policyConfigMap": "kured-policy"},
    }
    ref = dataclasses.replace(reference(("helm", "chart")), chart=CHART)
    text, objects = helm_template(
        ref, release=release, namespace=ns, values=values, workdir=tmp_path / "helm"
    )
    k8s.kubectl("apply", "--server-side", "--field-manager=helm", "-n", ns, "-f", "-", stdin=text)
    template = PodTemplate.of(k8s.kube().get(f"/apis/apps/v1/namespaces/{ns}/daemonsets/{release}"))
    (node,) = k8s.add_nodes(f"{ns}-n1")
    with Fleet(k8s, workdir=tmp_path / "fleet", images={PYKURED_IMAGE: pykured_image()}) as fleet:
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
        assert "forbidden" not in log.lower(), (
            log
        )  # the chart's RBAC covers the Lease lock, policy and settle
    assert {o["kind"] for o in objects} >= {"DaemonSet", "ServiceAccount", "ClusterRole", "Role"}
