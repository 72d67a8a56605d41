"""The test control plane is real: optimistic concurrency, PDB evictions, RBAC, reboots, tokens."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pykured.core import errors
from pykured.kube.client import Kube
from pykured_dev.eventually import eventually
from tests.testenv import TestEnv

pytestmark = pytest.mark.k8s


def test_version_is_the_built_one(k8s: TestEnv) -> None:
    assert k8s.kube().version()["gitVersion"] == "v1.37.2"


def test_stale_resource_version_on_daemonset_annotation_update_gets_409(k8s: TestEnv) -> None:
    ns = k8s.new_namespace()
    k8s.create_daemonset(ns, "kured")
    kube = k8s.kube()
    first = kube.get_daemonset(ns, "kured")
    stale = kube.get_daemonset(ns, "kured")
    first["metadata"]["annotations"]["weave.works/kured-node-lock"] = '{"nodeID":"a"}'
    kube.replace_daemonset(ns, "kured", first)
    stale["metadata"]["annotations"]["weave.works/kured-node-lock"] = '{"nodeID":"b"}'
    with pytest.raises(errors.ConflictError) as caught:
        kube.replace_daemonset(ns, "kured", stale)
    assert caught.value.status == 409
    assert (
        kube.get_daemonset(ns, "kured")["metadata"]["annotations"]["weave.works/kured-node-lock"]
        == '{"nodeID":"a"}'
    )


def test_eviction_blocked_by_pdb_gets_429(k8s: TestEnv) -> None:
    ns = k8s.new_namespace()
    node = k8s.add_nodes(k8s.unique("node"))[0]
    k8s.create_pod(ns, "guarded", node=node, labels={"app": "guarded"})
    k8s.create_pdb(ns, "guard", {"app": "guarded"}, min_available=1)
    k8s.set_pdb_status(ns, "guard", disruptions_allowed=0)
    assert k8s.kube().get_pod(ns, "guarded")["status"]["phase"] == "Running"
    with pytest.raises(errors.TooManyRequestsError) as caught:
        k8s.kube().evict_pod(ns, "guarded")
    assert caught.value.status == 429
    k8s.set_pdb_status(ns, "guard", disruptions_allowed=1)
    k8s.kube().evict_pod(ns, "guarded")
    assert k8s.kube().get_pod(ns, "guarded")["metadata"].get("deletionTimestamp")


def test_evicted_pod_disappears_after_its_grace_period(k8s: TestEnv) -> None:
    ns = k8s.new_namespace()
    node = k8s.add_nodes(k8s.unique("node"))[0]
    k8s.create_pod(ns, "p", node=node, grace=1)
    k8s.kube().evict_pod(ns, "p")

    def gone() -> bool:
        try:
            k8s.kube().get_pod(ns, "p")
        except errors.NotFoundError:
            return True
        return False

    assert eventually(gone, timeout=60), "evicted pod was never removed by the simulated kubelet"


def test_kured_identity_may_get_but_not_list_nodes(k8s: TestEnv) -> None:
    ns = k8s.new_namespace()
    node = k8s.add_nodes(k8s.unique("node"))[0]
    k8s.apply_rbac_kured(ns)
    kured = k8s.kube_as(*k8s.kured_identity(ns))
    assert kured.get_node(node)["metadata"]["name"] == node
    with pytest.raises(errors.ForbiddenError):
        kured.list_nodes()


def test_kured_identity_may_update_but_not_patch_its_daemonset(k8s: TestEnv) -> None:
    ns = k8s.new_namespace()
    k8s.create_daemonset(ns, "kured")
    k8s.create_daemonset(ns, "other")
    k8s.apply_rbac_kured(ns, ds_name="kured")
    kured = k8s.kube_as(*k8s.kured_identity(ns))
    ds = kured.get_daemonset(ns, "kured")
    ds["metadata"]["annotations"]["x"] = "y"
    kured.replace_daemonset(ns, "kured", ds)
    with pytest.raises(errors.ForbiddenError):
        kured.request(
            "PATCH",
            f"/apis/apps/v1/namespaces/{ns}/daemonsets/kured",
            body={"metadata": {"annotations": {"x": "z"}}},
            content_type="application/merge-patch+json",
        )
    other = kured.get_daemonset(ns, "other")
    with pytest.raises(errors.ForbiddenError):
        kured.replace_daemonset(ns, "other", other)


def test_simulated_reboot_changes_boot_id_and_readiness(k8s: TestEnv) -> None:
    node = k8s.add_nodes(k8s.unique("node"))[0]
    before = k8s.boot_id(node)
    after = k8s.reboot_node(node)
    assert after != before
    assert k8s.boot_id(node) == after
    ready = [c for c in k8s.kube().get_node(node)["status"]["conditions"] if c["type"] == "Ready"]
    assert ready[0]["status"] == "True"


def test_service_account_token_authenticates_in_cluster(k8s: TestEnv) -> None:
    ns = k8s.new_namespace()
    node = k8s.add_nodes(k8s.unique("node"))[0]
    k8s.apply_rbac_kured(ns)
    sa = k8s.in_cluster_dir(ns, "kured")
    kube = Kube.in_cluster(
        token_dir=sa["dir"], host=sa["KUBERNETES_SERVICE_HOST"], port=sa["KUBERNETES_SERVICE_PORT"]
    )
    assert kube.get_node(node)["metadata"]["name"] == node
    review = k8s.kube().create(
        "/apis/authentication.k8s.io/v1/tokenreviews",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": Path(sa["dir"], "token").read_text()},
        },
    )
    assert review["status"]["user"]["username"] == f"system:serviceaccount:{ns}:kured"


def test_bad_token_is_rejected(k8s: TestEnv, tmp_path: Path) -> None:
    (tmp_path / "token").write_text("not-a-token")
    (tmp_path / "ca.crt").write_bytes(k8s.ca_pem)
    kube = Kube.in_cluster(token_dir=str(tmp_path), host=k8s.host, port=str(k8s.port))
    with pytest.raises(errors.KubeError) as caught:
        kube.get_node("anything")
    assert caught.value.status == 401


def test_kube_controller_manager_fills_pdb_status(k8s: TestEnv) -> None:
    ns = k8s.new_namespace()
    node = k8s.add_nodes(k8s.unique("node"))[0]
    for i in range(2):
        k8s.create_pod(ns, f"web-{i}", node=node, labels={"app": "web"})
    k8s.create_pdb(ns, "web", {"app": "web"}, min_available=1)
    k8s.start_kcm()
    try:
        status: dict[str, Any] = {}

        def observed() -> bool:
            nonlocal status
            status = (
                k8s.kube().get(f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/web").get("status", {})
            )
            return bool(status.get("observedGeneration")) and status.get("currentHealthy") == 2

        eventually(observed, timeout=60, every=0.5)
        assert status.get("disruptionsAllowed") == 1, status
    finally:
        k8s.stop_kcm()  # the session's other tests set PDB status by hand; no controller may overwrite it
