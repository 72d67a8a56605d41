"""``pykured unquarantine``: the record goes, and the cordon with it only when it was pykured's (the
conditional write and the admission policies on the real API server: tests/e2e/fleet/test_quarantine.py)."""

from __future__ import annotations

import datetime

import pytest

from pykured.core.errors import ConflictError, NotFoundError
from pykured.fleet.quarantine import unquarantine
from pykured.policy.quarantine import QUARANTINED_ANNOTATION, QuarantineRecord
from tests.fakes import FakeKube

NOW = datetime.datetime(2026, 12, 3, 2, 0, tzinfo=datetime.UTC)


def _kube(record: str | None, *, cordoned: bool) -> FakeKube:
    kube = FakeKube()
    kube.add_node("n1")
    annotations = {QUARANTINED_ANNOTATION: record} if record is not None else {}
    kube.patch_node("n1", {"metadata": {"annotations": annotations}, "spec": {"unschedulable": cordoned}})
    return kube


def _record(*, cordoned: bool) -> str:
    return QuarantineRecord.make(reason="drain timed out", at=NOW, pods=["ns/a"], cordoned=cordoned).to_json()


def _state(kube: FakeKube) -> tuple[bool, bool]:
    node = kube.nodes["n1"]
    return QUARANTINED_ANNOTATION in node["metadata"].get("annotations", {}), bool(
        node["spec"].get("unschedulable")
    )


def test_pykureds_cordon_is_undone_with_the_record() -> None:
    kube = _kube(_record(cordoned=True), cordoned=True)
    done = unquarantine(kube, "n1")
    assert done.uncordoned and done.record is not None and _state(kube) == (False, False)
    assert done.describe() == "node n1: quarantine ended, uncordoned"


def test_an_admins_cordon_stays() -> None:
    kube = _kube(_record(cordoned=False), cordoned=True)
    done = unquarantine(kube, "n1")
    assert not done.uncordoned and done.left_cordoned and _state(kube) == (False, True)
    assert done.describe() == "node n1: quarantine ended; left cordoned (not cordoned by pykured)"


def test_a_garbled_record_goes_and_leaves_the_cordon() -> None:
    kube = _kube('{"cordoned":true', cordoned=True)
    done = unquarantine(kube, "n1")
    assert not done.uncordoned and _state(kube) == (False, True)
    assert done.describe() == "node n1: quarantine ended; left cordoned (cannot tell whose cordon it is)"


def test_a_node_not_quarantined_is_left_alone() -> None:
    kube = _kube(None, cordoned=True)
    done = unquarantine(kube, "n1")
    assert done.record is None and _state(kube) == (False, True)
    assert done.describe() == "node n1 is not quarantined"


def test_an_unknown_node_is_an_error() -> None:
    with pytest.raises(NotFoundError):
        unquarantine(FakeKube(), "nope")


def test_a_conflict_is_read_again_and_retried() -> None:
    kube = _kube(_record(cordoned=True), cordoned=True)
    kube.fail_next(lambda m, p, body: ConflictError("changed", status=409) if m == "PATCH" else None)
    assert unquarantine(kube, "n1").uncordoned and _state(kube) == (False, False)
