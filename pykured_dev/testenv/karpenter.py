"""The real Karpenter against a test control plane: its kwok provider, built from its Go module.

``tools/karpenter-build`` (``tools/dev setup`` runs it) builds Karpenter's kwok provider,
``sigs.k8s.io/karpenter/kwok``: the real controller (provisioning, disruption, termination) with a simulated
cloud that creates a NodeClaim's Node itself instead of starting an instance. The build puts the
CustomResourceDefinitions the module ships (NodePool, NodeClaim, NodeOverlay, CapacityBuffer and the kwok
provider's KWOKNodeClass) beside the binary. :func:`find_karpenter` finds it, or says it is not built.

``Karpenter(cluster, binary).start()`` applies those CRDs, runs the controller as the cluster's admin with
leader election off and its metrics and health probes on free ports, and waits until it is ready (its caches
synced, its CRDs served). The kwok provider has no webhooks and no cloud to reach. :meth:`Karpenter.pool`
makes a NodePool whose empty nodes Karpenter consolidates after ``consolidate_after``, :meth:`Karpenter.claim`
a NodeClaim of it that Karpenter launches; the Node it creates has no kubelet behind it, so the test serves it
with the cluster's simulated kubelet (Ready, with a bootID), as kwok's node stages would.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from pathlib import Path

from pykured.core import errors
from pykured.kube.client import Obj
from pykured_dev.eventually import eventually
from pykured_dev.testenv.cluster import Cluster
from pykured_dev.testenv.procs import Proc, TestEnvError, cache_dir, free_port

BINARY = "karpenter-kwok"
NODEPOOLS = "/apis/karpenter.sh/v1/nodepools"
NODECLAIMS = "/apis/karpenter.sh/v1/nodeclaims"
NODECLASSES = "/apis/karpenter.kwok.sh/v1alpha1/kwoknodeclasses"
NODEPOOL_LABEL = "karpenter.sh/nodepool"
INSTANCE_TYPE = "c-1x-amd64-linux"
"""One of the kwok provider's instance types (its instance_types.json): 1 CPU, amd64, Linux."""
READY_TIMEOUT = 120.0


def find_karpenter() -> Path | None:
    """The built ``karpenter-kwok`` (its directory holds ``crds/``), or None when it is not built."""
    override = os.environ.get("PYKURED_TESTENV_BIN")
    link = (Path(override) if override else cache_dir() / "bin" / "current") / BINARY
    if not link.exists():
        return None
    binary = link.resolve()
    return binary if (binary.parent / "crds").is_dir() else None


class Karpenter:
    """Karpenter's kwok provider running against ``cluster``; see the module docstring."""

    def __init__(self, cluster: Cluster, binary: Path) -> None:
        self.cluster = cluster
        self.binary = binary
        self.crds = binary.parent / "crds"
        self.health_port = 0
        self.proc: Proc | None = None

    def start(self) -> Karpenter:
        """Apply the CRDs, start the controller and wait until it is ready."""
        for crd in sorted(self.crds.glob("*.yaml")):
            self.cluster.kubectl("apply", "--server-side", "-f", str(crd))
        self.cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        self.health_port = free_port()
        env = {
            **os.environ,
            "KUBECONFIG": self.cluster.admin_kubeconfig,
            "DISABLE_LEADER_ELECTION": "true",
            "METRICS_PORT": str(free_port()),
            "HEALTH_PROBE_PORT": str(self.health_port),
            "LOG_LEVEL": "debug",
        }
        self.proc = Proc("karpenter", [str(self.binary)], log_dir=self.cluster.workdir, env=env)
        if not eventually(self.ready, timeout=READY_TIMEOUT, every=0.5):
            raise TestEnvError(f"Karpenter did not become ready:\n{self.tail()}")
        return self

    def ready(self) -> bool:
        """Whether the controller answers its readiness probe (caches synced, CRDs served)."""
        if self.proc is None or not self.proc.alive():
            raise TestEnvError(f"Karpenter exited:\n{self.tail()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/readyz", timeout=5) as answer:
                return bool(answer.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def tail(self, lines: int = 40) -> str:
        """The end of the controller's log."""
        return self.proc.tail(lines) if self.proc else ""

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop(timeout=5)
            self.proc = None

    def __enter__(self) -> Karpenter:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- its objects ---------------------------------------------------------------------------------------

    def pool(self, name: str, *, consolidate_after: str = "5s") -> Obj:
        """A KWOKNodeClass and a NodePool ``name`` of it: on-demand amd64 Linux nodes, consolidated when
        empty ``consolidate_after`` after their last pod event."""
        kube = self.cluster.kube()
        kube.create(NODECLASSES, {
            "apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass", "metadata": {"name": name},
        })  # fmt: skip
        return kube.create(NODEPOOLS, {
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {
                "template": {"spec": {
                    "requirements": [
                        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                    ],
                    "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": name},
                }},
                "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": consolidate_after},
            },
        })  # fmt: skip

    def claim(self, pool: str) -> str:
        """A NodeClaim of NodePool ``pool`` (one kwok instance type), for Karpenter to launch; its name."""
        created = self.cluster.kube().create(NODECLAIMS, {
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"generateName": f"{pool}-", "labels": {NODEPOOL_LABEL: pool}},
            "spec": {
                "requirements": [
                    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [INSTANCE_TYPE]},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                    {"key": NODEPOOL_LABEL, "operator": "In", "values": [pool]},
                ],
                "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": pool},
            },
        })  # fmt: skip
        return str(created["metadata"]["name"])

    def claim_obj(self, name: str) -> Obj | None:
        """NodeClaim ``name``, or None once it is gone."""
        try:
            return self.cluster.kube().get(f"{NODECLAIMS}/{name}")
        except errors.NotFoundError:
            return None

    def node_of(self, claim: str) -> str | None:
        """The Node Karpenter launched for NodeClaim ``claim`` (its status), once it has one."""
        obj = self.claim_obj(claim)
        name = (obj or {}).get("status", {}).get("nodeName")
        return str(name) if name else None

    def condition(self, claim: str, kind: str) -> str | None:
        """The status (``"True"``...) of NodeClaim ``claim``'s condition ``kind``, if it has one."""
        for found in ((self.claim_obj(claim) or {}).get("status") or {}).get("conditions") or []:
            if found.get("type") == kind:
                return str(found.get("status"))
        return None
