"""The drainer against the real API server: kubectl's filters, evictions in parallel, PodDisruptionBudgets,
grace periods, waits for deletion, cordons, kured's RBAC (the pure parts: tests/test_drain.py)."""

from __future__ import annotations

import datetime
import logging
import threading
import time
from typing import Any

import pytest

from pykured.core.errors import DrainError, DrainTimeout, NotFoundError
from pykured.drain import (
    DAEMONSET_WARNING,
    LOCAL_STORAGE_WARNING,
    MIRROR_ANNOTATION,
    UNMANAGED_WARNING,
    Drainer,
)
from pykured.gocompat.goflags import Duration
from pykured.kube.client import MERGE_PATCH, Kube
from pykured_dev.eventually import eventually

FINALIZER = "pykured.dev/test-hold"


RS_REF = {
    "apiVersion": "apps/v1",
    "kind": "ReplicaSet",
    "name": "web-rs",
    "uid": "00000000-0000-0000-0000-0000000000aa",
    "controller": True,
}
GONE_DS_REF = {
    "apiVersion": "apps/v1",
    "kind": "DaemonSet",
    "name": "gone",
    "uid": "00000000-0000-0000-0000-0000000000bb",
    "controller": True,
}


@pytest.fixture
def place(k8s: Any) -> tuple[str, str]:
    """A fresh namespace and a fresh Ready node."""
    namespace = k8s.new_namespace()
    node = k8s.unique("node")
    k8s.add_nodes(node)
    return namespace, node


def _names_on(kube: Kube, node: str) -> set[str]:
    items = kube.list_pods(field_selector=f"spec.nodeName={node}")["items"]
    return {p["metadata"]["name"] for p in items}


def _drainer(kube: Kube, node: str, **kwargs: Any) -> Drainer:
    kwargs.setdefault("timeout", 30.0)
    kwargs.setdefault("retry_delay", 0.2)
    kwargs.setdefault("max_retry_delay", 0.5)
    kwargs.setdefault("poll_interval", 0.2)
    return Drainer(kube, node=node, **kwargs)


def _blocking_pdb(k8s: Any, namespace: str, node: str) -> None:
    k8s.create_pod(namespace, "guarded", node=node, labels={"app": "guarded"}, owner=RS_REF)
    k8s.create_pdb(namespace, "pdb", {"app": "guarded"}, min_available=1)
    k8s.set_pdb_status(namespace, "pdb", disruptions_allowed=0)


def _stuck_pod(k8s: Any, namespace: str, node: str) -> None:
    """A pod a finalizer keeps in Terminating after its deletion."""
    k8s.create_pod(namespace, "stuck", node=node, owner=RS_REF)
    k8s.kube().request(
        "PATCH",
        f"/api/v1/namespaces/{namespace}/pods/stuck",
        body={"metadata": {"finalizers": [FINALIZER]}},
        content_type=MERGE_PATCH,
    )


def _release(k8s: Any, namespace: str) -> None:
    k8s.kube().request(
        "PATCH",
        f"/api/v1/namespaces/{namespace}/pods/stuck",
        body={"metadata": {"finalizers": None}},
        content_type=MERGE_PATCH,
    )


