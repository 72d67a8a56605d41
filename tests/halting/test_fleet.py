"""The one halt procedure on FakeKube's policy ConfigMap: the agent whose write sets the freeze says so (log,
mark, Event, notification); one that finds the fleet frozen already says nothing (several agents halting at
once on the real API server: tests/e2e/test_halt_agents.py)."""

from __future__ import annotations

import datetime
import logging

import pytest

from pykured.fleet.freeze import read_freeze
from pykured.halting.fleet import FleetHalt
from pykured.kube.events import EventRecorder
from pykured.policy.freeze import FreezeRecord
from tests.fakes import FakeKube

NOW = datetime.datetime(2026, 11, 30, 21, 40, tzinfo=datetime.UTC)
NS = "kube-system"


class Sent:
    """Records the notifications sent."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str | None]] = []

    def send(self, message: str, *, title: str | None = None) -> bool:
        self.sent.append((message, title))
        return True


def fleet_halt(kube: FakeKube, notifier: Sent, *, me: str) -> FleetHalt:
    return FleetHalt(
        kube=kube, namespace=NS, configmap="kured-policy", me=me, notifier=notifier,  # type: ignore[arg-type]
        events_for=lambda name: EventRecorder(kube, node=name),
    )  # fmt: skip


def halted_events(kube: FakeKube) -> list[tuple[str, str]]:
    return [(e["involvedObject"]["name"], e["message"]) for e in kube.events if e["reason"] == "RebootHalted"]


def test_the_agent_whose_write_sets_the_freeze_says_so_once(caplog: pytest.LogCaptureFixture) -> None:
    kube = FakeKube()
    kube.add_node("node-a")
    notifier = Sent()
    halt = fleet_halt(kube, notifier, me="node-b")
    assert halt.by == "pykured on node-b"
    marked: list[str] = []
    record = FreezeRecord(reason="node-a did not come back", by=halt.by, at=NOW, halted="node-a")
    with caplog.at_level(logging.ERROR):
        assert halt.halt(record, node="node-a", message="it did not come back", now=NOW, mark=marked.append)
    frozen = read_freeze(kube, namespace=NS, name="kured-policy")
    assert frozen is not None and frozen.halted == "node-a" and frozen.by == "pykured on node-b"
    assert "Halting the fleet: it did not come back" in caplog.messages
    assert marked == ["node-a"]
    assert halted_events(kube) == [("node-a", "it did not come back")]
    assert notifier.sent == [("pykured halted the fleet: it did not come back", "pykured: fleet halted")]

    later = FreezeRecord(reason="again", by=halt.by, at=NOW, halted="node-a")
    assert not halt.halt(later, node="node-a", message="again", now=NOW, mark=marked.append)  # frozen already
    assert marked == ["node-a"] and len(halted_events(kube)) == 1 and len(notifier.sent) == 1
    frozen = read_freeze(kube, namespace=NS, name="kured-policy")
    assert frozen is not None and frozen.reason == "node-a did not come back"


def test_the_fleetlock_server_halts_in_its_own_name() -> None:
    assert fleet_halt(FakeKube(), Sent(), me="").by == "pykured on the FleetLock server"
