"""kured's annotation lock, waited for on the DaemonSet's watch where RBAC grants it, on the real API server.

Each waiter authenticates with a real token of the ServiceAccount ``kured`` (TokenRequest): with kured's
RBAC plus the grant pykured's chart adds (``list``, ``watch`` on the DaemonSet by name) its wait is a
single-object watch and it sends no GET of the DaemonSet until it has taken the lock; with kured's RBAC
alone the watch is refused, said in one line, and the wait polls as kured's does. The requests are those the
waiter's client sent (:class:`FaultyKube` counts them), and the grant and the refusal are the API server's
answers to the token itself.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pykured.core.errors import ForbiddenError
from pykured.kube.client import Kube
from pykured.lock.annotation import AnnotationLock
from tests.chart.test_pykured_chart import default_role_rules
from tests.e2e.test_rbac_profiles import token_kubeconfig
from tests.lock.conftest import FaultyKube, make_annotation_lock
from tests.testenv import TestEnv

pytestmark = pytest.mark.k8s

RBAC = "/apis/rbac.authorization.k8s.io/v1"


def grant_the_watch(k8s: TestEnv, namespace: str) -> None:
    """The chart's rule for the annotation lock (``update``, ``list``, ``watch`` on the DaemonSet by name),
    bound to the ServiceAccount ``kured`` beside kured's own Role."""
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "pykured-watch"}, "rules": default_role_rules("kured")}  # fmt: skip
    k8s.ensure(f"{RBAC}/namespaces/{namespace}/roles", role)
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "pykured-watch"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pykured-watch"},
        "subjects": [{"kind": "ServiceAccount", "name": "kured", "namespace": namespace}],
    }
    k8s.ensure(f"{RBAC}/namespaces/{namespace}/rolebindings", binding)


def as_the_service_account(k8s: TestEnv, namespace: str, tmp_path: Path) -> Kube:
    token = k8s.sa_token(namespace, "kured", create=False)
    return Kube.from_kubeconfig(token_kubeconfig(k8s, tmp_path / f"kured-{namespace}.json", token))


def held_lock(k8s: TestEnv, namespace: str, holder: str) -> AnnotationLock:
    holding = make_annotation_lock(k8s.kube(), namespace, holder)
    assert holding.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    return holding


def wait_in_thread(lock: AnnotationLock, timeout: float) -> threading.Event:
    done = threading.Event()

    def wait() -> None:
        lock.wait_for_change(timeout)
        done.set()

    threading.Thread(target=wait, daemon=True).start()
    return done


def test_with_the_watch_grant_a_waiter_gets_no_daemonset_and_takes_the_freed_lock(
    k8s: TestEnv, nodes: Any, tmp_path: Path
) -> None:
    namespace = k8s.new_namespace()
    k8s.create_daemonset(namespace, "kured")
    k8s.create_daemonset(namespace, "not-kured")
    k8s.apply_rbac_kured(namespace, "kured")
    grant_the_watch(k8s, namespace)
    holder, waiter = nodes(2)
    kube = as_the_service_account(k8s, namespace, tmp_path)
    # the grant, as the token: the DaemonSet by name, and nothing else
    listed = kube.list_daemonsets(namespace, field_selector="metadata.name=kured")
    assert [d["metadata"]["name"] for d in listed["items"]] == ["kured"]
    with pytest.raises(ForbiddenError):
        kube.list_daemonsets(namespace, field_selector="metadata.name=not-kured")
    with pytest.raises(ForbiddenError):
        kube.list_daemonsets(namespace)

    holding = held_lock(k8s, namespace, holder)
    client = FaultyKube(kube)
    lock = make_annotation_lock(client, namespace, waiter, watch=True, stagger=0.2, liveness_interval=None)
    assert not lock.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    before = dict(client.calls)
    done = wait_in_thread(lock, 120)
    assert not done.wait(3)  # held: it waits, on the watch
    assert {k: v - before.get(k, 0) for k, v in client.calls.items() if v != before.get(k)} == {
        "list_daemonsets": 1,
        "watch_daemonsets": 1,
    }
    assert holding.release()
    assert done.wait(60)  # the release ended the wait (a poll-free wait of 120 s)
    assert lock.holding(now_ns=time.time_ns(), honour_ttl=False) is None
    assert lock.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    sent = {k: v - before.get(k, 0) for k, v in client.calls.items() if v != before.get(k)}
    # the take: one PUT from the watched copy; no GET of the DaemonSet from the first wait to the take
    assert sent == {"list_daemonsets": 1, "watch_daemonsets": 1, "replace_daemonset": 1}, sent
    assert holding.holders(now_ns=time.time_ns())[0].node_id == waiter


def test_under_kureds_rbac_the_watch_is_refused_once_and_the_wait_polls(
    k8s: TestEnv, nodes: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    namespace = k8s.new_namespace()
    k8s.create_daemonset(namespace, "kured")
    k8s.apply_rbac_kured(namespace, "kured")
    holder, waiter = nodes(2)
    kube = as_the_service_account(k8s, namespace, tmp_path)
    with pytest.raises(ForbiddenError):  # kured's RBAC, as the token: no list (nor watch) of daemonsets
        kube.list_daemonsets(namespace, field_selector="metadata.name=kured")

    holding = held_lock(k8s, namespace, holder)
    client = FaultyKube(kube)
    lock = make_annotation_lock(client, namespace, waiter, watch=True, poll_interval=0.2)
    assert not lock.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    with caplog.at_level(logging.INFO, logger="pykured.lock.annotation"):
        done = wait_in_thread(lock, 120)  # the daemon's first wait: --period, the lock taken as watched
        assert holding.release()
        assert done.wait(60)  # its polls saw the release
        assert not lock.watched  # later waits: at most a minute, each pass reading the DaemonSet (kured's)
        lock.wait_for_change(0.1)
        lock.wait_for_change(0.1)
    assert lock.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    said = [r.getMessage() for r in caplog.records if "Not allowed to watch daemonset" in r.getMessage()]
    assert len(said) == 1, said
    assert "`list` and `watch` on daemonsets (resourceNames: [kured])" in said[0]
    assert client.calls.get("list_daemonsets") == 1 and "watch_daemonsets" not in client.calls
    assert client.calls.get("get_daemonset", 0) >= 1  # it polled
