"""Refusals by an admission policy: which 403 is one, and each holding said once."""

from __future__ import annotations

import logging

import pytest

from pykured.core.errors import ForbiddenError, KubeError, LockError
from pykured.lock.refusals import Refusals, refusing_policy

POLICY_403 = ForbiddenError(
    'leases.coordination.k8s.io "kured-lock-0" is forbidden: ValidatingAdmissionPolicy '
    "'pykured-agent-leases' with binding 'pykured-agent-leases' denied request: pykured agent on node a "
    "may not write Lease kured-lock-0, held by node b (HTTP 403)",
    status=403,
)
RBAC_403 = ForbiddenError(
    'leases.coordination.k8s.io "kured-lock-0" is forbidden: User "system:serviceaccount:kube-system:kured" '
    'cannot update resource "leases" (HTTP 403)',
    status=403,
)


def test_only_a_policy_s_403_is_a_refusal() -> None:
    assert refusing_policy(POLICY_403) == "pykured-agent-leases"
    wrapped = LockError("cannot take")
    wrapped.__cause__ = POLICY_403
    assert refusing_policy(wrapped) == "pykured-agent-leases"
    assert refusing_policy(RBAC_403) is None
    assert refusing_policy(KubeError("ValidatingAdmissionPolicy 'x' (HTTP 500)", status=500)) is None
    assert refusing_policy(None) is None


def test_a_refusal_is_said_once_per_holding(caplog: pytest.LogCaptureFixture) -> None:
    refusals = Refusals(backend="lease", where="kube-system/kured-lock-*")
    caplog.set_level(logging.WARNING)
    assert not refusals.refused("kured-lock-0", ("b", "t1"))
    assert not refusals.note(RBAC_403, slot="kured-lock-0", holding=("b", "t1"), holder="b", write="take")
    assert not refusals.refused("kured-lock-0", ("b", "t1"))
    for _ in range(3):
        assert refusals.note(
            POLICY_403, slot="kured-lock-0", holding=("b", "t1"), holder="b", write="take the expired slot"
        )
    assert refusals.refused("kured-lock-0", ("b", "t1"))
    assert not refusals.refused("kured-lock-0", ("b", "t2"))  # b took it anew: not refused yet
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1, lines
    assert lines[0].startswith(
        "Not allowed to take the expired slot kured-lock-0, held by node b: the admission policy "
        "pykured-agent-leases lets an agent take and free only its own node's slots"
    )
    assert "`pykured lock release b`" in lines[0]
    refusals.note(
        POLICY_403, slot="kured-lock-0", holding=("b", "t2"), holder="b", write="take the expired slot"
    )
    assert len(caplog.records) == 2  # a new holding: said again
    assert not refusals.refused("kured-lock-0", ("b", "t1"))
