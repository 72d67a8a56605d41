"""The fake API server keeps the rules the cycle relies on: resourceVersions, 409, merge and JSON patches."""

from __future__ import annotations

import pytest

from pykured.core import errors
from pykured.kube.client import JSON_PATCH, MERGE_PATCH
from tests.fakes import FakeKube


def test_a_stale_put_is_a_conflict() -> None:
    kube = FakeKube()
    kube.add_daemonset("ns", "ds")
    first = kube.get_daemonset("ns", "ds")
    second = kube.get_daemonset("ns", "ds")
    stored = kube.replace_daemonset("ns", "ds", first)
    assert int(stored["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])
    with pytest.raises(errors.ConflictError):
        kube.replace_daemonset("ns", "ds", second)


def test_merge_patch_sets_and_removes() -> None:
    kube = FakeKube()
    kube.add_node("n")
    kube.patch_node("n", {"metadata": {"annotations": {"a": "1", "b": "2"}}}, patch_type=MERGE_PATCH)
    kube.patch_node("n", {"metadata": {"annotations": {"a": None}}, "spec": {"unschedulable": True}})
    assert kube.annotations("n") == {"b": "2"} and kube.cordoned("n")


def test_json_patch_remove_of_a_missing_path_is_422() -> None:
    kube = FakeKube()
    kube.add_node("n")
    with pytest.raises(errors.KubeError) as caught:
        kube.patch_node("n", [{"op": "remove", "path": "/metadata/annotations/x~1y"}], patch_type=JSON_PATCH)
    assert caught.value.status == 422


def test_unknown_objects_and_injected_failures() -> None:
    kube = FakeKube()
    with pytest.raises(errors.NotFoundError):
        kube.get_node("missing")
    kube.add_node("n")
    kube.fail_next(lambda method, path, body: errors.KubeError("down") if method == "GET" else None)
    with pytest.raises(errors.KubeError, match="down"):
        kube.get_node("n")
    assert kube.get_node("n")["metadata"]["name"] == "n"
