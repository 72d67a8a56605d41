"""``pykured lock status`` and ``pykured lock release`` on FakeKube, at an injected time (kured's RBAC on the
real API server: tests/e2e/fleet/test_locks.py)."""

from __future__ import annotations

import io
from typing import Any, TextIO, TypedDict

import pytest

from pykured.core.errors import LockError
from pykured.fleet.locks import lock_release, lock_status
from pykured.gocompat.goflags import Duration
from pykured.kube.api import KubeApi
from pykured.lock.base import Lock, LockView
from pykured.lock.lease import LeaseLock
from pykured.lock.operator import OperatorView, Reading, Released, Unreadable
from pykured.lock.registry import BACKENDS, Backend, LockConfig, LockHooks, LockPlace
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


# -- a third backend: registered in the test alone, looped over by status and release ----------------------


class ThirdLock(LeaseLock):
    """A throwaway third backend (Leases under a prefix of its own), printed as ``3rd``."""

    backend = "3rd"


def third_lock(kube: KubeApi, namespace: str, node: str) -> ThirdLock:
    return ThirdLock(
        kube, namespace=namespace, prefix="third-lock", node_id=node, concurrency=1, ttl=Duration(0)
    )


def _build_third(cfg: LockConfig, kube: KubeApi, *, guard_only: bool, hooks: LockHooks) -> Lock:
    return third_lock(kube, cfg.ds_namespace, cfg.node_id)


def _open_third(kube: KubeApi, place: LockPlace) -> LockView:
    return third_lock(kube, place.namespace, "")


THIRD = Backend("third", _build_third, _open_third, label=ThirdLock.backend)
WITH_THIRD = BACKENDS.register(THIRD)


def test_status_and_release_loop_over_a_third_registered_backend(
    kube: FakeKube, lock_ns: str, nodes: Any
) -> None:
    a, b = nodes(2)
    assert make_annotation_lock(kube, lock_ns, a).acquire(unschedulable=False, now_ns=T_NS).acquired
    assert third_lock(kube, lock_ns, b).acquire(unschedulable=False, now_ns=T_NS).acquired
    out = io.StringIO()
    assert lock_status(kube, namespace=lock_ns, out=out, now_ns=T_NS, registry=WITH_THIRD, **WHERE) == 0
    rows = [line.split() for line in out.getvalue().splitlines()[1:]]
    assert [(r[0], r[1]) for r in rows] == [("annotation", a), ("3rd", b)]
    assert status(kube, lock_ns)[1].count("\n") == 2  # the registered backends alone know nothing of it
    for word in ("third", "3rd"):  # its flag value and its printed word
        assert third_lock(kube, lock_ns, b).acquire(unschedulable=False, now_ns=T_NS).acquired
        code, text = release(kube, lock_ns, b, backend=word, registry=WITH_THIRD)
        assert (code, text) == (0, f"Released the 3rd lock of {b} in {lock_ns}/third-lock-*\n")
    assert third_lock(kube, lock_ns, a).acquire(unschedulable=False, now_ns=T_NS).acquired
    code, text = release(kube, lock_ns, a, registry=WITH_THIRD)  # every backend by default
    assert code == 0 and text.splitlines() == [
        f"Released the annotation lock of {a} on {lock_ns}/kured",
        f"Released the 3rd lock of {a} in {lock_ns}/third-lock-*",
    ]
    code, text = release(kube, lock_ns, a, backend="fleet", registry=WITH_THIRD)
    assert (code, text) == (2, "unknown lock backend 'fleet' (choose from annotation, lease, 3rd)\n")


class StuckView:
    """A third backend's own view: a value it cannot read, and a release that fails."""

    backend, subject, optional = "stuck", "stuck lock somewhere", False

    def read(self) -> Reading:
        return Reading(unreadable=Unreadable(error=LockError("garbled"), note="stuck: UNREADABLE\n"))

    def release(self, node: str, *, out: TextIO, named: bool) -> Released:
        out.write(f"{self.subject}: cannot release {node}\n")
        return Released.FAILED


def _stuck_view(kube: KubeApi, place: LockPlace) -> OperatorView:
    return StuckView()


STUCK = Backend("stuck", _build_third, _open_third, label="stuck", view=_stuck_view)


def test_a_backends_own_view_says_what_it_cannot_read_and_release(kube: FakeKube, lock_ns: str) -> None:
    registry = BACKENDS.register(STUCK)
    out = io.StringIO()
    assert lock_status(kube, namespace=lock_ns, out=out, now_ns=T_NS, registry=registry, **WHERE) == 0
    assert out.getvalue() == "stuck: UNREADABLE\nNo lock holders.\n"
    code, text = release(kube, lock_ns, "node-0", registry=registry)
    assert (code, text) == (2, "stuck lock somewhere: cannot release node-0\n")
