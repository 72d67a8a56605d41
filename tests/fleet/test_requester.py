"""The lock holders ``pykured status`` and ``pykured plan`` show (:func:`requester.lock_holders`), on
FakeKube: one line per registered backend, read through its operator view (the rest of the requester runs
against the real API server: tests/e2e/test_status.py, tests/e2e/requests/)."""

from __future__ import annotations

from typing import Any

from pykured.core.errors import ForbiddenError, KubeError
from pykured.fleet import requester
from pykured.fleet.view import LockInfo
from tests.fakes import FakeKube
from tests.fleet.test_locks import WITH_THIRD, set_raw, third_lock
from tests.lock.conftest import ANNOTATION, T_NS, make_annotation_lock, make_lease_lock


def holders(kube: FakeKube, namespace: str, **kw: Any) -> list[LockInfo]:
    return requester.lock_holders(
        kube, namespace=namespace, ds_name="kured", annotation=ANNOTATION, lease_prefix="pykured-lock", **kw
    )


def test_the_holders_of_every_backend(kube: FakeKube, lock_ns: str, nodes: Any) -> None:
    a, b, c = nodes(3)
    assert (
        make_annotation_lock(kube, lock_ns, b, concurrency=2)
        .acquire(unschedulable=False, now_ns=T_NS)
        .acquired
    )
    assert (
        make_annotation_lock(kube, lock_ns, a, concurrency=2)
        .acquire(unschedulable=False, now_ns=T_NS)
        .acquired
    )
    for node in (c, a):
        assert (
            make_lease_lock(kube, lock_ns, node, concurrency=2)
            .acquire(unschedulable=False, now_ns=T_NS)
            .acquired
        )
    assert holders(kube, lock_ns) == [LockInfo("annotation", (b, a)), LockInfo("lease", (a, c))]


def test_an_unreadable_value_and_a_forbidden_backend_are_reported(kube: FakeKube, lock_ns: str) -> None:
    set_raw(kube, lock_ns, "{broken")

    def forbid_leases(method: str, path: str, body: Any) -> KubeError | None:
        return ForbiddenError("no", status=403) if "/leases" in path else None

    kube.fail_next(forbid_leases)
    annotation, lease = holders(kube, lock_ns)
    assert annotation.backend == "annotation" and annotation.holders == ()
    assert annotation.error.startswith("unreadable value, counts as held (")
    assert lease == LockInfo("lease", error="forbidden (403) for this user")


def test_a_third_registered_backend_is_read_too(kube: FakeKube, lock_ns: str, nodes: Any) -> None:
    (node,) = nodes(1)
    assert third_lock(kube, lock_ns, node).acquire(unschedulable=False, now_ns=T_NS).acquired
    assert holders(kube, lock_ns, registry=WITH_THIRD) == [
        LockInfo("annotation", ()),
        LockInfo("lease", ()),
        LockInfo("3rd", (node,)),
    ]
    assert [info.backend for info in holders(kube, lock_ns)] == ["annotation", "lease"]
