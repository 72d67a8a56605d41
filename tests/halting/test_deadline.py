"""The halt watch on FakeKube: an overdue lock holder halts the fleet once, writing only the ConfigMap's
``halt``; after ``pykured unfreeze`` the same overdue reboot does not halt it again, a new reboot may (the
real agents: tests/e2e/test_halt_agents.py)."""

from __future__ import annotations

import datetime
from typing import Any

from pykured.cycle.state import REBOOT_TRIGGERED_AT_ANNOTATION
from pykured.fleet.freeze import freeze, unfreeze
from pykured.halting.deadline import HaltWatch
from pykured.halting.fleet import FleetHalt
from pykured.kube.events import EventRecorder
from pykured.lock.record import LockEntry
from pykured.notify import Notifier
from pykured.policy.source import PolicySource, configmaps_path
from tests.fakes import FakeKube

NS = "kube-system"
NAME = "kured-policy"
BEGAN = "2026-11-30T20:00:00Z"
NOW = datetime.datetime(2026, 11, 30, 21, 40, tzinfo=datetime.UTC)
DEADLINE = datetime.timedelta(minutes=30)


class Holders:
    """The lock's holders, as the watch asks for them."""

    def __init__(self, *nodes: str) -> None:
        self.nodes = list(nodes)

    def holders(self, *, now_ns: int) -> tuple[LockEntry, ...]:
        return tuple(LockEntry(node) for node in self.nodes)


def rig() -> tuple[FakeKube, PolicySource, HaltWatch]:
    kube = FakeKube()
    kube.add_node("n1")
    kube.add_node("gone", boot_id="old")
    kube.patch_node("gone", {"metadata": {"annotations": {
        REBOOT_TRIGGERED_AT_ANNOTATION: BEGAN, "pykured.dev/reboot-boot-id": "old",
    }}})  # fmt: skip
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": NAME}, "data": {"blackouts": ""}}
    kube.request("POST", configmaps_path(NS), body=body)
    source = PolicySource(kube, namespace=NS, name=NAME, zone=datetime.UTC)
    source.refresh()
    halt = FleetHalt(
        kube=kube, namespace=NS, configmap=NAME, me="n1", notifier=Notifier(),
        events_for=lambda node: EventRecorder(kube, node=node),
    )  # fmt: skip
    watch = HaltWatch(
        lock=Holders("gone"),  # type: ignore[arg-type]
        source=source,
        deadline=DEADLINE,
        halt=halt,
        clock=lambda: NOW,
    )
    return kube, source, watch


def data(kube: FakeKube) -> dict[str, Any]:
    return dict(kube.request("GET", configmaps_path(NS, NAME)).get("data") or {})


def test_an_overdue_holder_halts_once_and_not_again_after_unfreeze() -> None:
    kube, source, watch = rig()
    nodes_before = kube.get_node("gone")
    found = watch.check()
    assert found is not None and found.node == "gone" and found.began_text == BEGAN
    assert set(data(kube)) == {"blackouts", "halt"}
    source.refresh()
    assert watch.halted() and watch.check() is None  # halted already: nothing more
    assert kube.get_node("gone") == nodes_before  # nothing written on the node it halted for
    lifted = unfreeze(kube, namespace=NS, name=NAME)
    assert lifted is not None and (lifted.halted, lifted.began) == ("gone", BEGAN)
    source.refresh()
    assert not watch.halted()
    assert watch.check() is None and "halt" not in data(kube)  # the same reboot: lifted once, stays lifted
    # a new reboot of that node, overdue in turn, halts the fleet again
    later = "2026-11-30T21:00:00Z"
    kube.patch_node("gone", {"metadata": {"annotations": {REBOOT_TRIGGERED_AT_ANNOTATION: later}}})
    again = watch.check()
    assert again is not None and again.began_text == later and "halt" in data(kube)


def test_an_active_freeze_holds_the_halt_back_and_an_expired_one_does_not() -> None:
    kube, source, watch = rig()
    freeze(kube, namespace=NS, name=NAME, reason="INC-1", until=NOW + DEADLINE, now=NOW)
    source.refresh()
    assert watch.check() is None and "halt" not in data(kube)
    freeze(kube, namespace=NS, name=NAME, reason="INC-1", until=NOW, now=NOW - DEADLINE)
    source.refresh()
    assert watch.check() is not None
    assert set(data(kube)) == {"blackouts", "freeze", "halt"}  # the expired freeze is left as it was
