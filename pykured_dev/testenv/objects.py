"""Helpers that create the objects tests need: namespaces, nodes, pods, DaemonSets, PDBs and kured's RBAC."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from pykured.kube.client import Kube, Obj

if TYPE_CHECKING:
    from pykured_dev.testenv.kubelet import SimulatedKubelet

KURED_CLUSTER_RULES: list[Obj] = [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "delete", "get"]},
    {"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
]
"""kured-rbac.yaml's ClusterRole ``kured`` (kured 1.23.0's manifest), exactly."""


def kured_role_rules(ds_name: str) -> list[Obj]:
    """kured-rbac.yaml's Role ``kured``: update on the named DaemonSet only."""
    return [
        {"apiGroups": ["apps"], "resources": ["daemonsets"], "resourceNames": [ds_name], "verbs": ["update"]}
    ]


class ObjectHelpers:
    """Mixed into :class:`~pykured_dev.testenv.cluster.Cluster`."""

    def kube(self) -> Kube:
        raise NotImplementedError

    def unique(self, prefix: str = "t") -> str:
        raise NotImplementedError

    def ensure(self, collection: str, obj: Obj) -> Obj:
        raise NotImplementedError

    @property
    def kubelet(self) -> SimulatedKubelet:
        raise NotImplementedError

    # -- namespaces and nodes ----------------------------------------------------------------------------

    def new_namespace(self, prefix: str = "t") -> str:
        """Create a namespace with a unique name."""
        name = self.unique(prefix)
        self.ensure_namespace(name)
        return name

    def ensure_namespace(self, name: str) -> None:
        """Create namespace ``name`` unless it exists."""
        self.ensure(
            "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        )

    def add_nodes(self, *names: str, labels: dict[str, str] | None = None) -> list[str]:
        """Ready Nodes served by the simulated kubelet."""
        for name in names:
            self.kubelet.add_node(name, labels=labels)
        return list(names)

    def reboot_node(self, name: str, *, down_seconds: float = 0.2) -> str:
        """Simulate a reboot of ``name``; returns the new bootID."""
        return self.kubelet.reboot(name, down_seconds=down_seconds)

    def boot_id(self, name: str) -> str:
        """The node's current ``status.nodeInfo.bootID``."""
        return str(self.kube().get_node(name)["status"]["nodeInfo"]["bootID"])

    def delete_node(self, name: str) -> None:
        """Delete a Node (as an autoscaler would)."""
        self.kubelet.forget(name)
        self.kube().request("DELETE", f"/api/v1/nodes/{name}")

    # -- workloads -----------------------------------------------------------------------------------------

    def create_pod(
        self,
        namespace: str,
        name: str,
        *,
        node: str | None,
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
        owner: Obj | None = None,
        empty_dir: bool = False,
        grace: int = 1,
        phase_running: bool = True,
    ) -> Obj:
        """A pod bound to ``node``; the simulated kubelet runs it unless ``phase_running`` is false."""
        meta: Obj = {"name": name, "labels": dict(labels or {}), "annotations": dict(annotations or {})}
        if owner:
            meta["ownerReferences"] = [owner]
        if not phase_running:
            meta["annotations"]["pykured.dev/test-keep-pending"] = "true"
        spec: Obj = {
            "containers": [{"name": "c", "image": "registry.invalid/pause:1"}],
            "terminationGracePeriodSeconds": grace,
        }
        if node:
            spec["nodeName"] = node
        if empty_dir:
            spec["volumes"] = [{"name": "scratch", "emptyDir": {}}]
            spec["containers"][0]["volumeMounts"] = [{"name": "scratch", "mountPath": "/scratch"}]
        pod = self.kube().create(
            f"/api/v1/namespaces/{namespace}/pods",
            {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec},
        )
        if phase_running and node:
            self.kubelet.run_pod(pod)
        return pod

    def create_daemonset(
        self, namespace: str, name: str, *, annotations: dict[str, str] | None = None
    ) -> Obj:
        """A DaemonSet object (no controller runs it); kured's lock lives in its annotations."""
        labels = {"name": name}
        body: Obj = {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": name, "annotations": dict(annotations or {})},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "kured", "image": "registry.invalid/kured:1"}]},
                },
            },
        }
        return self.kube().create(f"/apis/apps/v1/namespaces/{namespace}/daemonsets", body)

    def schedule_daemonset(self, namespace: str, name: str, *, desired: int) -> Obj:
        """The DaemonSet controller's report (it does not run here): ``desired`` nodes should run the
        DaemonSet, and do (a PUT of the ``status`` subresource, as the controller writes it)."""
        kube = self.kube()
        path = f"/apis/apps/v1/namespaces/{namespace}/daemonsets/{name}"
        ds = kube.get(path)
        ds["status"] = {
            "desiredNumberScheduled": desired,
            "currentNumberScheduled": desired,
            "numberReady": desired,
            "numberMisscheduled": 0,
        }
        return kube.request("PUT", f"{path}/status", body=ds)

    def owner_ref(self, obj: Obj, *, controller: bool = True) -> Obj:
        """An ownerReference pointing at ``obj``."""
        return {
            "apiVersion": obj["apiVersion"],
            "kind": obj["kind"],
            "name": obj["metadata"]["name"],
            "uid": obj["metadata"]["uid"],
            "controller": controller,
        }

    def create_pdb(
        self,
        namespace: str,
        name: str,
        selector_labels: dict[str, str],
        *,
        min_available: int | str | None = None,
        max_unavailable: int | str | None = None,
    ) -> Obj:
        """A policy/v1 PodDisruptionBudget."""
        spec: dict[str, Any] = {"selector": {"matchLabels": selector_labels}}
        if min_available is not None:
            spec["minAvailable"] = min_available
        if max_unavailable is not None:
            spec["maxUnavailable"] = max_unavailable
        body = {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name},
            "spec": spec,
        }
        return self.kube().create(f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets", body)

    def set_pdb_status(self, namespace: str, name: str, *, disruptions_allowed: int, healthy: int = 1) -> Obj:
        """Write a PDB's status as the disruption controller would (so evictions see it as current)."""
        path = f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/{name}"
        pdb = self.kube().get(path)
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        pdb["status"] = {
            "observedGeneration": pdb["metadata"].get("generation", 1),
            "disruptionsAllowed": disruptions_allowed,
            "currentHealthy": healthy,
            "desiredHealthy": max(healthy - disruptions_allowed, 0),
            "expectedPods": healthy,
            "conditions": [
                {
                    "type": "DisruptionAllowed",
                    "status": "True" if disruptions_allowed else "False",
                    "reason": "SufficientPods" if disruptions_allowed else "InsufficientPods",
                    "lastTransitionTime": now,
                    "message": "",
                    "observedGeneration": pdb["metadata"].get("generation", 1),
                }
            ],
        }
        return self.kube().request("PUT", f"{path}/status", body=pdb)

    # -- RBAC ----------------------------------------------------------------------------------------------

    def user_with_cluster_role(self, prefix: str, rules: list[Obj]) -> str:
        """A new user (``prefix``, made unique) bound to a ClusterRole of its own name with ``rules``.

        Returns the user's name (:meth:`~pykured_dev.testenv.cluster.Cluster.kubeconfig_for` makes its
        kubeconfig).
        """
        user = self.unique(prefix)
        self.grant_cluster_role(
            user, rules, {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}
        )
        return user

    def grant_cluster_role(self, name: str, rules: list[Obj], subject: Obj) -> None:
        """A ClusterRole ``name`` with ``rules``, and a ClusterRoleBinding of the same name to ``subject``."""
        rbac = "/apis/rbac.authorization.k8s.io/v1"
        self.kube().create(f"{rbac}/clusterroles", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name},
            "rules": rules,
        })  # fmt: skip
        self.kube().create(f"{rbac}/clusterrolebindings", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [subject],
        })  # fmt: skip

    def apply_rbac_kured(self, namespace: str = "kube-system", ds_name: str = "kured") -> str:
        """kured's exact RBAC for ServiceAccount ``namespace/kured``; returns the cluster role's name."""
        self.ensure_namespace(namespace)
        self.ensure(
            f"/api/v1/namespaces/{namespace}/serviceaccounts",
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "kured"}},
        )
        role = f"kured-{namespace}"
        subject = [{"kind": "ServiceAccount", "name": "kured", "namespace": namespace}]
        rbac = "/apis/rbac.authorization.k8s.io/v1"
        self.ensure(
            f"{rbac}/clusterroles",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": role},
                "rules": KURED_CLUSTER_RULES,
            },
        )
        self.ensure(
            f"{rbac}/clusterrolebindings",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": role},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": subject,
            },
        )
        self.ensure(
            f"{rbac}/namespaces/{namespace}/roles",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": "kured"},
                "rules": kured_role_rules(ds_name),
            },
        )
        self.ensure(
            f"{rbac}/namespaces/{namespace}/rolebindings",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": "kured"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "kured"},
                "subjects": subject,
            },
        )
        return role

    @staticmethod
    def kured_identity(namespace: str = "kube-system") -> tuple[str, tuple[str, ...]]:
        """The user and groups a pod of ServiceAccount ``namespace/kured`` authenticates as."""
        return (
            f"system:serviceaccount:{namespace}:kured",
            ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"),
        )
