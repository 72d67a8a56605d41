"""``pykured lock status`` and ``pykured lock release`` on FakeKube, at an injected time (kured's RBAC on the
real API server: tests/e2e/fleet/test_locks.py)."""

from __future__ import annotations

import io
from typing import Any, TypedDict

import pytest

from pykured.fleet.locks import lock_release, lock_status
from pykured.gocompat.goflags import Duration
from tests.fakes import FakeKube
from tests.lock.conftest import ANNOTATION, T_NS, make_annotation_lock, make_lease_lock


class Where(TypedDict):
    ds_name: str
    annotation: str
    lease_prefix: str


WHERE: Where = {"ds_name": "kured", "annotation": ANNOTATION, "lease_prefix": "pykured-lock"}


def set_raw(kube: FakeKube, namespace: str, value: str) -> None:
    ds = kube.get_daemonset(namespace, "kured")
    ds["metadata"].setdefault("annotations", {})[ANNOTATION] = value
    kube.replace_daemonset(namespace, "kured", ds)


def raw(kube: FakeKube, namespace: str) -> str | None:
    value = (kube.get_daemonset(namespace, "kured")["metadata"].get("annotations") or {}).get(ANNOTATION)
    return None if value is None else str(value)


def status(kube: FakeKube, namespace: str) -> tuple[int, str]:
    out = io.StringIO()
    code = lock_status(kube, namespace=namespace, out=out, now_ns=T_NS, **WHERE)
    return code, out.getvalue()


def release(kube: FakeKube, namespace: str, node: str, **kw: Any) -> tuple[int, str]:
    out = io.StringIO()
    code = lock_release(kube, node, namespace=namespace, out=out, **WHERE, **kw)
    return code, out.getvalue()


def test_status_of_a_free_lock(kube: FakeKube, lock_ns: str) -> None:
    assert status(kube, lock_ns) == (0, "No lock holders.\n")


def test_status_lists_both_backends(kube: FakeKube, lock_ns: str, nodes: Any) -> None:
    a, b = nodes(2)
    assert (
        make_annotation_lock(kube, lock_ns, a, ttl=Duration.parse("30m"))
        .acquire(unschedulable=False, now_ns=T_NS)
        .acquired
    )
    assert make_lease_lock(kube, lock_ns, b).acquire(unschedulable=False, now_ns=T_NS).acquired
    kube.delete_node(b)
    code, text = status(kube, lock_ns)
    lines = text.splitlines()
    assert code == 0
    assert lines[0].split() == ["BACKEND", "NODE", "SINCE", "TTL", "EXPIRED", "NODE-EXISTS"]
    row_a, row_b = (line.split() for line in lines[1:])
    assert (row_a[0], row_a[1], row_a[3], row_a[4], row_a[5]) == ("annotation", a, "30m0s", "no", "yes")
    assert (row_b[0], row_b[1], row_b[3], row_b[4], row_b[5]) == ("lease", b, "never", "no", "no")


def test_status_shows_an_unreadable_value(kube: FakeKube, lock_ns: str) -> None:
    set_raw(kube, lock_ns, "{broken")
    code, text = status(kube, lock_ns)
    assert code == 0
    assert "UNREADABLE" in text and "{broken" in text and "pykured lock release" in text


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
    kube: FakeKube, lock_ns: str, stored: str, after: str | None
) -> None:
    set_raw(kube, lock_ns, stored)
    code, text = release(kube, lock_ns, "manual", backend="daemonset")
    assert code == 0, text
    remaining = raw(kube, lock_ns)
    if after is None:
        assert remaining is None
    else:
        assert remaining is not None and '"nodeID":"other"' in remaining and "manual" not in remaining
    if stored.startswith(("not", '{"nodeID":5')):
        assert stored in text  # the deleted value is shown


def test_release_a_lease_slot(kube: FakeKube, lock_ns: str, nodes: Any) -> None:
    (node,) = nodes(1)
    assert make_lease_lock(kube, lock_ns, node).acquire(unschedulable=False, now_ns=T_NS).acquired
    code, text = release(kube, lock_ns, node)
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
    kube: FakeKube, lock_ns: str, node: str, backend: str | None, code: int, text: str
) -> None:
    got_code, got_text = release(kube, lock_ns, node, backend=backend)
    assert got_code == code
    assert text in got_text
