"""The pure cycle: phases from the lock and the Node, and the reconcile decision table."""

from __future__ import annotations

import datetime

import pytest

from pykured.fleetlock.cycle import CycleView, Phase, Step, Timing, phase_of, ready_since, reconcile

NOW = datetime.datetime(2026, 11, 30, 12, 0, tzinfo=datetime.UTC)
MIN = datetime.timedelta(minutes=1)

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
    assert phase_of(view) is phase


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
    assert reconcile(view, timing=Timing(), now=NOW) is step


def test_reconcile_timing_is_configurable() -> None:
    view = rebooted(ready_since=NOW - 2 * MIN)
    assert reconcile(view, timing=Timing(ready_grace=MIN), now=NOW) is Step.FINISH_REBOOT


T = "2026-11-30T11:50:00Z"
READY = [
    (
        "ready",
        {"status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": T}]}},
        NOW - 10 * MIN,
    ),
    (
        "not-ready",
        {"status": {"conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": T}]}},
        None,
    ),
    (
        "garbled-time",
        {"status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "soon"}]}},
        None,
    ),
    ("no-conditions", {"status": {}}, None),
    ("no-status", {}, None),
    (
        "other-conditions",
        {"status": {"conditions": [{"type": "DiskPressure", "status": "True"}, "junk"]}},
        None,
    ),
]


@pytest.mark.parametrize(("node", "expected"), [c[1:] for c in READY], ids=[c[0] for c in READY])
def test_ready_since(node: dict[str, object], expected: datetime.datetime | None) -> None:
    assert ready_since(node) == expected
