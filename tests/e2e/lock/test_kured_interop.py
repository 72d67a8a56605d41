"""A mixed fleet: kured's lock algorithm and pykured's AnnotationLock on one DaemonSet exclude each other.

The real kured binary cannot be fetched here (the Go module proxy answers 403 "This module version is not
available" for github.com/kubereboot/kured), so :class:`KuredLock` transcribes kured 1.23's
``pkg/daemonsetlock`` step by step from kured 1.23.0's source — GET, Go-lenient JSON decode, the single-holder
or multi-holder decision, a full PUT carrying the resourceVersion, sleep 1 s and retry on 409 — and writes the
value with Go's field order. It is test code, deliberately naive (no liveness, no guard); pykured must stay
safe against it. The holder count is checked from the API server's own history of the object.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from pykured.core import errors
from pykured.kube.client import Kube
from tests.lock.conftest import (
    ANNOTATION,
    annotation_history,
    assert_one_turn_each,
    make_annotation_lock,
    race,
)
from tests.testenv import TestEnv

pytestmark = [pytest.mark.k8s, pytest.mark.slow]


def _go_time(ns: int) -> str:
    secs, frac = divmod(ns, 1_000_000_000)
    text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs))
    digits = f"{frac:09d}".rstrip("0")
    return f"{text}.{digits}Z" if digits else f"{text}Z"


def _entry(node: str, unschedulable: bool, now_ns: int, ttl: int) -> dict[str, Any]:
    return {
        "nodeID": node,
        "metadata": {"unschedulable": unschedulable},
        "created": _go_time(now_ns),
        "TTL": ttl,
    }


class KuredLock:
    """kured 1.23's DaemonSet lock, as kured's ``pkg/daemonsetlock`` implements it (TTL 0: never expires)."""

    backend = "kured"

    def __init__(self, kube: Kube, namespace: str, node: str, *, concurrency: int = 1) -> None:
        self.kube = kube
        self.namespace = namespace
        self.node_id = node
        self.concurrency = concurrency

    def _get(self) -> tuple[dict[str, Any], dict[str, Any]]:
        ds = self.kube.get_daemonset(self.namespace, "kured")
        raw = (ds["metadata"].get("annotations") or {}).get(ANNOTATION)
        return ds, (json.loads(raw) if raw else {})

    def _put(self, ds: dict[str, Any], value: dict[str, Any] | None) -> None:
        annotations = ds["metadata"].setdefault("annotations", {})
        if value is None:
            annotations.pop(ANNOTATION, None)
        else:
            annotations[ANNOTATION] = json.dumps(value, separators=(",", ":"))
        self.kube.replace_daemonset(self.namespace, "kured", ds)

    def acquire(self, *, unschedulable: bool, now_ns: int) -> Any:
        while True:
            ds, value = self._get()
            if self.concurrency <= 1:
                if value:  # single reader: holder is value.nodeID ("" for a multi value), TTL 0 never expires
                    return _Result(value.get("nodeID") == self.node_id)
                new: dict[str, Any] = _entry(self.node_id, unschedulable, now_ns, 0)
            else:
                locks = value.get("locks") or []
                if len(locks) >= self.concurrency:
                    return _Result(False)  # entries never expire with TTL 0
                new = {
                    "maxOwners": self.concurrency,
                    "locks": [*locks, _entry(self.node_id, unschedulable, now_ns, 0)],
                }
            try:
                self._put(ds, new)
                return _Result(True)
            except errors.ConflictError:
                time.sleep(1)

    def release(self) -> bool:
        while True:
            ds, value = self._get()
            if self.concurrency <= 1:
                if value.get("nodeID") != self.node_id:
                    return False
                new: dict[str, Any] | None = None
            else:
                locks = value.get("locks") or []
                mine = [i for i, e in enumerate(locks) if e.get("nodeID") == self.node_id]
                if not mine:
                    return False
                new = {
                    "maxOwners": self.concurrency,
                    "locks": [e for i, e in enumerate(locks) if i != mine[0]],
                }
            try:
                self._put(ds, new)
                return True
            except errors.ConflictError:
                time.sleep(1)

    def wait_for_change(self, timeout: float) -> None:
        time.sleep(min(timeout, 0.5))


class _Result:
    def __init__(self, acquired: bool) -> None:
        self.acquired = acquired


@pytest.mark.parametrize("concurrency", [1, 2], ids=["single-form", "multi-form"])
def test_kured_and_pykured_on_one_annotation_never_exceed_the_limit(
    k8s: TestEnv, lock_ns: str, nodes: Any, concurrency: int
) -> None:
    names = nodes(12)
    history = annotation_history(k8s.kube(), lock_ns, "kured")
    kured = [
        KuredLock(k8s.kube_as("kured-admin", ["system:masters"]), lock_ns, n, concurrency=concurrency)
        for n in names[:6]
    ]
    pykured = [
        make_annotation_lock(
            k8s.kube_as("pykured-admin", ["system:masters"]), lock_ns, n, concurrency=concurrency
        )
        for n in names[6:]
    ]
    result = race([*kured, *pykured], deadline=120.0, wait=0.5)  # type: ignore[list-item]
    history.stop()
    assert_one_turn_each(result, names, concurrency, history)  # kured's and pykured's contenders
    assert history.holders_seen == set(names)


def test_pykured_respects_a_lock_kured_holds_and_kured_respects_pykureds(
    k8s: TestEnv, lock_ns: str, nodes: Any
) -> None:
    kured_node, py_node = nodes(2)
    kured = KuredLock(k8s.kube(), lock_ns, kured_node)
    pykured = make_annotation_lock(k8s.kube(), lock_ns, py_node)
    assert kured.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    taken = pykured.acquire(unschedulable=False, now_ns=time.time_ns())
    assert not taken.acquired and taken.holder_names == kured_node
    assert kured.release()
    assert pykured.acquire(unschedulable=True, now_ns=time.time_ns()).acquired
    assert not kured.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    raw = k8s.kube().get_daemonset(lock_ns, "kured")["metadata"]["annotations"][ANNOTATION]
    assert json.loads(raw)["nodeID"] == py_node and json.loads(raw)["metadata"] == {"unschedulable": True}
