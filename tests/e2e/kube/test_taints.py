"""The taint of pykured.kube.taints on a real Node: kured's RBAC, the API server's JSON patches (``test``
guards against stale writes); its logic on FakeKube: tests/kube/test_taints.py."""

from __future__ import annotations

from typing import Any

import pytest

from pykured.core.errors import KubeError
from pykured.kube.client import JSON_PATCH, Kube
from pykured.kube.taints import PREFER_NO_SCHEDULE, PreferNoScheduleTaint, add_taint_patch, remove_taint_patch

KEY = "weave.works/kured-node-reboot"
OURS = {"key": KEY, "effect": PREFER_NO_SCHEDULE}
OTHER = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
SAME_KEY_OTHER_EFFECT = {"key": KEY, "effect": "NoSchedule"}


@pytest.fixture
def node(k8s: Any) -> str:
    name: str = k8s.unique("node")
    k8s.add_nodes(name)
    return name


def _taints(kube: Kube, node: str) -> list[dict[str, Any]]:
    return list(kube.get_node(node)["spec"].get("taints", []))


@pytest.mark.k8s
def test_taint_on_and_off_with_kureds_rbac(k8s: Any, node: str) -> None:
    rbac_ns = k8s.new_namespace("kured")
    k8s.apply_rbac_kured(rbac_ns)
    kube = k8s.kube_as(
        f"system:serviceaccount:{rbac_ns}:kured",
        ("system:serviceaccounts", f"system:serviceaccounts:{rbac_ns}"),
    )
    taint = PreferNoScheduleTaint(kube, node=node, key=KEY)
    assert "taints" not in kube.get_node(node)["spec"]  # the empty/absent list case
    assert taint.enable() is True
    assert taint.enable() is False
    assert _taints(kube, node) == [OURS]
    assert taint.disable() is True
    assert taint.disable() is False
    assert _taints(kube, node) == []


@pytest.mark.k8s
def test_other_taints_are_kept(k8s: Any, node: str) -> None:
    kube = k8s.kube()
    kube.patch_node(node, {"spec": {"taints": [OTHER]}})
    taint = PreferNoScheduleTaint(kube, node=node, key=KEY)
    assert taint.enable() is True
    assert _taints(kube, node) == [OTHER, OURS]
    kube.patch_node(
        node, [{"op": "add", "path": "/spec/taints/-", "value": SAME_KEY_OTHER_EFFECT}], patch_type=JSON_PATCH
    )
    assert taint.disable() is True
    assert _taints(kube, node) == [OTHER, SAME_KEY_OTHER_EFFECT]


@pytest.mark.k8s
def test_stale_patches_fail_instead_of_overwriting(k8s: Any, node: str) -> None:
    kube = k8s.kube()
    stale_spec = dict(kube.get_node(node)["spec"])
    kube.patch_node(node, {"spec": {"taints": [OTHER]}})  # someone else creates the list meanwhile
    patch = add_taint_patch(stale_spec, key=KEY)
    assert patch is not None
    with pytest.raises(KubeError):
        kube.patch_node(node, patch, patch_type=JSON_PATCH)
    assert _taints(kube, node) == [OTHER]
    stale_removal = remove_taint_patch({"taints": [OTHER, OURS]}, key=KEY)
    assert stale_removal is not None
    with pytest.raises(KubeError):
        kube.patch_node(node, stale_removal, patch_type=JSON_PATCH)  # index 1 does not hold our taint
    assert _taints(kube, node) == [OTHER]
