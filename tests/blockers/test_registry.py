"""Tests for pykured.blockers.registry: the declared order, what each flag adds, the shared blockers built
once (the agent as built by the composition root asks them in this order: ``tests/test_wiring.py``)."""

from __future__ import annotations

import datetime
from typing import Any, cast

from pykured.blockers.alertmanager import AlertmanagerAlertBlocker
from pykured.blockers.freeze import FreezeBlocker
from pykured.blockers.nodemarks import NodeMarkBlocker
from pykured.blockers.options import FleetInputs, NodeInputs
from pykured.blockers.pause import PauseBlocker
from pykured.blockers.pods import PodBlocker
from pykured.blockers.prometheus import PrometheusAlertBlocker
from pykured.blockers.quarantine import QuarantineBlocker
from pykured.blockers.registry import ORDER, BlockerTable, EachNode, Shared
from pykured.config.startup import parse
from pykured.kube.api import KubeApi
from pykured.policy.source import PolicySource
from tests.fakes import FakeKube

UTC = datetime.UTC
EVERY_FLAG = [
    "--node-id=n1",
    "--prometheus-url=http://prom:9090",
    "--alertmanager-url=http://am:9093",
    "--blocking-pod-selector=app=db",
    "--blocking-node-label=example.com/hold",
]


def _source(kube: Any) -> PolicySource:
    return PolicySource(kube, namespace="kube-system", name="kured-policy", zone=UTC)


def test_the_declared_order() -> None:
    assert [(entry.name, type(entry)) for entry in ORDER] == [
        ("freeze", Shared),
        ("pause", EachNode),
        ("quarantine", EachNode),
        ("node-marks", EachNode),
        ("prometheus", Shared),
        ("alertmanager", Shared),
        ("pods", EachNode),
    ]
    assert len({entry.name for entry in ORDER}) == len(ORDER)


def test_every_flag_adds_its_blocker_in_the_declared_order() -> None:
    kube = FakeKube()
    cfg = parse(EVERY_FLAG, {})
    blockers = BlockerTable(FleetInputs(options=cfg, policy=_source(kube)))
    got = blockers.for_node(NodeInputs(options=cfg, kube=cast(KubeApi, kube), node="n1"))
    assert [type(b) for b in got] == [
        FreezeBlocker,
        PauseBlocker,
        QuarantineBlocker,
        NodeMarkBlocker,
        PrometheusAlertBlocker,
        AlertmanagerAlertBlocker,
        PodBlocker,
    ]
    assert [type(b).__module__ for b in got] == [entry.module for entry in ORDER]


def test_without_flags_every_node_keeps_its_pause_and_quarantine() -> None:
    cfg = parse(["--node-id=n1"], {})
    blockers = BlockerTable(FleetInputs(options=cfg))
    assert blockers.shared == []
    got = blockers.for_node(NodeInputs(options=cfg, kube=cast(KubeApi, FakeKube()), node="n1"))
    assert [type(b) for b in got] == [PauseBlocker, QuarantineBlocker]


def test_the_shared_blockers_are_built_once_and_each_nodes_for_its_node() -> None:
    kube = FakeKube()
    cfg = parse(EVERY_FLAG, {})
    blockers = BlockerTable(FleetInputs(options=cfg, policy=_source(kube)))
    a = blockers.for_node(NodeInputs(options=cfg, kube=cast(KubeApi, kube), node="a"))
    b = blockers.for_node(NodeInputs(options=cfg, kube=cast(KubeApi, kube), node="b"))
    for built in (a, b):
        assert [x for x in built if any(x is y for y in blockers.shared)] == blockers.shared
    assert len(blockers.shared) == 3
    assert [getattr(x, "node", None) for x in a if isinstance(x, PauseBlocker | PodBlocker)] == ["a", "a"]
    assert [getattr(x, "node", None) for x in b if isinstance(x, PauseBlocker | PodBlocker)] == ["b", "b"]


def test_a_node_read_is_handed_to_the_blockers_that_read_the_node() -> None:
    cfg = parse(EVERY_FLAG, {})
    reads: list[str] = []

    def read() -> dict[str, Any]:
        reads.append("read")
        return {"metadata": {"name": "n1"}}

    blockers = BlockerTable(FleetInputs(options=cfg))
    got = blockers.for_node(NodeInputs(options=cfg, kube=cast(KubeApi, FakeKube()), node="n1", read=read))
    now = datetime.datetime(2026, 1, 1, tzinfo=UTC)
    for blocker in got:
        if isinstance(blocker, PauseBlocker | QuarantineBlocker | NodeMarkBlocker):
            assert blocker.check(now=now) is None
    assert reads == ["read"] * 3
