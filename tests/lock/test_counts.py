"""Reading the counts a percentage budget is taken of, on FakeKube: the DaemonSet's desiredNumberScheduled
and the Nodes of a label value; a failed, absent or garbled count is None, said once."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from pykured.core.errors import KubeError
from pykured.lock.counts import daemonset_count, desired_count, label_count
from tests.fakes import FakeKube

NS = "kube-system"
ZONE = "topology.kubernetes.io/zone"
D = "desiredNumberScheduled"


@pytest.mark.parametrize(
    ("ds", "count"),
    [({"status": {D: 7}}, 7), ({"status": {D: 0}}, 0), ({}, None), ({"status": None}, None),
     ({"status": []}, None), ({"status": {D: "7"}}, None), ({"status": {D: 7.5}}, None),
     ({"status": {D: -1}}, None), ({"status": {D: 10**12}}, None), ({"status": {D: True}}, None)],
)  # fmt: skip
def test_desired_count_is_total(ds: Any, count: int | None) -> None:
    assert desired_count(ds) == count


def test_daemonset_count_reads_each_time_and_says_a_bad_count_once(caplog: Any) -> None:
    kube = FakeKube()
    count = daemonset_count(kube, namespace=NS, name="kured")
    with caplog.at_level(logging.WARNING, logger="pykured.lock.counts"):
        assert count() is None and count() is None  # no DaemonSet
        kube.add_daemonset(NS, "kured")
        assert count() is None  # no status yet
        kube.daemonsets[(NS, "kured")]["status"] = {"desiredNumberScheduled": 12}
        assert count() == 12
        kube.daemonsets[(NS, "kured")]["status"] = {"desiredNumberScheduled": "many"}
        assert count() is None
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, (
        lines
    )  # the missing DaemonSet (its absent status then goes unsaid), the garbled count
    assert all("allows 1 node at once" in line for line in lines)


def test_label_count_counts_the_nodes_of_a_value_and_keeps_it_fresh() -> None:
    kube = FakeKube()
    for name, zone in (("a1", "a"), ("a2", "a"), ("b1", "b"), ("x", "")):
        kube.add_node(name, labels={ZONE: zone} if zone else {})
    now = [0.0]
    count = label_count(kube, label=ZONE, fresh=60.0, clock=lambda: now[0])
    assert (count("a"), count("b"), count("c")) == (2, 1, 0)
    kube.add_node("a3", labels={ZONE: "a"})
    assert count("a") == 2  # kept
    now[0] = 61.0
    assert count("a") == 3


def test_a_failed_label_count_is_none_and_not_kept() -> None:
    kube = FakeKube()
    kube.add_node("a1", labels={ZONE: "a"})
    count = label_count(kube, label=ZONE, clock=lambda: 0.0)
    kube.fail_next(
        lambda method, path, *_: KubeError("boom", status=500) if path == "/api/v1/nodes" else None
    )
    assert count("a") is None
    assert count("a") == 1
