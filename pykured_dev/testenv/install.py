"""Installing on real nodes as users do: kustomize, server-side apply, a workload under a PDB.

Used by the real-node tests (tests/e2e/realnode) and ``tools/dev demo --real-nodes``.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from pykured_dev.testenv import images
from pykured_dev.testenv.procs import find_binaries
from pykured_dev.testenv.realnode import RealNodes

ROOT = Path(__file__).resolve().parents[2]
NS = "kube-system"
DS = "kured"


def apply(fleet: RealNodes, docs: list[dict[str, Any]]) -> None:
    """Server-side apply, as ``kubectl apply --server-side`` does for users."""
    text = "\n---\n".join(yaml.safe_dump(d) for d in docs)
    fleet.cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=text)


def remove(fleet: RealNodes, docs: list[dict[str, Any]]) -> None:
    """Delete what ``docs`` name, as ``kubectl delete -f`` does (absent ones are fine; never a Namespace)."""
    kept = [d for d in docs if d.get("kind") != "Namespace"]
    text = "\n---\n".join(yaml.safe_dump(d) for d in kept)
    fleet.cluster.kubectl("delete", "--ignore-not-found", "--wait=true", "-f", "-", stdin=text)


def kustomize_base(image: str, *extra_args: str, overlay: str = "kustomize/base") -> list[dict[str, Any]]:
    """``kustomize/base`` (or an overlay) rendered, with the image swapped and ``extra_args`` appended."""
    kubectl = find_binaries(("kubectl",)) / "kubectl"
    rendered = subprocess.run(
        [str(kubectl), "kustomize", str(ROOT / overlay)], capture_output=True, text=True, check=True
    ).stdout
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    for doc in docs:
        if doc["kind"] == "DaemonSet":
            containers = doc["spec"]["template"]["spec"]["containers"]
            for container in containers:  # the agent, and the signal profile's relay
                container["image"] = image
                container["imagePullPolicy"] = "Never"
            containers[0]["args"] = [*containers[0].get("args", []), *extra_args]
    return docs


def daemonset(fleet: RealNodes) -> dict[str, Any]:
    return dict(fleet.cluster.kube().get(f"/apis/apps/v1/namespaces/{NS}/daemonsets/{DS}"))


def ds_rolled_out(fleet: RealNodes, image: str) -> bool:
    """Every node runs a Ready pod of the DaemonSet's current template, with ``image``."""
    ds = daemonset(fleet)
    status = ds.get("status", {})
    if ds["spec"]["template"]["spec"]["containers"][0]["image"] != image:
        return False
    want = len(fleet.nodes)
    return bool(
        status.get("observedGeneration") == ds["metadata"]["generation"]
        and status.get("desiredNumberScheduled") == want
        and status.get("updatedNumberScheduled") == want
        and status.get("numberReady") == want
        and status.get("numberAvailable") == want
    )


def workload(fleet: RealNodes, namespace: str, *, replicas: int = 2) -> None:
    """A Deployment of ``replicas`` busybox pods under a PodDisruptionBudget (minAvailable 1)."""
    kube = fleet.cluster.kube()
    kube.create(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    )
    labels = {"app": "web"}
    kube.create(
        f"/apis/apps/v1/namespaces/{namespace}/deployments",
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "automountServiceAccountToken": False,
                        "terminationGracePeriodSeconds": 5,
                        "containers": [
                            {
                                "name": "web",
                                "image": images.BUSYBOX_IMAGE,
                                "imagePullPolicy": "Never",
                                "command": [
                                    "/bin/sh",
                                    "-c",
                                    "trap 'exit 0' TERM; while :; do sleep 1 & wait; done",
                                ],
                            }
                        ],
                    },
                },
            },
        },
    )
    kube.create(
        f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets",
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": labels}},
        },
    )


def workload_available(fleet: RealNodes, namespace: str, replicas: int = 2) -> bool:
    dep = fleet.cluster.kube().get(f"/apis/apps/v1/namespaces/{namespace}/deployments/web")
    return (
        int(dep.get("status", {}).get("availableReplicas") or 0) == replicas
        and int(dep.get("status", {}).get("updatedReplicas") or 0) == replicas
    )
