"""Tests for pykured.kube.taints: pure JSON Patch builders, and the taint on a real Node."""

from __future__ import annotations

from typing import Any

import pytest

from pykured.kube.client import Kube
from pykured.kube.taints import PREFER_NO_SCHEDULE, add_taint_patch, remove_taint_patch

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