@pytest.mark.k8s
def test_drain_follows_kubectl_filters(
    k8s: Any, place: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    namespace, node = place
    kube = k8s.kube()
    ds = k8s.create_daemonset(namespace, "agent")
    k8s.create_pod(namespace, "ds-pod", node=node, owner=k8s.owner_ref(ds))
    k8s.create_pod(namespace, "static", node=node, annotations={MIRROR_ANNOTATION: "x"})
    k8s.create_pod(namespace, "scratch", node=node, owner=RS_REF, empty_dir=True)
    k8s.create_pod(namespace, "bare", node=node)
    k8s.create_pod(namespace, "web", node=node, owner=RS_REF)
    k8s.create_pod(namespace, "orphan", node=node, owner=GONE_DS_REF)
    caplog.set_level(logging.INFO, logger="pykured.drain")

    result = _drainer(kube, node).drain()

    assert {r.name for r in result.evicted} == {"scratch", "bare", "web", "orphan"}
    assert {(s.pod.name, s.reason.kind) for s in result.skipped} == {
        ("ds-pod", "daemonset"),
        ("static", "mirror"),
    }
    assert _names_on(kube, node) == {"ds-pod", "static"}
    assert result.used_eviction is True
    assert f"{DAEMONSET_WARNING}: {namespace}/ds-pod" in result.warnings
    assert f"{UNMANAGED_WARNING}: {namespace}/bare" in result.warnings
    assert f"{LOCAL_STORAGE_WARNING}: {namespace}/scratch" in result.warnings
    assert 'daemonsets.apps "gone" not found' in result.warnings
    messages = [r.getMessage() for r in caplog.records]
    assert f"evicting pod {namespace}/web" in messages
    assert "pod/web evicted" in messages
    assert any(m.startswith("WARNING: ") for m in messages)


@pytest.mark.k8s
def test_drain_of_an_empty_node(k8s: Any, place: tuple[str, str]) -> None:
    _, node = place
    result = _drainer(k8s.kube(), node).drain()
    assert (result.evicted, result.skipped, result.warnings) == ((), (), "")


@pytest.mark.k8s
def test_evictions_run_in_parallel(
    k8s: Any, place: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    """Counted, not timed: how many pods are being evicted at once (kubectl's ``evicting pod`` lines up to
    their ``evicted`` lines). One after another, that is never more than one."""
    namespace, node = place
    for i in range(20):
        k8s.create_pod(namespace, f"p{i}", node=node, owner=RS_REF, grace=1)
    caplog.set_level(logging.INFO, logger="pykured.drain")
    result = _drainer(k8s.kube(), node).drain()
    assert len(result.evicted) == 20
    assert _names_on(k8s.kube(), node) == set()
    at_once, most = 0, 0
    for record in caplog.records:
        message = record.getMessage()
        at_once += message.startswith("evicting pod ") - (message.startswith("pod/") and "evicted" in message)
        most = max(most, at_once)
    assert at_once == 0 and most > 1, most


@pytest.mark.k8s
def test_pdb_blocks_until_the_global_timeout(k8s: Any, place: tuple[str, str]) -> None:
    namespace, node = place
    _blocking_pdb(k8s, namespace, node)
    started = time.monotonic()
    with pytest.raises(DrainError) as info:
        _drainer(k8s.kube(), node, timeout=Duration.parse("2s")).drain()
    assert (
        str(info.value) == f'error when evicting pods/"guarded" -n "{namespace}": global timeout reached: 2s'
    )
    assert time.monotonic() - started > 1.9  # a lower bound: not given up before the 2 s (load only adds)
    assert _names_on(k8s.kube(), node) == {"guarded"}


@pytest.mark.k8s
def test_a_timeout_names_the_pods_that_would_not_leave(k8s: Any, place: tuple[str, str]) -> None:
    namespace, node = place
    _blocking_pdb(k8s, namespace, node)
    k8s.create_pod(namespace, "free", node=node, owner=RS_REF)
    with pytest.raises(DrainTimeout) as info:
        _drainer(k8s.kube(), node, timeout=Duration.parse("2s")).drain()
    assert info.value.pods == (f"{namespace}/guarded",)  # the free pod left in time


@pytest.mark.k8s
def test_escalation_deletes_what_the_pdb_holds_with_the_drains_filters_and_the_pods_grace(
    k8s: Any, place: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    """``--drain-escalation=delete``: after the timeout the pods the PodDisruptionBudget held are deleted
    (no eviction), each with its own grace period; DaemonSet and mirror pods stay, as in the drain; one log
    line names the pods."""
    namespace, node = place
    kube = k8s.kube()
    ds = k8s.create_daemonset(namespace, "agent")
    k8s.create_pod(namespace, "ds-pod", node=node, owner=k8s.owner_ref(ds))
    k8s.create_pod(namespace, "static", node=node, annotations={MIRROR_ANNOTATION: "x"})
    k8s.create_pod(namespace, "guarded", node=node, labels={"app": "guarded"}, owner=RS_REF, grace=3)
    k8s.create_pdb(namespace, "pdb", {"app": "guarded"}, min_available=1)
    k8s.set_pdb_status(namespace, "pdb", disruptions_allowed=0)
    drainer = _drainer(kube, node, timeout=Duration.parse("5s"))  # the kubelet takes up to 2 s to delete
    with pytest.raises(DrainTimeout):
        drainer.drain()
    seen: list[int] = []

    def watch_grace() -> bool:
        try:
            grace = kube.get_pod(namespace, "guarded")["metadata"].get("deletionGracePeriodSeconds")
        except NotFoundError:
            return True
        if grace is not None:
            seen.append(grace)
        return False

    caplog.set_level(logging.INFO, logger="pykured.drain")
    caplog.clear()
    worker = threading.Thread(target=lambda: eventually(watch_grace, timeout=20, every=0.05))
    worker.start()
    result = drainer.delete_remaining()
    worker.join(30)
    assert [r.name for r in result.evicted] == ["guarded"] and result.used_eviction is False
    assert _names_on(kube, node) == {"ds-pod", "static"}
    assert seen and set(seen) == {3}, seen  # the pod's own grace period
    lines = [
        r.getMessage() for r in caplog.records if r.levelno >= logging.INFO and "guarded" in r.getMessage()
    ]
    assert lines == [  # exactly one line names the pods the step overrode
        f"Drain escalation (delete) on node {node}: deleting 1 pods without the eviction API "
        f"(PodDisruptionBudgets no longer hold them): {namespace}/guarded"
    ]


@pytest.mark.k8s
def test_escalation_delete_times_out_too(k8s: Any, place: tuple[str, str]) -> None:
    """A pod that does not go even when deleted (a finalizer holds it): the delete step times out as well,
    naming it, for the next step (force or quarantine)."""
    namespace, node = place
    _stuck_pod(k8s, namespace, node)
    try:
        drainer = _drainer(k8s.kube(), node, timeout=Duration.parse("2s"))
        with pytest.raises(DrainTimeout):
            drainer.drain()
        with pytest.raises(DrainTimeout) as info:
            drainer.delete_remaining()
        assert info.value.pods == (f"{namespace}/stuck",)
    finally:
        _release(k8s, namespace)


@pytest.mark.k8s
def test_pdb_retry_succeeds_once_a_disruption_is_allowed(k8s: Any, place: tuple[str, str]) -> None:
    namespace, node = place
    _blocking_pdb(k8s, namespace, node)
    k8s.create_pod(namespace, "free", node=node, owner=RS_REF)
    timer = threading.Timer(1.5, k8s.set_pdb_status, (namespace, "pdb"), {"disruptions_allowed": 1})
    told: list[str] = []
    timer.start()
    try:
        result = _drainer(k8s.kube(), node, on_blocked=told.append).drain()
    finally:
        timer.join()
    assert {r.name for r in result.evicted} == {"guarded", "free"}
    assert result.seconds >= 1.4
    # the blocker the agent publishes for ``pykured status``: told once while it holds, cleared at the end
    assert len(told) == 2 and told[1] == "", told
    assert told[0].startswith(f"eviction of pod {namespace}/guarded refused: ")
    assert "disruption budget" in told[0] and told[0].endswith("(HTTP 429)")


@pytest.mark.k8s
def test_cancel_stops_a_blocked_drain(k8s: Any, place: tuple[str, str]) -> None:
    namespace, node = place
    _blocking_pdb(k8s, namespace, node)
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    # ended by the cancel: without a timeout (0) the blocked drain would never end
    with pytest.raises(DrainError, match="cancelled"):
        _drainer(k8s.kube(), node, timeout=0, cancel=cancel).drain()


@pytest.mark.k8s
@pytest.mark.parametrize(("grace_period", "expected"), [(-1, 30), (7, 7)], ids=["pod-default", "flag"])
def test_grace_period_is_passed_to_the_eviction(
    k8s: Any, place: tuple[str, str], grace_period: int, expected: int
) -> None:
    namespace, node = place
    k8s.create_pod(namespace, "slow", node=node, owner=RS_REF, grace=30)
    seen: list[int] = []
    drainer = _drainer(k8s.kube(), node, grace_period=grace_period)
    worker = threading.Thread(target=drainer.drain)
    worker.start()

    def graced() -> bool:  # the eviction's grace shows on the pod while it terminates
        try:
            grace = k8s.kube().get_pod(namespace, "slow")["metadata"].get("deletionGracePeriodSeconds")
        except NotFoundError:
            return True
        if grace is not None:
            seen.append(grace)
        return grace is not None

    eventually(graced, timeout=10)
    worker.join(30)
    assert seen == [expected]


@pytest.mark.k8s
def test_pod_selector_limits_the_drain(k8s: Any, place: tuple[str, str]) -> None:
    namespace, node = place
    k8s.create_pod(namespace, "chosen", node=node, owner=RS_REF, labels={"drain": "yes"})
    k8s.create_pod(namespace, "kept", node=node, owner=RS_REF, labels={"drain": "no"})
    result = _drainer(k8s.kube(), node, pod_selector="drain=yes").drain()
    assert [r.name for r in result.evicted] == ["chosen"]
    assert _names_on(k8s.kube(), node) == {"kept"}


@pytest.mark.k8s
def test_skip_wait_for_delete_timeout(k8s: Any, place: tuple[str, str]) -> None:
    namespace, node = place
    _stuck_pod(k8s, namespace, node)
    try:
        with pytest.raises(
            DrainError, match=r'error when waiting for pod "stuck" in namespace .* to terminate'
        ):
            _drainer(k8s.kube(), node, timeout=Duration.parse("3s")).drain()

        def terminating_for_over_two_seconds() -> bool:  # the kubelet's final delete stamps deletionTimestamp
            # kubectl's test is int(age) > 1, so an age of 1.5 s is not yet "more than 1 s": wait past 2 s
            meta = k8s.kube().get_pod(namespace, "stuck")["metadata"]
            stamp = datetime.datetime.fromisoformat(meta.get("deletionTimestamp") or "9999-01-01T00:00:00Z")
            return datetime.datetime.now(datetime.UTC) - stamp > datetime.timedelta(seconds=2.2)

        assert eventually(terminating_for_over_two_seconds, timeout=90)
        result = _drainer(k8s.kube(), node, skip_wait_for_delete_timeout=1).drain()
        assert [s.reason.kind for s in result.skipped] == [
            "deleted"
        ]  # terminating for > 1 s: not even evicted
        assert _names_on(k8s.kube(), node) == {"stuck"}
    finally:
        _release(k8s, namespace)


@pytest.mark.k8s
def test_skip_wait_for_a_pod_that_starts_terminating(k8s: Any, place: tuple[str, str]) -> None:
    namespace, node = place
    _stuck_pod(k8s, namespace, node)
    try:
        result = _drainer(k8s.kube(), node, skip_wait_for_delete_timeout=1).drain()
        assert [r.name for r in result.evicted] == ["stuck"]
        assert result.seconds > 1.0  # a lower bound: it waited its 1 s before going on (load only adds)
    finally:
        _release(k8s, namespace)


@pytest.mark.k8s
def test_delete_when_the_eviction_api_is_missing(
    k8s: Any, place: tuple[str, str], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    namespace, node = place
    _blocking_pdb(k8s, namespace, node)
    kube = k8s.kube_as("admin-no-eviction", ("system:masters",))
    monkeypatch.setattr(kube, "supports_eviction", lambda: False)
    caplog.set_level(logging.INFO, logger="pykured.drain")
    result = _drainer(kube, node).drain()
    assert result.used_eviction is False
    assert [r.name for r in result.evicted] == ["guarded"]  # DELETE does not consult PodDisruptionBudgets
    assert "pod/guarded deleted" in [r.getMessage() for r in caplog.records]


@pytest.mark.k8s
def test_cordon_and_uncordon_are_idempotent(k8s: Any, place: tuple[str, str]) -> None:
    _, node = place
    kube = k8s.kube()
    drainer = _drainer(kube, node)
    assert drainer.cordon() is True
    assert drainer.cordon() is False
    assert kube.get_node(node)["spec"]["unschedulable"] is True
    assert drainer.uncordon() is True
    assert drainer.uncordon() is False
    assert "unschedulable" not in kube.get_node(node)["spec"]


@pytest.mark.k8s
def test_cordon_of_a_missing_node_is_a_drain_error(k8s: Any) -> None:
    with pytest.raises(DrainError, match="error cordoning node"):
        _drainer(k8s.kube(), k8s.unique("missing")).cordon()


@pytest.mark.k8s
def test_the_whole_cycle_works_with_kureds_rbac(k8s: Any, place: tuple[str, str]) -> None:
    namespace, node = place
    rbac_ns = k8s.new_namespace("kured")
    k8s.apply_rbac_kured(rbac_ns)
    kube = k8s.kube_as(
        f"system:serviceaccount:{rbac_ns}:kured",
        ("system:serviceaccounts", f"system:serviceaccounts:{rbac_ns}"),
    )
    ds = k8s.create_daemonset(namespace, "agent")
    k8s.create_pod(namespace, "ds-pod", node=node, owner=k8s.owner_ref(ds))
    k8s.create_pod(namespace, "web", node=node, owner=RS_REF)
    k8s.create_pod(namespace, "bare", node=node)
    drainer = _drainer(kube, node)
    assert drainer.cordon() is True
    result = drainer.drain()
    assert {r.name for r in result.evicted} == {"web", "bare"}
    assert result.used_eviction is True
    assert drainer.uncordon() is True
    assert _names_on(k8s.kube(), node) == {"ds-pod"}
