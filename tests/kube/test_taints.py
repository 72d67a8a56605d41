"""Tests for pykured.kube.taints: pure JSON Patch builders, and the taint on FakeKube's Node (on a real Node,
with kured's RBAC and the API server's JSON patches: tests/e2e/kube/test_taints.py)."""

from __future__ import annotations

from typing import Any

import pytest

from pykured.core.errors import KubeError, NotFoundError
from pykured.kube.client import JSON_PATCH
from pykured.kube.taints import PREFER_NO_SCHEDULE, PreferNoScheduleTaint, add_taint_patch, remove_taint_patch
from tests.fakes import FakeKube

KEY = "weave.works/kured-node-reboot"
OURS = {"key": KEY, "effect": PREFER_NO_SCHEDULE}
OTHER = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
SAME_KEY_OTHER_EFFECT = {"key": KEY, "effect": "NoSchedule"}


@pytest.fixture
def kube() -> FakeKube:
    return FakeKube()


@pytest.fixture
def node(kube: FakeKube) -> str:
    kube.add_node("n1")
    return "n1"


def _taints(kube: Any, node: str) -> list[dict[str, Any]]:
    return list(kube.get_node(node)["spec"].get("taints", []))


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            {},
            [
                {"op": "test", "path": "/spec", "value": {}},
                {"op": "add", "path": "/spec/taints", "value": [OURS]},
            ],
        ),
        (
            {"podCIDR": "10.0.0.0/24", "taints": []},
            [
                {"op": "test", "path": "/spec", "value": {"podCIDR": "10.0.0.0/24", "taints": []}},
                {"op": "add", "path": "/spec/taints", "value": [OURS]},
            ],
        ),
        ({"taints": [OTHER]}, [{"op": "add", "path": "/spec/taints/-", "value": OURS}]),
        ({"taints": [SAME_KEY_OTHER_EFFECT]}, [{"op": "add", "path": "/spec/taints/-", "value": OURS}]),
        ({"taints": [OTHER, OURS]}, None),
    ],
    ids=["absent-list", "empty-list", "append", "same-key-other-effect", "already-there"],
)
def test_add_patch(spec: dict[str, Any], expected: list[dict[str, Any]] | None) -> None:
    assert add_taint_patch(spec, key=KEY) == expected


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({}, None),
        ({"taints": [OTHER]}, None),
        ({"taints": [SAME_KEY_OTHER_EFFECT]}, None),
        (
            {"taints": [OTHER, OURS]},
            [
                {"op": "test", "path": "/spec/taints/1", "value": OURS},
                {"op": "remove", "path": "/spec/taints/1"},
            ],
        ),
        (
            {"taints": [OURS]},
            [
                {"op": "test", "path": "/spec/taints/0", "value": OURS},
                {"op": "remove", "path": "/spec/taints/0"},
            ],
        ),
    ],
    ids=["absent-list", "not-there", "other-effect-kept", "second", "only"],
)
def test_remove_patch(spec: dict[str, Any], expected: list[dict[str, Any]] | None) -> None:
    assert remove_taint_patch(spec, key=KEY) == expected


def test_other_taints_are_kept(kube: FakeKube, node: str) -> None:
    kube.patch_node(node, {"spec": {"taints": [OTHER]}})
    taint = PreferNoScheduleTaint(kube, node=node, key=KEY)
    assert taint.enable() is True
    assert _taints(kube, node) == [OTHER, OURS]
    kube.patch_node(
        node, [{"op": "add", "path": "/spec/taints/-", "value": SAME_KEY_OTHER_EFFECT}], patch_type=JSON_PATCH
    )
    assert taint.disable() is True
    assert _taints(kube, node) == [OTHER, SAME_KEY_OTHER_EFFECT]


def test_stale_patches_fail_instead_of_overwriting(kube: FakeKube, node: str) -> None:
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


def test_missing_node_raises(kube: FakeKube) -> None:
    with pytest.raises(NotFoundError):
        PreferNoScheduleTaint(kube, node="missing", key=KEY).enable()
