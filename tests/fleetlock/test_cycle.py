"""The pure cycle: phases from the lock and the Node, and the reconcile decision table."""

from __future__ import annotations

import dataclasses
import datetime

import pytest

from pykured.cycle import state
from pykured.cycle.state import NodeState
from pykured.fleetlock.cycle import Phase, Step, Timing, phase_of, reconcile

NOW = datetime.datetime(2026, 11, 30, 12, 0, tzinfo=datetime.UTC)
MIN = datetime.timedelta(minutes=1)


@dataclasses.dataclass(frozen=True)
class CycleView:
    """A table row: what the lock and the Node say; :meth:`state` is the NodeState it reads as."""

    holding: bool
    fleetlock: bool
    boot_id: str = ""
    reboot_boot_id: str | None = None
    granted_at: datetime.datetime | None = None
    release_after: datetime.datetime | None = None
    ready: bool = False
    ready_since: datetime.datetime | None = None
    draining_here: bool = False

    def state(self) -> NodeState:
        annotations = state.state_patch(
            reboot_boot_id=self.reboot_boot_id, reboot_triggered_at=self.granted_at,
            release_after=self.release_after, fleetlock_id="zid" if self.fleetlock else None,
        )  # fmt: skip
        return NodeState(
            name="n1", boot_id=self.boot_id, ready=self.ready, ready_since=self.ready_since,
            holding=self.holding, annotations={k: v for k, v in annotations.items() if v is not None},
        )  # fmt: skip


PHASES = [
    ("idle", CycleView(holding=False, fleetlock=False), Phase.IDLE),
    ("stale", CycleView(holding=False, fleetlock=True, reboot_boot_id="b1"), Phase.STALE),
    ("foreign", CycleView(holding=True, fleetlock=False, reboot_boot_id="b1"), Phase.FOREIGN),
    ("draining", CycleView(holding=True, fleetlock=True, boot_id="b1"), Phase.DRAINING),
    ("granted", CycleView(holding=True, fleetlock=True, boot_id="b1", reboot_boot_id="b1"), Phase.GRANTED),
    (
        "granted-no-bootid",
        CycleView(holding=True, fleetlock=True, boot_id="", reboot_boot_id="b1"),
        Phase.GRANTED,
    ),
    ("rebooted", CycleView(holding=True, fleetlock=True, boot_id="b2", reboot_boot_id="b1"), Phase.REBOOTED),
    (
        "releasing",
        CycleView(holding=True, fleetlock=True, boot_id="b2", reboot_boot_id="b1", release_after=NOW),
        Phase.RELEASING,
    ),
]


@pytest.mark.parametrize(("view", "phase"), [c[1:] for c in PHASES], ids=[c[0] for c in PHASES])
def test_phase_of(view: CycleView, phase: Phase) -> None:
    assert phase_of(view.state()) is phase


def rebooted(**kw: object) -> CycleView:
    base = dict(holding=True, fleetlock=True, boot_id="b2", reboot_boot_id="b1", ready=True)
    base.update(kw)
    return CycleView(**base)  # type: ignore[arg-type]


RECONCILE = [
    ("idle", CycleView(holding=False, fleetlock=False), Step.NOTHING),
    (
        "foreign-never-touched",
        CycleView(holding=True, fleetlock=False, reboot_boot_id="b1", granted_at=NOW - 9 * 60 * MIN),
        Step.NOTHING,
    ),
    ("stale", CycleView(holding=False, fleetlock=True), Step.CLEANUP),
    ("stale-while-draining-here", CycleView(holding=False, fleetlock=True, draining_here=True), Step.NOTHING),
    ("draining-here", CycleView(holding=True, fleetlock=True, draining_here=True), Step.NOTHING),
    ("draining-after-restart", CycleView(holding=True, fleetlock=True), Step.RESUME_DRAIN),
    (
        "granted-recently",
        CycleView(holding=True, fleetlock=True, boot_id="b1", reboot_boot_id="b1", granted_at=NOW - MIN),
        Step.NOTHING,
    ),
    (
        "granted-stuck",
        CycleView(holding=True, fleetlock=True, boot_id="b1", reboot_boot_id="b1", granted_at=NOW - 61 * MIN),
        Step.ALERT_STUCK,
    ),
    ("rebooted-ready-long", rebooted(ready_since=NOW - 11 * MIN), Step.FINISH_REBOOT),
    ("rebooted-ready-exactly", rebooted(ready_since=NOW - 10 * MIN), Step.FINISH_REBOOT),
    ("rebooted-ready-short", rebooted(ready_since=NOW - 2 * MIN), Step.NOTHING),
    ("rebooted-not-ready", rebooted(ready=False, ready_since=None), Step.NOTHING),
    ("rebooted-ready-unknown-since", rebooted(ready_since=None), Step.NOTHING),
    ("releasing-due", rebooted(release_after=NOW), Step.RELEASE),
    ("releasing-later", rebooted(release_after=NOW + MIN), Step.NOTHING),
]


@pytest.mark.parametrize(("view", "step"), [c[1:] for c in RECONCILE], ids=[c[0] for c in RECONCILE])
def test_reconcile(view: CycleView, step: Step) -> None:
    assert reconcile(view.state(), draining_here=view.draining_here, timing=Timing(), now=NOW) is step


def test_reconcile_timing_is_configurable() -> None:
    view = rebooted(ready_since=NOW - 2 * MIN)
    assert (
        reconcile(view.state(), draining_here=False, timing=Timing(ready_grace=MIN), now=NOW)
        is Step.FINISH_REBOOT
    )
