"""The fake API server keeps the rules the cycle and the locks rely on: resourceVersions, 409, merge and JSON
patches, Leases, label selectors, watches (order, resuming, 410 Gone, bookmarks, ending).

Each rule here is one the real API server keeps (tests/e2e/ holds the evidence on the real one: the lock
tests' races, watches and conflicts); these tests only keep the fake honest for the logic tested on it."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from pykured.core import errors
from pykured.kube.client import JSON_PATCH, MERGE_PATCH, Obj
from tests.fakes import FakeKube, RecordingNotifier, RecordingRebooter, selector_matches

NS = "kube-system"
LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases"


def lease(name: str, *, holder: str | None = None, **labels: str) -> Obj:
    spec: Obj = {"holderIdentity": holder} if holder else {}
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": spec,
    }


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


def test_a_lease_is_created_once_and_replaced_only_at_its_version() -> None:
    kube = FakeKube()
    with pytest.raises(errors.NotFoundError):
        kube.get_lease(NS, "slot-0")
    with pytest.raises(errors.NotFoundError):
        kube.replace_lease(NS, "slot-0", lease("slot-0"))
    created = kube.create_lease(NS, lease("slot-0", holder="a"))
    assert created["metadata"]["namespace"] == NS and created["metadata"]["uid"]
    with pytest.raises(errors.ConflictError, match="already exists"):
        kube.create_lease(NS, lease("slot-0", holder="b"))
    read = kube.get_lease(NS, "slot-0")
    assert read == created
    taken = {**read, "spec": {"holderIdentity": "b"}}
    stored = kube.replace_lease(NS, "slot-0", taken)
    assert int(stored["metadata"]["resourceVersion"]) > int(read["metadata"]["resourceVersion"])
    with pytest.raises(errors.ConflictError, match="has been modified"):
        kube.replace_lease(NS, "slot-0", {**read, "spec": {"holderIdentity": "c"}})
    assert kube.get_lease(NS, "slot-0")["spec"]["holderIdentity"] == "b"
    unconditional = lease("slot-0", holder="d")  # no resourceVersion: the API server lets it through
    assert kube.replace_lease(NS, "slot-0", unconditional)["metadata"]["uid"] == created["metadata"]["uid"]


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("pykured.dev/lock=kured-lock", True),
        ("pykured.dev/lock==kured-lock,app.kubernetes.io/managed-by=pykured", True),
        ("pykured.dev/lock=other", False),
        ("pykured.dev/lock!=kured-lock", False),
        ("pykured.dev/lock", True),
        ("!pykured.dev/lock", False),
        ("missing", False),
        ("!missing", True),
        ("", True),
        (None, True),
    ],
)
def test_label_selectors(selector: str | None, expected: bool) -> None:
    labels = {"pykured.dev/lock": "kured-lock", "app.kubernetes.io/managed-by": "pykured"}
    assert selector_matches(selector, labels) is expected


def test_lists_filter_by_namespace_labels_and_name_and_carry_the_newest_version() -> None:
    kube = FakeKube()
    kube.create_lease(NS, lease("a-0", **{"pykured.dev/lock": "a"}))
    kube.create_lease(NS, lease("b-0", **{"pykured.dev/lock": "b"}))
    kube.create_lease("other", lease("a-0", **{"pykured.dev/lock": "a"}))
    listed = kube.list_leases(NS, label_selector="pykured.dev/lock=a")
    assert [item["metadata"]["name"] for item in listed["items"]] == ["a-0"]
    assert listed["metadata"]["resourceVersion"] == kube.resource_version
    by_name = kube.get(LEASES, query={"fieldSelector": "metadata.name=b-0"})
    assert [item["metadata"]["name"] for item in by_name["items"]] == ["b-0"]
    assert kube.get(f"{LEASES}/b-0")["metadata"]["name"] == "b-0"
    with pytest.raises(errors.NotFoundError):
        kube.get("/apis/batch/v1/jobs")


def collect(events: Any, count: int) -> list[tuple[str, str, str]]:
    out = []
    for event in events:
        meta = event["object"]["metadata"]
        out.append((event["type"], meta.get("name", ""), meta["resourceVersion"]))
        if len(out) == count:
            break
    return out


def test_a_watch_resumes_after_its_version_in_order_and_filters_by_labels() -> None:
    kube = FakeKube()
    kube.create_lease(NS, lease("a-0", **{"pykured.dev/lock": "a"}))
    start = kube.resource_version
    kube.replace_lease(NS, "a-0", lease("a-0", holder="n1", **{"pykured.dev/lock": "a"}))
    kube.create_lease(NS, lease("b-0", **{"pykured.dev/lock": "b"}))  # another selector: not seen
    kube.add_node("n1")  # another resource: not seen
    kube.delete_lease(NS, "a-0")
    events = collect(kube.watch_leases(NS, resource_version=start, label_selector="pykured.dev/lock=a"), 2)
    assert [(kind, name) for kind, name, _ in events] == [("MODIFIED", "a-0"), ("DELETED", "a-0")]
    versions = [int(rv) for _, _, rv in events]
    assert versions == sorted(versions) and versions[0] > int(start)


def test_a_watch_waits_for_new_writes_and_ends_when_told() -> None:
    kube = FakeKube()
    seen: list[tuple[str, str, str]] = []
    watcher = threading.Thread(
        target=lambda: seen.extend(collect(kube.watch_leases(NS, resource_version=kube.resource_version), 99))
    )
    watcher.start()
    assert kube.wait_for_watches(1)
    kube.create_lease(NS, lease("a-0"))
    kube.bookmark()
    kube.end_watches()
    watcher.join(timeout=10)
    assert not watcher.is_alive() and kube.open_watches == 0
    assert [(kind, name) for kind, name, _ in seen] == [("ADDED", "a-0"), ("BOOKMARK", "")]
    assert seen[1][2] == kube.resource_version


def test_a_watch_from_a_compacted_version_is_gone() -> None:
    kube = FakeKube()
    kube.create_lease(NS, lease("a-0"))
    old = kube.resource_version
    kube.replace_lease(NS, "a-0", lease("a-0", holder="n1"))
    kube.compact()
    (event,) = list(kube.watch_leases(NS, resource_version=old))
    assert event["type"] == "ERROR" and event["object"]["code"] == 410
    kube.fail_next(lambda m, p, b: errors.KubeError("Gone (HTTP 410)", status=410) if m == "WATCH" else None)
    with pytest.raises(errors.KubeError) as caught:
        kube.watch_leases(NS, resource_version=kube.resource_version)
    assert caught.value.status == 410


def test_node_watch_by_name_sees_patches_and_deletion() -> None:
    kube = FakeKube()
    kube.add_node("n1")
    kube.add_node("n2")
    start = kube.resource_version
    kube.patch_node("n2", {"metadata": {"annotations": {"x": "1"}}})
    kube.patch_node("n1", {"spec": {"unschedulable": True}})
    kube.delete_node("n1")
    events = collect(kube.watch_nodes(resource_version=start, field_selector="metadata.name=n1"), 2)
    assert [(kind, name) for kind, name, _ in events] == [("MODIFIED", "n1"), ("DELETED", "n1")]


def test_configmaps_through_request_create_once_put_at_their_version_and_patch() -> None:
    kube = FakeKube()
    path = f"/api/v1/namespaces/{NS}/configmaps"
    body: Obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "policy"}}
    created = kube.request("POST", path, body=body)
    with pytest.raises(errors.ConflictError):
        kube.request("POST", path, body=body)
    read = kube.request("GET", f"{path}/policy")
    assert read == created and read["metadata"]["namespace"] == NS
    kube.request("PATCH", f"{path}/policy", body={"data": {"a": "1"}}, content_type=MERGE_PATCH)
    with pytest.raises(errors.ConflictError):
        kube.request("PUT", f"{path}/policy", body={**read, "data": {"a": "2"}})
    assert kube.request("GET", f"{path}/policy")["data"] == {"a": "1"}
    kube.request("DELETE", f"{path}/policy")
    with pytest.raises(errors.NotFoundError):
        kube.request("GET", f"{path}/policy")


def test_node_writes_are_called_back_with_the_answer() -> None:
    kube = FakeKube()
    kube.add_node("n")
    seen: list[tuple[str, str]] = []
    kube.on_node_written(lambda name, node: seen.append((name, node["metadata"]["resourceVersion"])))
    answer = kube.patch_node("n", {"metadata": {"labels": {"x": "1"}}})
    assert seen == [("n", answer["metadata"]["resourceVersion"])]


def test_pods_are_read_deleted_at_a_uid_and_evicted_at_once() -> None:
    kube = FakeKube()
    kube.pods = [
        {"metadata": {"namespace": "default", "name": name, "uid": f"uid-{name}"}} for name in ("a", "b", "c")
    ]
    assert kube.get_pod("default", "a")["metadata"]["uid"] == "uid-a"
    with pytest.raises(errors.ConflictError):
        kube.delete_pod("default", "a", uid="uid-other")
    assert kube.delete_pod("default", "a", uid="uid-a")["metadata"]["name"] == "a"
    assert kube.evict_pod("default", "b", grace_period_seconds=0)["status"] == "Success"
    assert [p["metadata"]["name"] for p in kube.list_pods(namespace="default")["items"]] == ["c"]
    for call in (kube.get_pod, kube.delete_pod, kube.evict_pod):
        with pytest.raises(errors.NotFoundError):
            call("default", "a")
    assert kube.calls("POST", "/pods/b/eviction") == 1 and kube.calls("DELETE", "/pods/") == 3


def test_create_posts_to_a_collection_once() -> None:
    kube = FakeKube()
    body: Obj = {"metadata": {"name": "policy"}, "data": {"k": "v"}}
    assert kube.create("/api/v1/namespaces/ns/configmaps", body)["metadata"]["namespace"] == "ns"
    assert kube.get("/api/v1/namespaces/ns/configmaps/policy")["data"] == {"k": "v"}
    with pytest.raises(errors.ConflictError):
        kube.create("/api/v1/namespaces/ns/configmaps", body)


def test_the_recording_doubles_record_in_order() -> None:
    notifier = RecordingNotifier()
    assert notifier.notify_drain("n1") and notifier.notify_reboot("n1") and notifier.notify_uncordon("n2")
    assert notifier.send("a halt") is True  # other messages go nowhere
    assert notifier.sent == [("drain", "n1"), ("reboot", "n1"), ("uncordon", "n2")]
    assert notifier.kinds == ["drain", "reboot", "uncordon"]
    rebooter = RecordingRebooter(fail=True)
    with pytest.raises(errors.RebootError):
        rebooter.reboot()
    rebooter.withdraw()
    assert (rebooter.calls, rebooter.withdrawn, rebooter.hands_off) == (1, 1, False)
