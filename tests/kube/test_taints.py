"""Tests for pykured.kube.taints' pure JSON Patch builders (the taint on FakeKube's Node and on a real Node,
with kured's RBAC and the API server's JSON patches: tests/e2e/kube/test_taints.py)."""

from __future__ import annotations

from typing import Any

import pytest

from pykured.kube.taints import PREFER_NO_SCHEDULE, add_taint_patch, remove_taint_patch

KEY = "weave.works/kured-node-reboot"
OURS = {"key": KEY, "effect": PREFER_NO_SCHEDULE}
OTHER = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
SAME_KEY_OTHER_EFFECT = {"key": KEY, "effect": "NoSchedule"}


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
