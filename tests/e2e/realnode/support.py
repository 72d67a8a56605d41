"""What the real-node scenarios share: installing a DaemonSet as users do, workloads, waiting for effects.

ServiceAccount tokens reach the pods as in any cluster: the control plane keeps the ServiceAccount admission
plugin, so every pod gets the projected ``kube-api-access-*`` volume, and the real kubelet requests and
rotates the token through the TokenRequest API (the ``ca.crt`` comes from the ``kube-root-ca.crt`` ConfigMap
kube-controller-manager publishes). Pods reach the API server at the ``kubernetes`` Service's address, which
the kubelet puts in ``KUBERNETES_SERVICE_HOST``/``_PORT``.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from pykured.core import errors
from pykured.lock.record import decode
from pykured_dev.eventually import eventually
from pykured_dev.testenv.install import (
    DS,
    NS,
    apply,
    daemonset,
    ds_rolled_out,
    kustomize_base,
    remove,
    workload,
    workload_available,
)
from pykured_dev.testenv.procs import cache_dir, run_build
from pykured_dev.testenv.realnode import RealNodes

KURED_BUILD = "tools/kured-build"
KURED_ANNOTATION = "weave.works/kured-node-lock"
__all__ = [
    "DS",
    "NS",
    "apply",
    "daemonset",
    "ds_rolled_out",
    "kustomize_base",
    "remove",
    "workload",
    "workload_available",
]
WAIT = 480.0
"""Generous: the tier must pass on a loaded 2-core machine; every wait ends as soon as its effect is seen."""


def wait_for(what: str, cond: Callable[[], bool], fleet: RealNodes, timeout: float = WAIT) -> None:
    """Wait until ``cond()``; on timeout fail with the nodes' log tails."""

    def holds() -> bool:
        try:
            return cond()
        except errors.KubeError:  # the API server restarts, or a node's relay is down: look again
            return False

    if not eventually(holds, timeout=timeout, every=0.5):
        raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}\n{fleet.diagnostics()}")


def built(name: str) -> Path:
    """``tools/kured-build NAME``'s binary (kured; helm, with kured's chart beside it), built if missing."""
    path = cache_dir() / "bin" / "current" / name
    if not path.exists() or (name == "helm" and not (path.parent.parent / "chart" / "kured").is_dir()):
        wanted = [name, "chart"] if name == "helm" else [name]
        run_build("kured-build", wanted, missing=f"{name} ({KURED_BUILD})")
    return path


def chart(repository: str, tag: str) -> list[dict[str, Any]]:
    """kured's Helm chart 6.1.0 as users install it (``helm template``), with only the image chosen.

    The one other value, ``configuration.period=10s``, is the same for kured and pykured (a user's own value:
    kured checks its sentinel only every period).
    """
    helm = built("helm")
    rendered = subprocess.run(
        [
            str(helm),
            "template",
            "kured",
            str(helm.parent.parent / "chart" / "kured"),
            f"--namespace={NS}",
            f"--set=image.repository={repository}",
            f"--set=image.tag={tag}",
            "--set=configuration.period=10s",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [d for d in yaml.safe_load_all(rendered) if d]


def agent_pods(fleet: RealNodes) -> dict[str, dict[str, Any]]:
    """The pods of DaemonSet kube-system/kured (kustomize's or the chart's labels), by node."""
    pods = fleet.cluster.kube().get(f"/api/v1/namespaces/{NS}/pods")
    return {
        p["spec"].get("nodeName", ""): p
        for p in pods.get("items", [])
        if any(
            o.get("kind") == "DaemonSet" and o.get("name") == DS
            for o in p["metadata"].get("ownerReferences") or []
        )
    }


def daemonset_gone(fleet: RealNodes) -> bool:
    try:
        daemonset(fleet)
    except errors.NotFoundError:
        return not agent_pods(fleet)
    return False


def boot_ids(fleet: RealNodes) -> dict[str, str]:
    return {n.name: fleet.node_obj(n.name)["status"]["nodeInfo"]["bootID"] for n in fleet.nodes}


def cordoned(fleet: RealNodes) -> list[str]:
    return [n.name for n in fleet.nodes if fleet.node_obj(n.name).get("spec", {}).get("unschedulable")]


def lease_holders(fleet: RealNodes) -> list[str]:
    leases = fleet.cluster.kube().get(
        f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases", query={"labelSelector": "pykured.dev/lock"}
    )
    return [h for item in leases.get("items", []) if (h := item.get("spec", {}).get("holderIdentity"))]


def annotation_holders(fleet: RealNodes) -> list[str]:
    raw = (daemonset(fleet)["metadata"].get("annotations") or {}).get(KURED_ANNOTATION)
    return [e.node_id for e in decode(raw).entries] if raw else []


def settled(fleet: RealNodes, before: dict[str, str], names: list[str]) -> bool:
    """``names`` rebooted (a new bootID), every node Ready on its boot and schedulable, no lock held."""
    now = boot_ids(fleet)
    return (
        all(now[n] != before[n] for n in names)
        and all(fleet.is_ready(n.name, boot=n.boots[-1]) for n in fleet.nodes)
        and not cordoned(fleet)
        and not lease_holders(fleet)
        and not annotation_holders(fleet)
    )


def workload_pods(fleet: RealNodes, namespace: str) -> dict[str, dict[str, Any]]:
    pods = fleet.cluster.kube().get(
        f"/api/v1/namespaces/{namespace}/pods", query={"labelSelector": "app=web"}
    )
    return {p["metadata"]["name"]: p for p in pods.get("items", [])}


def reset(fleet: RealNodes) -> None:
    """Between scenarios: no agent DaemonSet, no lock, every node up, Ready, uncordoned, without marks."""
    kube = fleet.cluster.kube()
    with contextlib.suppress(errors.NotFoundError):
        kube.request(
            "DELETE",
            f"/apis/apps/v1/namespaces/{NS}/daemonsets/{DS}",
            body={"propagationPolicy": "Foreground"},
            content_type="application/json",
        )
    wait_for("the agent DaemonSet and its pods to go", lambda: daemonset_gone(fleet), fleet, timeout=180)
    for lease in kube.get(
        f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases", query={"labelSelector": "pykured.dev/lock"}
    ).get("items", []):
        kube.request(
            "DELETE", f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{lease['metadata']['name']}"
        )
    for node in fleet.nodes:
        node.boot()  # a node kept down (no-op for running nodes)
    fleet.wait_ready()
    for node in fleet.nodes:
        obj = fleet.node_obj(node.name)
        marks = {
            k: None
            for k in (obj["metadata"].get("annotations") or {})
            if k.startswith(("pykured.dev/", "weave.works/"))
        }
        labels = {k: None for k in (obj["metadata"].get("labels") or {}) if k.startswith("pykured.dev/")}
        kube.patch_node(
            node.name,
            {"metadata": {"annotations": marks, "labels": labels}, "spec": {"unschedulable": None}},
            patch_type="application/merge-patch+json",
        )
        for name in ("reboot-required",):
            (node.run_dir / name).unlink(missing_ok=True)
