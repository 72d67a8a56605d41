"""``pykured lock status`` under kured's RBAC on the real API server (the commands' logic on FakeKube:
tests/fleet/test_locks.py)."""

from __future__ import annotations

import io
from typing import Any, TypedDict

import pytest

from pykured.fleet.locks import lock_status
from pykured_dev.testenv.objects import ObjectHelpers
from tests.lock.conftest import ANNOTATION
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


def status(k8s: TestEnv, namespace: str, kube: Any = None) -> tuple[int, str]:
    out = io.StringIO()
    code = lock_status(kube or k8s.kube(), namespace=namespace, out=out, **WHERE)
    return code, out.getvalue()


def test_status_under_kured_rbac_notes_unreadable_leases(k8s: TestEnv, lock_ns: str) -> None:
    k8s.apply_rbac_kured(lock_ns, "kured")
    user, groups = ObjectHelpers.kured_identity(lock_ns)
    set_raw(k8s, lock_ns, '{"nodeID":"manual"}')
    code, text = status(k8s, lock_ns, k8s.kube_as(user, list(groups)))
    assert code == 0
    assert "lease lock" in text and "cannot read" in text
    assert "manual" in text
