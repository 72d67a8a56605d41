"""``pykured unquarantine`` as operators run it: a process, a kubeconfig, the real API server (its
admission-policy side: tests/e2e/test_admission_policies.py)."""

from __future__ import annotations

import datetime

import pytest

from pykured.policy.quarantine import QUARANTINED_ANNOTATION, QuarantineRecord
from tests.e2e.fleet.test_freeze import run
from tests.testenv import TestEnv

pytestmark = pytest.mark.k8s

NOW = datetime.datetime(2026, 12, 3, 2, 0, tzinfo=datetime.UTC)


def test_unquarantine_nodes(k8s: TestEnv) -> None:
    ours, theirs, plain = k8s.add_nodes(k8s.unique("q"), k8s.unique("q"), k8s.unique("q"))
    kube = k8s.kube()
    for node, cordoned in ((ours, True), (theirs, False)):
        record = QuarantineRecord.make(reason="drain timed out", at=NOW, pods=["ns/a"], cordoned=cordoned)
        marks = {"annotations": {QUARANTINED_ANNOTATION: record.to_json()}}
        kube.patch_node(node, {"spec": {"unschedulable": True}, "metadata": marks})
    kubeconfig = k8s.kubeconfig_for("carol", ["system:masters"])
    done = run("unquarantine", ours, theirs, plain, kubeconfig=kubeconfig)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"node {ours}: quarantine ended, uncordoned",
        f"node {theirs}: quarantine ended; left cordoned (not cordoned by pykured)",
        f"node {plain} is not quarantined",
    ]
    for node, cordoned in ((ours, False), (theirs, True)):
        obj = kube.get_node(node)
        assert bool(obj["spec"].get("unschedulable")) is cordoned
        assert QUARANTINED_ANNOTATION not in obj["metadata"].get("annotations", {})
    unknown = run("unquarantine", "no-such-node-x", kubeconfig=kubeconfig)
    assert unknown.returncode == 1 and unknown.stderr.count("\n") == 1, unknown.stderr
