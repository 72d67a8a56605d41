"""The fleet breaker's reads (a stand-in for the API's watch: what is read, and when, is the logic under test;
the read itself and the halt run on the real API server in tests/e2e/conditions/test_conditions_agents.py):
one look stands for ``FRESH_SECONDS``, and a frozen or halted fleet is not read at all."""

from __future__ import annotations

import datetime
from collections.abc import Iterator, Mapping
from typing import Any, cast

from pykured.conditions import fleet
from pykured.conditions import record as rules
from pykured.kube.api import KubeApi
from pykured.kube.client import Obj
from pykured.lock.budget import Budget

NOW = datetime.datetime(2026, 12, 5, 10, 0, tzinfo=datetime.UTC)
SPEC = rules.parse_spec("KernelDeadlock")


class Nodes:
    """Answers a watch of every Node with its state, then the end-of-initial-events bookmark."""

    def __init__(self, showing: int, healthy: int) -> None:
        self.nodes = [self._node(f"sick-{i}", "True") for i in range(showing)]
        self.nodes += [self._node(f"well-{i}", "False") for i in range(healthy)]
        self.watches = 0

    @staticmethod
    def _node(name: str, status: str) -> Obj:
        condition = {"type": "KernelDeadlock", "status": status, "lastTransitionTime": "2026-12-05T09:00:00Z"}
        return {"metadata": {"name": name}, "status": {"conditions": [condition]}}

    def watch(
        self, path: str, *, query: Mapping[str, Any] | None = None, timeout_seconds: int = 60
    ) -> Iterator[Obj]:
        assert path == "/api/v1/nodes" and (query or {}).get("sendInitialEvents") == "true"
        self.watches += 1
        for node in self.nodes:
            yield {"type": "ADDED", "object": node}
        end = {"metadata": {"annotations": {fleet.INITIAL_EVENTS_END: "true"}}}
        yield {"type": "BOOKMARK", "object": end}


def breaker(nodes: Nodes, *, clock: list[float], frozen: list[bool] | None = None) -> fleet.FleetBreaker:
    return fleet.FleetBreaker(
        cast(KubeApi, nodes),
        specs=(SPEC,),
        budget=Budget.of("20%"),
        halt=None,
        frozen=(lambda now: frozen[0]) if frozen is not None else None,
        clock=lambda: clock[0],
    )


def test_a_look_at_the_fleet_stands_for_its_fresh_seconds() -> None:
    clock = [1000.0]
    nodes = Nodes(showing=1, healthy=9)
    b = breaker(nodes, clock=clock)
    assert b.holds(node="sick-0", now=NOW) == ""
    clock[0] += fleet.FRESH_SECONDS - 1
    assert b.holds(node="sick-0", now=NOW) == ""
    assert nodes.watches == 1
    clock[0] += 1
    assert b.holds(node="sick-0", now=NOW) == ""
    assert nodes.watches == 2


def test_too_many_showing_hold_the_node_back() -> None:
    nodes = Nodes(showing=3, healthy=7)
    why = breaker(nodes, clock=[1000.0]).holds(node="sick-0", now=NOW)
    assert why.startswith("3 of 10 nodes show a node condition at once"), why


def test_a_frozen_or_halted_fleet_is_not_read_and_holds_the_node_back_until_lifted() -> None:
    """In an incident the halt's news wakes every agent: none of them reads every Node again while the halt
    stands; the first pass after it is lifted reads the fleet anew (not a look from before the freeze)."""
    clock = [1000.0]
    nodes, frozen = Nodes(showing=1, healthy=9), [False]
    b = breaker(nodes, clock=clock, frozen=frozen)
    assert b.holds(node="sick-0", now=NOW) == ""
    assert nodes.watches == 1
    frozen[0] = True
    for _ in range(5):
        assert b.holds(node="sick-0", now=NOW) == fleet.FROZEN
    assert nodes.watches == 1
    frozen[0] = False
    assert b.holds(node="sick-0", now=NOW) == ""  # within FRESH_SECONDS of the first look, yet read again
    assert nodes.watches == 2
