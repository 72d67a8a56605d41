"""A simulated kubelet: Ready Nodes, running pods, graceful deletion, and reboots with a new bootID.

Without a kubelet, pods stay Pending (and Pending pods bypass PodDisruptionBudgets) and a graceful delete
never completes (no kubelet ever confirms it). This stand-in does what a kubelet does to the API objects: it
marks pods on its nodes Running and Ready, finishes graceful deletions after the grace period (capped by
``max_grace`` to keep tests quick) with a UID-preconditioned final delete, and reboots a node by setting Ready
false, then true with a fresh ``status.nodeInfo.bootID``. A node it starts to serve (created, or created again
after a delete) has its pods taken up from a list, as a kubelet starting on a node does.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import threading
import time
import uuid

from pykured.core import errors
from pykured.kube.client import Kube, Obj

logger = logging.getLogger(__name__)
KEEP_PENDING = "pykured.dev/test-keep-pending"
STATUS_RETRY_SECONDS = 120.0
"""How long a kubelet keeps posting its status, or listing its pods, while the API server does not answer."""


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class SimulatedKubelet:
    """One watch thread serving every simulated node of a cluster."""

    def __init__(self, kube: Kube, *, max_grace: float = 2.0) -> None:
        self._kube = kube
        self.max_grace = max_grace
        self._nodes: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="simulated-kubelet", daemon=True)
        self._pending_deletes: set[str] = set()

    def start(self) -> None:
        """Start watching pods."""
        self._thread.start()

    def stop(self) -> None:
        """Stop watching (the watch ends within its timeout)."""
        self._stop.set()

    # -- nodes ---------------------------------------------------------------------------------------------

    def add_node(self, name: str, *, labels: dict[str, str] | None = None) -> None:
        """Create a Ready node."""
        body: Obj = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", **(labels or {})},
                "annotations": {"pykured.dev/simulated": "true"},
            },
            "spec": {},
        }
        with contextlib.suppress(errors.ConflictError):
            self._kube.create("/api/v1/nodes", body)
        with self._lock:
            self._nodes.add(name)
        self._set_status(name, ready=True, boot_id=str(uuid.uuid4()))
        self._take_up(name)

    def _take_up(self, name: str) -> None:
        """A kubelet's first sync: the pods already bound to ``name`` are run, or their deletion finished.

        The watch ignored them while ``name`` was not served (its Node deleted, say), and nothing need ever
        modify them again: an eviction or a graceful delete of a pod that is terminating already changes
        nothing, so no watch event would bring it back. A kubelet starting on a node lists the pods bound to
        it and takes them all up. Events after ``name`` was added are the watch's; a pod seen by both is
        handled once (a pending deletion per UID) or marked Running twice.
        """
        deadline = time.monotonic() + STATUS_RETRY_SECONDS
        while True:
            try:
                listing = self._kube.list_pods(field_selector=f"spec.nodeName={name}")
                for pod in listing.get("items", []):
                    self._handle(pod)
                return
            except errors.KubeError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.5)

    def forget(self, name: str) -> None:
        """Stop serving ``name``."""
        with self._lock:
            self._nodes.discard(name)

    def serves(self, name: str | None) -> bool:
        """Whether ``name`` is one of this kubelet's nodes."""
        with self._lock:
            return name in self._nodes

    def reboot(self, name: str, *, down_seconds: float = 0.2) -> str:
        """Ready false, wait, a new bootID, Ready true; returns the new bootID."""
        self._set_status(name, ready=False, boot_id=None)
        time.sleep(down_seconds)
        boot_id = str(uuid.uuid4())
        self._set_status(name, ready=True, boot_id=boot_id)
        return boot_id

    def _set_status(self, name: str, *, ready: bool, boot_id: str | None) -> None:
        now = _now()
        condition = {
            "type": "Ready",
            "status": "True" if ready else "False",
            "reason": "KubeletReady" if ready else "KubeletNotReady",
            "message": "simulated kubelet is posting ready status" if ready else "node is rebooting",
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }
        status: Obj = {"conditions": [condition]}
        if boot_id is not None:
            status.update(
                nodeInfo={
                    "bootID": boot_id,
                    "machineID": uuid.uuid5(uuid.NAMESPACE_DNS, name).hex,
                    "systemUUID": str(uuid.uuid5(uuid.NAMESPACE_URL, name)),
                    "kernelVersion": "6.1.0-sim",
                    "osImage": "pykured simulated node",
                    "containerRuntimeVersion": "sim://1.0",
                    "kubeletVersion": "v1.37.2",
                    "kubeProxyVersion": "",
                    "operatingSystem": "linux",
                    "architecture": "amd64",
                },
                addresses=[
                    {"type": "InternalIP", "address": "10.0.0.1"},
                    {"type": "Hostname", "address": name},
                ],
                capacity={"cpu": "4", "memory": "8Gi", "pods": "250"},
                allocatable={"cpu": "4", "memory": "8Gi", "pods": "250"},
            )
        # A kubelet keeps posting its status until the API server takes it (it may be restarting).
        deadline = time.monotonic() + STATUS_RETRY_SECONDS
        while True:
            try:
                self._kube.patch_node_status(name, {"status": status})
                return
            except errors.NotFoundError:
                raise
            except errors.KubeError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.5)

    # -- pods ----------------------------------------------------------------------------------------------

    def run_pod(self, pod: Obj) -> None:
        """Mark a pod Running and Ready."""
        meta = pod["metadata"]
        if meta.get("annotations", {}).get(KEEP_PENDING) or meta.get("deletionTimestamp"):
            return
        now = _now()
        status = {
            "phase": "Running",
            "podIP": "10.1.0.1",
            "startTime": now,
            "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": now},
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": now},
            ],
        }
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status"
        with contextlib.suppress(errors.NotFoundError):
            self._kube.request(
                "PATCH", path, body={"status": status}, content_type="application/strategic-merge-patch+json"
            )

    def _finish_delete(self, pod: Obj) -> None:
        meta = pod["metadata"]
        grace = float(meta.get("deletionGracePeriodSeconds") or 0)
        key = meta["uid"]
        with self._lock:
            if key in self._pending_deletes:
                return
            self._pending_deletes.add(key)

        def remove() -> None:
            try:
                self._kube.delete_pod(
                    meta["namespace"], meta["name"], grace_period_seconds=0, uid=meta["uid"]
                )
            except errors.KubeError:
                pass
            finally:
                with self._lock:
                    self._pending_deletes.discard(key)

        timer = threading.Timer(min(grace, self.max_grace), remove)
        timer.daemon = True
        timer.start()

    def _handle(self, pod: Obj) -> None:
        if not self.serves(pod.get("spec", {}).get("nodeName")):
            return
        if pod["metadata"].get("deletionTimestamp"):
            self._finish_delete(pod)
        elif pod.get("status", {}).get("phase") in (None, "Pending"):
            self.run_pod(pod)

    def _loop(self) -> None:
        resource_version = ""
        while not self._stop.is_set():
            try:
                if not resource_version:
                    listing = self._kube.list_pods()
                    for pod in listing.get("items", []):
                        self._handle(pod)
                    resource_version = listing["metadata"]["resourceVersion"]
                for event in self._kube.watch(
                    "/api/v1/pods", query={"resourceVersion": resource_version}, timeout_seconds=30
                ):
                    if self._stop.is_set():
                        return
                    obj = event.get("object", {})
                    if event.get("type") == "ERROR":
                        resource_version = ""
                        break
                    resource_version = obj.get("metadata", {}).get("resourceVersion", resource_version)
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        self._handle(obj)
            except errors.KubeError as exc:
                logger.debug("simulated kubelet watch restarts: %s", exc)
                resource_version = ""
                time.sleep(0.5)
