"""``pykured lock status`` and ``pykured lock release`` against the real API server."""

from __future__ import annotations

import io
import time
from typing import Any, TypedDict

import pytest

from pykured.gocompat.goflags import Duration
from pykured.lock.admin import lock_release, lock_status
from pykured_dev.testenv.objects import ObjectHelpers
from tests.lock.conftest import ANNOTATION, make_annotation_lock, make_lease_lock
from tests.testenv import TestEnv

pytestmark = pytest.mark.k8s


class Where(TypedDict):
    ds_name: str
    annotation: str
    lease_prefix: str


WHERE: Where = {"ds_name": "kured", "annotation": ANNOTATION, "lease_prefix": "pykured-lock"}


def set_raw(k8s: TestEnv, namespace: str, value: str) -> None:
    kube = k8s.kube()
    ds = kube.get_daemonset(namespace, "kured")
    ds["metadata"].setdefault("annotations", {})[ANNOTATION] = value
    kube.replace_daemonset(namespace, "kured", ds)


def raw(k8s: TestEnv, namespace: str) -> str | None:
    value = (k8s.kube().get_daemonset(namespace, "kured")["metadata"].get("annotations") or {}).get(
        ANNOTATION
    )
    return None if value is None else str(value)


def status(k8s: TestEnv, namespace: str, kube: Any = None) -> tuple[int, str]:
    out = io.StringIO()
    code = lock_status(kube or k8s.kube(), namespace=namespace, out=out, **WHERE)
    return code, out.getvalue()


def release(k8s: TestEnv, namespace: str, node: str, **kw: Any) -> tuple[int, str]:
    out = io.StringIO()
    code = lock_release(k8s.kube(), node, namespace=namespace, out=out, **WHERE, **kw)
    return code, out.getvalue()


def test_status_of_a_free_lock(k8s: TestEnv, lock_ns: str) -> None:
    assert status(k8s, lock_ns) == (0, "No lock holders.\n")


def test_status_lists_both_backends(k8s: TestEnv, lock_ns: str, nodes: Any) -> None:
    kube = k8s.kube()
    a, b = nodes(2)
    assert (
        make_annotation_lock(kube, lock_ns, a, ttl=Duration.parse("30m"))
        .acquire(unschedulable=False, now_ns=time.time_ns())
        .acquired
    )
    assert make_lease_lock(kube, lock_ns, b).acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    k8s.delete_node(b)
    code, text = status(k8s, lock_ns)
    lines = text.splitlines()
    assert code == 0
    assert lines[0].split() == ["BACKEND", "NODE", "SINCE", "TTL", "EXPIRED", "NODE-EXISTS"]
    row_a, row_b = (line.split() for line in lines[1:])
    assert (row_a[0], row_a[1], row_a[3], row_a[4], row_a[5]) == ("annotation", a, "30m0s", "no", "yes")
    assert (row_b[0], row_b[1], row_b[3], row_b[4], row_b[5]) == ("lease", b, "never", "no", "no")


def test_status_shows_an_unreadable_value(k8s: TestEnv, lock_ns: str) -> None:
    set_raw(k8s, lock_ns, "{broken")
    code, text = status(k8s, lock_ns)
    assert code == 0
    assert "UNREADABLE" in text and "{broken" in text and "pykured lock release" in text


def test_status_under_kured_rbac_notes_unreadable_leases(k8s: TestEnv, lock_ns: str) -> None:
    k8s.apply_rbac_kured(lock_ns, "kured")
    user, groups = ObjectHelpers.kured_identity(lock_ns)
    set_raw(k8s, lock_ns, '{"nodeID":"manual"}')
    code, text = status(k8s, lock_ns, k8s.kube_as(user, list(groups)))
    assert code == 0
    assert "lease lock" in text and "cannot read" in text
    assert "manual" in text


@pytest.mark.parametrize(
    ("stored", "after"),
    [
        ('{"nodeID":"manual"}', None),
        ('{"maxOwners":2,"locks":[{"nodeID":"manual"},{"nodeID":"other"}]}', "other"),
        ("not json at all", None),
        ('{"nodeID":5}', None),
    ],
    ids=["manual-single", "manual-in-multi", "invalid-json", "wrong-type"],
)
def test_release_manual_and_corrupt_values(
    k8s: TestEnv, lock_ns: str, stored: str, after: str | None
) -> None:
    set_raw(k8s, lock_ns, stored)
    code, text = release(k8s, lock_ns, "manual", backend="daemonset")
    assert code == 0, text
    remaining = raw(k8s, lock_ns)
    if after is None:
        assert remaining is None
    else:
        assert remaining is not None and '"nodeID":"other"' in remaining and "manual" not in remaining
    if stored.startswith(("not", '{"nodeID":5')):
        assert stored in text  # the deleted value is shown


def test_release_a_lease_slot(k8s: TestEnv, lock_ns: str, nodes: Any) -> None:
    kube = k8s.kube()
    (node,) = nodes(1)
    assert make_lease_lock(kube, lock_ns, node).acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    code, text = release(k8s, lock_ns, node)
    assert code == 0 and "Released the lease lock" in text
    assert "holderIdentity" not in kube.get_lease(lock_ns, "pykured-lock-0")["spec"]


@pytest.mark.parametrize(
    ("node", "backend", "code", "text"),
    [
        ("nobody", None, 1, "nobody holds no lock slot"),
        ("nobody", "fleet", 2, "unknown lock backend"),
    ],
    ids=["not-a-holder", "bad-backend"],
)
def test_release_errors(
    k8s: TestEnv, lock_ns: str, node: str, backend: str | None, code: int, text: str
) -> None:
    got_code, got_text = release(k8s, lock_ns, node, backend=backend)
    assert got_code == code
    assert text in got_text
