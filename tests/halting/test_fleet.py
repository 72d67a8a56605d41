"""The one halt procedure on FakeKube's policy ConfigMap: the agent whose write adds the halt says so (log,
Event, notification) and writes nothing else; one that finds the fleet frozen or halted already says
nothing (several agents halting at once on the real API server: tests/e2e/test_halt_agents.py)."""

from __future__ import annotations

import datetime
import logging
from typing import Any

import pytest

from pykured.fleet.freeze import freeze, read_freeze, unfreeze
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


POLICY = f"/api/v1/namespaces/{NS}/configmaps/kured-policy"


def test_the_agent_whose_write_sets_the_halt_says_so_once(caplog: pytest.LogCaptureFixture) -> None:
    kube = FakeKube()
    kube.add_node("node-a")
    notifier = Sent()
    halt = fleet_halt(kube, notifier, me="node-b")
    assert halt.by == "pykured on node-b"
    record = FreezeRecord(reason="node-a did not come back", by=halt.by, at=NOW, halted="node-a", began="b")
    with caplog.at_level(logging.ERROR):
        assert halt.halt(record, node="node-a", message="it did not come back", now=NOW)
    frozen = read_freeze(kube, namespace=NS, name="kured-policy")
    assert frozen is not None and frozen.halted == "node-a" and frozen.by == "pykured on node-b"
    assert set(kube.request("GET", POLICY)["data"]) == {"halt"}  # its own key, nothing else
    assert "Halting the fleet: it did not come back" in caplog.messages
    assert halted_events(kube) == [("node-a", "it did not come back")]
    assert notifier.sent == [("pykured halted the fleet: it did not come back", "pykured: fleet halted")]
    assert not kube.get_node("node-a")["metadata"]["annotations"]  # nothing written on the node

    later = FreezeRecord(reason="again", by=halt.by, at=NOW, halted="node-a")
    assert not halt.halt(later, node="node-a", message="again", now=NOW)  # halted already
    assert len(halted_events(kube)) == 1 and len(notifier.sent) == 1
    frozen = read_freeze(kube, namespace=NS, name="kured-policy")
    assert frozen is not None and frozen.reason == "node-a did not come back"


def test_a_halt_is_added_next_to_the_operator_s_keys_and_unfreeze_remembers_it() -> None:
    """An expired freeze and the blackouts stay as they are when an agent halts; ``pykured unfreeze``
    removes the freeze and the halt and moves the halted reboot into ``halts-lifted``."""
    kube = FakeKube()
    hour = datetime.timedelta(hours=1)
    expired = freeze(kube, namespace=NS, name="kured-policy", reason="INC-1", until=NOW - hour / 60,
                     now=NOW - hour)  # fmt: skip
    body = kube.request("GET", POLICY)
    kube.request("PUT", POLICY, body={**body, "data": {**body["data"], "blackouts": "# none"}})
    halt = fleet_halt(kube, Sent(), me="node-b")
    record = FreezeRecord(reason="r", by=halt.by, at=NOW, halted="node-a", began="2026-11-30T21:00:00Z")
    assert halt.halt(record, node="node-a", message="m", now=NOW)
    data = kube.request("GET", POLICY)["data"]
    assert data == {"freeze": expired.to_json(), "blackouts": "# none", "halt": record.to_json()}
    assert unfreeze(kube, namespace=NS, name="kured-policy") == record
    data = kube.request("GET", POLICY)["data"]
    assert data == {"blackouts": "# none",
                    "halts-lifted": '[{"node":"node-a","began":"2026-11-30T21:00:00Z"}]'}  # fmt: skip
    assert unfreeze(kube, namespace=NS, name="kured-policy") is None  # nothing left to lift


def test_the_fleetlock_server_halts_in_its_own_name() -> None:
    assert fleet_halt(FakeKube(), Sent(), me="").by == "pykured on the FleetLock server"


def test_unfreeze_is_conditional_and_keeps_a_key_written_meanwhile() -> None:
    """A blackout written between unfreeze's read and its patch: the patch is refused (409), read again,
    and the blackout stays; the halt is still lifted once."""
    kube = FakeKube()
    halt = fleet_halt(kube, Sent(), me="node-b")
    record = FreezeRecord(reason="r", by=halt.by, at=NOW, halted="node-a", began="b")
    assert halt.halt(record, node="node-a", message="m", now=NOW)
    interleaved: list[bool] = []

    def operator_writes_first(method: str, path: str, body: Any) -> None:
        if method == "PATCH" and not interleaved:
            interleaved.append(True)
            current = kube.request("GET", POLICY)
            kube.request("PUT", POLICY, body={**current, "data": {**current["data"], "blackouts": "# x"}})

    kube.fail_next(operator_writes_first)
    assert unfreeze(kube, namespace=NS, name="kured-policy") == record
    assert kube.request("GET", POLICY)["data"] == {
        "blackouts": "# x",
        "halts-lifted": '[{"node":"node-a","began":"b"}]',
    }
    assert kube.calls("PATCH", "kured-policy") == 2
