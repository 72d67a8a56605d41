"""The observers of the cycle's moments: told in registration order; a holding observer holds the cycle."""

from __future__ import annotations

import datetime

import pytest

from pykured.core import errors
from pykured.core.model import GateResult, Reason, Verdict
from pykured.cycle.decide import Escalation, Step
from pykured.cycle.observers import CycleObserver, CycleObservers
from pykured.cycle.state import NodeState
from tests.agent.test_daemon import NODE, escalating_rig, make_rig

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
WAIT = GateResult(Verdict.WAIT, Reason("test", "held by the test"))


class Recorder(CycleObserver):
    """Records each moment it is told, in one list shared by every recorder (``name:moment``)."""

    def __init__(self, name: str, told: list[str], *, hold: GateResult | None = None) -> None:
        self.name, self.told, self.answer = name, told, hold

    def _note(self, moment: str) -> None:
        self.told.append(f"{self.name}:{moment}")

    def waiting(self, node: str) -> None:
        self._note("waiting")

    def slot_taken(self, node: str) -> None:
        self._note("slot_taken")

    def hold(self, node: str, point: str, now: datetime.datetime) -> GateResult | None:
        self._note(f"hold {point}")
        return self.answer

    def drain_starting(self, node: str) -> None:
        self._note("drain_starting")

    def drained(self, node: str, failure: str | None) -> None:
        self._note(f"drained {failure}")

    def rebooting(self, node: str) -> None:
        self._note("rebooting")

    def back(self, node: str) -> None:
        self._note("back")

    def releasing(self, node: str) -> None:
        self._note("releasing")

    def released(self, node: str) -> None:
        self._note("released")

    def forgetting(self, node: str) -> None:
        self._note("forgetting")


def test_observers_are_told_in_registration_order() -> None:
    told: list[str] = []
    observers = CycleObservers([Recorder("a", told), Recorder("b", told), Recorder("c", told)])
    observers.slot_taken(NODE)
    observers.drained(NODE, "evicting: boom")
    observers.forgetting(NODE)
    assert told == [
        "a:slot_taken", "b:slot_taken", "c:slot_taken",
        "a:drained evicting: boom", "b:drained evicting: boom", "c:drained evicting: boom",
        "a:forgetting", "b:forgetting", "c:forgetting",
    ]  # fmt: skip


def test_a_holding_observer_holds_and_those_after_it_are_not_asked() -> None:
    told: list[str] = []
    opened = GateResult(Verdict.OPEN)
    observers = CycleObservers(
        [Recorder("quiet", told), Recorder("open", told, hold=opened), Recorder("holds", told, hold=WAIT),
         Recorder("late", told, hold=WAIT)]
    )  # fmt: skip
    assert observers.hold(NODE, "before-drain", NOW) is WAIT
    assert told == ["quiet:hold before-drain", "open:hold before-drain", "holds:hold before-drain"]


def test_a_point_nobody_holds_passes_without_a_verdict() -> None:
    told: list[str] = []
    assert CycleObservers().hold(NODE, "before-release", NOW) is None
    assert CycleObservers([Recorder("quiet", told)]).hold(NODE, "before-release", NOW) is None
    opened = GateResult(Verdict.OPEN)
    assert CycleObservers([Recorder("quiet", told), Recorder("open", told, hold=opened)]).hold(
        NODE, "before-release", NOW
    ) is opened  # fmt: skip


def test_a_bare_observer_does_nothing_at_every_moment() -> None:
    class Bare(CycleObserver):
        pass

    bare, view = Bare(), NodeState.from_obj({"metadata": {"name": NODE}})
    observers = CycleObservers([bare])
    for moment in (
        observers.waiting, observers.not_waiting, observers.slot_taken, observers.drain_starting,
        observers.rebooting, observers.back, observers.releasing, observers.released, observers.forgetting,
    ):  # fmt: skip
        moment(NODE)
    observers.observed(view)
    observers.drained(NODE, None)
    observers.begin(NODE, "settle", NOW)
    assert observers.hold(NODE, "before-drain", NOW) is None and not observers.marked(view)


def test_a_whole_cycle_tells_its_moments_in_order() -> None:
    rig = make_rig()
    told: list[str] = []
    rig.daemon.hands.observers.extend([Recorder("first", told), Recorder("second", told)])
    rig.daemon.run_once()  # the lock
    rig.daemon.run_once()  # the drain and the reboot
    rig.kube.reboot(NODE, "boot-2")
    rig.sentinel.present = False
    for _ in range(3):
        rig.daemon.run_once()  # back, then released and forgotten
    assert rig.holders() == [] and rig.memory() == {}
    assert told == [
        "first:slot_taken", "second:slot_taken",
        "first:hold before-drain", "second:hold before-drain",
        "first:drain_starting", "second:drain_starting",
        "first:drained None", "second:drained None",
        "first:rebooting", "second:rebooting",
        "first:back", "second:back",
        "first:hold before-release", "second:hold before-release",
        "first:releasing", "second:releasing",
        "first:released", "second:released",
        "first:forgetting", "second:forgetting",
    ]  # fmt: skip


def test_a_holding_observer_keeps_the_lock_before_the_drain() -> None:
    rig = make_rig()
    told: list[str] = []
    rig.daemon.hands.observers.append(Recorder("gate", told, hold=WAIT))
    rig.daemon.run_once()  # the lock
    rig.daemon.run_once()
    assert rig.step() is Step.HOLD and rig.holders() == [NODE] and rig.rebooter.calls == 0
    assert told == ["gate:slot_taken", "gate:hold before-drain"]
    assert rig.kube.event_reasons()[-1] == "HoldingLock"


def test_waiting_for_a_lock_others_hold_is_a_moment() -> None:
    rig = make_rig()
    told: list[str] = []
    rig.daemon.hands.observers.append(Recorder("taint", told))
    rig.hold("other")
    rig.daemon.run_once()
    assert told == ["taint:waiting"] and rig.holders() == ["other"]


@pytest.mark.parametrize("end", ["no-longer-required", "drain-fails", "quarantine"])
def test_every_path_that_frees_the_slot_says_releasing_first(end: str) -> None:
    """``releasing`` comes while the slot is still held, on the release after the reboot (above) and on the
    cycle's other ends: an abort, a failed drain, a quarantine."""
    rig = escalating_rig((Escalation.QUARANTINE,))[0] if end == "quarantine" else make_rig()
    seen: list[tuple[str, list[str]]] = []

    class Watcher(CycleObserver):
        def releasing(self, node: str) -> None:
            seen.append(("releasing", rig.holders()))

        def released(self, node: str) -> None:
            seen.append(("released", rig.holders()))

    rig.daemon.hands.observers.append(Watcher())
    if end == "no-longer-required":
        rig.daemon.hands.observers.insert(0, Recorder("gate", [], hold=WAIT))  # held before the drain
        rig.daemon.run_once()  # the lock
        rig.daemon.run_once()
        rig.sentinel.present = False
    elif end == "drain-fails":
        rig.daemon.run_once()  # the lock
        rig.kube.fail_next(
            lambda m, p, body: errors.KubeError("boom") if m == "PATCH" and "spec" in body else None
        )
    rig.daemon.run_once()
    assert seen == [("releasing", [NODE]), ("released", [])]
