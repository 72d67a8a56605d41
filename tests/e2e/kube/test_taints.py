"""The taint of pykured.kube.taints on a Node, each test on FakeKube and on a real Node: kured's RBAC, the API
server's JSON patches (``test`` guards against stale writes); its pure patch builders:
tests/kube/test_taints.py."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from pykured.core.errors import KubeError, NotFoundError
from pykured.kube.api import KubeApi
from pykured.kube.client import JSON_PATCH
from pykured.kube.taints import PREFER_NO_SCHEDULE, PreferNoScheduleTaint, add_taint_patch, remove_taint_patch
from tests.apis import Api

KEY = "weave.works/kured-node-reboot"
OURS = {"key": KEY, "effect": PREFER_NO_SCHEDULE}
OTHER = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
SAME_KEY_OTHER_EFFECT = {"key": KEY, "effect": "NoSchedule"}


def _taints(kube: KubeApi, node: str) -> list[dict[str, Any]]:
    return list(kube.get_node(node)["spec"].get("taints", []))


def test_taint_on_and_off_with_kureds_rbac(api: Api) -> None:
    node = api.add_node()
    kube = api.kured()
    taint = PreferNoScheduleTaint(kube, node=node, key=KEY)
    assert "taints" not in kube.get_node(node)["spec"]  # the empty/absent list case
    assert taint.enable() is True
    assert taint.enable() is False
    assert _taints(kube, node) == [OURS]
    assert taint.disable() is True
    assert taint.disable() is False
    assert _taints(kube, node) == []


def test_other_taints_are_kept(api: Api) -> None:
    node, kube = api.add_node(), api.kube
    kube.patch_node(node, {"spec": {"taints": [OTHER]}})
    taint = PreferNoScheduleTaint(kube, node=node, key=KEY)
    assert taint.enable() is True
    assert _taints(kube, node) == [OTHER, OURS]
    kube.patch_node(
        node, [{"op": "add", "path": "/spec/taints/-", "value": SAME_KEY_OTHER_EFFECT}], patch_type=JSON_PATCH
    )
    assert taint.disable() is True
    assert _taints(kube, node) == [OTHER, SAME_KEY_OTHER_EFFECT]


def test_stale_patches_fail_instead_of_overwriting(api: Api) -> None:
    node, kube = api.add_node(), api.kube
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


def test_missing_node_raises(api: Api) -> None:
    with pytest.raises(NotFoundError):
        PreferNoScheduleTaint(api.kured(), node=f"missing-{uuid.uuid4().hex[:8]}", key=KEY).enable()
