"""Tests for pykured.blockers.quarantine: the blocker that keeps a quarantined node from the lock."""

from __future__ import annotations

import datetime
from typing import Any

from pykured.blockers.quarantine import QuarantineBlocker
from pykured.core.errors import KubeError
from pykured.policy.quarantine import QUARANTINED_ANNOTATION, QuarantineRecord
from tests.fakes import FakeKube

NOW = datetime.datetime(2026, 12, 3, 2, 0, tzinfo=datetime.UTC)


def _node(annotations: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": "n1", "annotations": annotations}}


def test_the_blocker_blocks_while_the_record_is_there() -> None:
    record = QuarantineRecord.make(reason="drain timed out", at=NOW, pods=["ns/a"], cordoned=True)
    blocker = QuarantineBlocker(
        FakeKube(), "n1", read=lambda: _node({QUARANTINED_ANNOTATION: record.to_json()})
    )
    reason = blocker.check(now=NOW)
    assert reason is not None and reason.kind == "quarantined"
    assert reason.message == record.describe() + " (pykured unquarantine n1 ends it)"
    assert QuarantineBlocker(FakeKube(), "n1", read=lambda: _node({})).check(now=NOW) is None
    garbled = QuarantineBlocker(FakeKube(), "n1", read=lambda: _node({QUARANTINED_ANNOTATION: "{"}))
    assert garbled.check(now=NOW) is not None


def test_the_blocker_blocks_when_the_node_cannot_be_read() -> None:
    def fail() -> dict[str, Any]:
        raise KubeError("connection refused")

    reason = QuarantineBlocker(FakeKube(), "n1", read=fail).check(now=NOW)
    assert reason is not None and "cannot read node n1 to check for a quarantine" in reason.message


def test_the_blocker_reads_the_node_when_not_given_a_reader() -> None:
    kube = FakeKube()
    kube.add_node("n1")
    assert QuarantineBlocker(kube, "n1").check(now=NOW) is None
    kube.patch_node("n1", {"metadata": {"annotations": {QUARANTINED_ANNOTATION: "garbled"}}})
    assert QuarantineBlocker(kube, "n1").check(now=NOW) is not None
