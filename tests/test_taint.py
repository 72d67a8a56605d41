"""The PreferNoSchedule taint as an observer of the cycle: on while the node waits, off when it no longer does
and when it is back (the patches themselves: tests/kube/test_taints.py)."""

from __future__ import annotations

from pykured.cycle.state import NodeState
from pykured.taint import WaitingTaint
from tests.fakes import FakeKube

KEY = "example.com/waiting"


def view(kube: FakeKube) -> NodeState:
    return NodeState.from_obj(kube.get_node("n"))


def test_the_taint_is_on_while_the_node_waits_and_off_when_it_no_longer_does_or_is_back() -> None:
    kube = FakeKube()
    kube.add_node("n")
    taint = WaitingTaint(kube, node="n", key=KEY)
    assert not taint.marked(view(kube))
    taint.waiting("n")
    assert taint.marked(view(kube))
    taint.not_waiting("n")
    assert not taint.marked(view(kube))
    taint.waiting("n")
    taint.back("n")
    assert not taint.marked(view(kube))


def test_another_taint_is_not_the_mark() -> None:
    kube = FakeKube()
    kube.add_node("n")
    kube.nodes["n"]["spec"]["taints"] = [
        {"key": KEY, "effect": "NoSchedule"},
        {"key": "other", "effect": "PreferNoSchedule"},
    ]
    assert not WaitingTaint(kube, node="n", key=KEY).marked(view(kube))
