"""Tests for pykured.drain: the pure pod filters, retry delays and warnings (the drainer's evictions, PDBs and
waits on the real API server: tests/e2e/test_drain.py)."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from pykured.drain import (
    DAEMONSET_WARNING,
    LOCAL_STORAGE_WARNING,
    MIRROR_ANNOTATION,
    UNMANAGED_WARNING,
    select_pods,
)
from pykured.drain.filters import aggregate, deleted_longer_than, retry_delay_for

NOW = datetime.datetime(2026, 6, 30, 12, 0, 0, tzinfo=datetime.UTC)
RS_OWNER = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "r1", "controller": True}
DS_OWNER = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "d1", "controller": True}
NON_CONTROLLER = {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "uid": "c1"}


def pod(
    name: str,
    *,
    owner: dict[str, Any] | None = RS_OWNER,
    phase: str = "Running",
    empty_dir: bool = False,
    mirror: bool = False,
    deleted_seconds_ago: int | None = None,
    namespace: str = "ns",
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{name}"}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    if mirror:
        meta["annotations"] = {MIRROR_ANNOTATION: "hash"}
    if deleted_seconds_ago is not None:
        stamp = NOW - datetime.timedelta(seconds=deleted_seconds_ago)
        meta["deletionTimestamp"] = stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
    volumes = (
        [{"name": "scratch", "emptyDir": {}}] if empty_dir else [{"name": "cfg", "configMap": {"name": "x"}}]
    )
    return {"metadata": meta, "spec": {"nodeName": "n", "volumes": volumes}, "status": {"phase": phase}}


# name, pod, skip-timeout, missing DaemonSets, expected: ("evict", warnings) | ("skip", kind)
FILTER_CASES: list[tuple[str, dict[str, Any], int, set[tuple[str, str]], tuple[str, Any]]] = [
    ("replicaset-pod", pod("a"), 0, set(), ("evict", ())),
    ("unmanaged", pod("a", owner=None), 0, set(), ("evict", (UNMANAGED_WARNING,))),
    ("non-controller-owner", pod("a", owner=NON_CONTROLLER), 0, set(), ("evict", (UNMANAGED_WARNING,))),
    ("empty-dir", pod("a", empty_dir=True), 0, set(), ("evict", (LOCAL_STORAGE_WARNING,))),
    (
        "empty-dir-unmanaged",
        pod("a", owner=None, empty_dir=True),
        0,
        set(),
        ("evict", (LOCAL_STORAGE_WARNING, UNMANAGED_WARNING)),
    ),
    ("succeeded-unmanaged", pod("a", owner=None, phase="Succeeded", empty_dir=True), 0, set(), ("evict", ())),
    ("failed-unmanaged", pod("a", owner=None, phase="Failed"), 0, set(), ("evict", ())),
    ("daemonset", pod("a", owner=DS_OWNER), 0, set(), ("skip", "daemonset")),
    ("daemonset-succeeded", pod("a", owner=DS_OWNER, phase="Succeeded"), 0, set(), ("skip", "daemonset")),
    (
        "daemonset-missing",
        pod("a", owner=DS_OWNER),
        0,
        {("ns", "ds")},
        ("evict", ('daemonsets.apps "ds" not found',)),
    ),
    ("daemonset-other-ns-missing", pod("a", owner=DS_OWNER), 0, {("other", "ds")}, ("skip", "daemonset")),
    ("mirror", pod("a", owner=None, mirror=True), 0, set(), ("skip", "mirror")),
    ("deleted-long-ago", pod("a", deleted_seconds_ago=100), 60, set(), ("skip", "deleted")),
    ("deleted-recently", pod("a", deleted_seconds_ago=30), 60, set(), ("evict", ())),
    ("deleted-exactly-at-timeout", pod("a", deleted_seconds_ago=60), 60, set(), ("evict", ())),
    ("deleted-skip-disabled", pod("a", deleted_seconds_ago=10_000), 0, set(), ("evict", ())),
    (
        "deleted-daemonset-first-filter-wins",
        pod("a", owner=DS_OWNER, deleted_seconds_ago=100),
        60,
        set(),
        ("skip", "deleted"),
    ),
]


@pytest.fixture
def place(k8s: Any) -> tuple[str, str]:
    """A fresh namespace and a fresh Ready node."""
    namespace = k8s.new_namespace()
    node = k8s.unique("node")
    k8s.add_nodes(node)
    return namespace, node


@pytest.mark.parametrize(
    ("name", "obj", "skip", "missing", "expected"), FILTER_CASES, ids=[c[0] for c in FILTER_CASES]
)
def test_filters(
    name: str, obj: dict[str, Any], skip: int, missing: set[tuple[str, str]], expected: tuple[str, Any]
) -> None:
    selection = select_pods([obj], now=NOW, skip_wait_for_delete_timeout=skip, missing_daemonsets=missing)
    assert selection.errors == ()
    verdict, detail = expected
    if verdict == "evict":
        assert [(str(d.pod), d.warnings) for d in selection.to_evict] == [("ns/a", detail)]
        assert selection.skipped == ()
    else:
        assert selection.to_evict == ()
        assert [(str(s.pod), s.reason.kind) for s in selection.skipped] == [("ns/a", detail)]


def test_daemonset_lookup_error_stops_the_drain() -> None:
    pods = [pod("a", owner=DS_OWNER), pod("b", owner=DS_OWNER), pod("c")]
    selection = select_pods(pods, now=NOW, daemonset_errors={("ns", "ds"): "forbidden (HTTP 403)"})
    assert selection.errors == ("cannot delete forbidden (HTTP 403): ns/a, ns/b",)
    assert [str(d.pod) for d in selection.to_evict] == ["ns/c"]


def test_warning_text_groups_like_kubectl() -> None:
    pods = [
        pod("ds1", owner=DS_OWNER),
        pod("ds2", owner=DS_OWNER, namespace="kube-system"),
        pod("bare", owner=None),
        pod("scratch", empty_dir=True),
        pod("plain"),
        pod("mirror", mirror=True),
    ]
    text = select_pods(pods, now=NOW).warning_text()
    assert text == (
        f"{UNMANAGED_WARNING}: ns/bare; {LOCAL_STORAGE_WARNING}: ns/scratch; "
        f"{DAEMONSET_WARNING}: ns/ds1, kube-system/ds2"
    )


def test_no_warnings_is_empty_text() -> None:
    assert select_pods([pod("a")], now=NOW).warning_text() == ""


def test_pod_refs_carry_uid() -> None:
    (delete,) = select_pods([pod("a")], now=NOW).to_evict
    assert (delete.pod.namespace, delete.pod.name, delete.pod.uid) == ("ns", "a", "uid-a")


@pytest.mark.parametrize(
    ("seconds_ago", "timeout", "expected"),
    [(None, 5, False), (10, 0, False), (10, 5, True), (5, 5, False), (6, 5, True)],
    ids=["not-deleted", "disabled", "older", "equal-is-not-older", "one-more"],
)
def test_deleted_longer_than(seconds_ago: int | None, timeout: int, expected: bool) -> None:
    assert deleted_longer_than(pod("a", deleted_seconds_ago=seconds_ago), timeout, now=NOW) is expected


@pytest.mark.parametrize(
    ("attempt", "base", "cap", "jitter", "expected"),
    [
        (0, 5.0, 30.0, 0.0, 5.0),
        (1, 5.0, 30.0, 0.0, 10.0),
        (2, 5.0, 30.0, 0.0, 20.0),
        (3, 5.0, 30.0, 0.0, 30.0),
        (500, 5.0, 30.0, 0.0, 30.0),
        (0, 5.0, 30.0, 0.2, 6.0),
        (0, 0.0, 30.0, 0.2, 0.0),
        (3, 60.0, 30.0, 0.0, 60.0),
    ],
    ids=[
        "first",
        "doubles",
        "doubles-again",
        "capped",
        "huge-attempt",
        "jitter",
        "zero-base",
        "cap-below-base",
    ],
)
def test_retry_delay(attempt: int, base: float, cap: float, jitter: float, expected: float) -> None:
    assert retry_delay_for(attempt, base=base, cap=cap, jitter=jitter) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("messages", "expected"), [(["a"], "a"), (["a", "b"], "[a, b]")], ids=["one", "several"]
)
def test_aggregate(messages: list[str], expected: str) -> None:
    assert aggregate(messages) == expected
