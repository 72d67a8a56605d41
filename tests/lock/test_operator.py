"""A backend as the operator commands see it, on FakeKube: :class:`PlainView` over the Lease lock (holders
sorted by node, a 403 only noted unless the backend was named); kured's annotation view is tested with its
lock (tests/lock/test_annotation.py)."""

from __future__ import annotations

import io
from typing import Any

import pytest

from pykured.core.errors import ForbiddenError, KubeError
from pykured.lock.operator import OperatorView, PlainView, Reading, Released
from tests.fakes import FakeKube
from tests.lock.conftest import T_NS, make_lease_lock


def view_of(kube: Any, namespace: str, **kw: Any) -> OperatorView:
    return PlainView(make_lease_lock(kube, namespace, "", retry_timeout=0.5), **kw)


def forbid_leases(method: str, path: str, body: Any) -> KubeError | None:
    return ForbiddenError("leases are forbidden", status=403) if "/leases" in path else None


def test_the_view_says_the_backends_word_and_where(kube: FakeKube, lock_ns: str) -> None:
    view = view_of(kube, lock_ns)
    assert (view.backend, view.subject, view.optional) == (
        "lease",
        f"lease lock {lock_ns}/pykured-lock-*",
        True,
    )
    assert view_of(kube, lock_ns, optional=False).optional is False


def test_the_holders_are_read_sorted_by_node(kube: FakeKube, lock_ns: str) -> None:
    assert view_of(kube, lock_ns).read() == Reading()
    for node in ("node-b", "node-a"):
        assert (
            make_lease_lock(kube, lock_ns, node, concurrency=2)
            .acquire(unschedulable=False, now_ns=T_NS)
            .acquired
        )
    reading = view_of(kube, lock_ns).read()
    assert [e.node_id for e in reading.holders] == ["node-a", "node-b"]
    assert (reading.unreadable, reading.error) == (None, None)


def test_a_read_that_fails_is_answered_not_raised(kube: FakeKube, lock_ns: str) -> None:
    kube.fail_next(forbid_leases)
    reading = view_of(kube, lock_ns).read()
    assert reading.holders == () and reading.error is not None and "forbidden" in str(reading.error)


def test_a_release_frees_the_nodes_slot_and_says_so(kube: FakeKube, lock_ns: str) -> None:
    assert make_lease_lock(kube, lock_ns, "node-a").acquire(unschedulable=False, now_ns=T_NS).acquired
    out = io.StringIO()
    assert view_of(kube, lock_ns).release("node-a", out=out, named=False) is Released.FREED
    assert out.getvalue() == f"Released the lease lock of node-a in {lock_ns}/pykured-lock-*\n"
    assert view_of(kube, lock_ns).release("node-a", out=out, named=False) is Released.NOT_HELD


@pytest.mark.parametrize(
    ("named", "optional", "released", "said"),
    [(False, True, Released.NOT_HELD, False), (True, True, Released.FAILED, True),
     (False, False, Released.FAILED, True)],
    ids=["tolerated", "named", "not-optional"],
)  # fmt: skip
def test_a_forbidden_release_is_only_noted_on_an_optional_backend_not_named(
    kube: FakeKube, lock_ns: str, named: bool, optional: bool, released: Released, said: bool
) -> None:
    kube.fail_next(forbid_leases)
    out = io.StringIO()
    assert view_of(kube, lock_ns, optional=optional).release("node-a", out=out, named=named) is released
    assert (out.getvalue().startswith(f"lease lock {lock_ns}/pykured-lock-*: ")) is said
