"""The one decision with FleetLock as the driver: Zincati's pre-reboot (``required``), its steady-state
(``not required``) and the reconcile pass (``required is None``), over what the lock and the Node say."""

from __future__ import annotations

import dataclasses
import datetime

import pytest

from pykured.cycle import state
from pykured.cycle.decide import CyclePolicy, Driver, Hold, Observation, Step, decide
from pykured.cycle.state import NodeState

NOW = datetime.datetime(2026, 11, 30, 12, 0, tzinfo=datetime.UTC)
MIN = datetime.timedelta(minutes=1)
POLICY = CyclePolicy(ready_grace=10 * MIN, stuck_after=60 * MIN)


@dataclasses.dataclass(frozen=True)
class View:
    """A table row: what the lock and the Node say; :meth:`state` is the NodeState it reads as."""

    holding: bool
    fleetlock: bool
    boot_id: str = "b1"
    reboot_boot_id: str | None = None
    granted_at: datetime.datetime | None = None
    release_after: datetime.datetime | None = None
    cycle_started: bool = False
    ready: bool = True
    ready_since: datetime.datetime | None = NOW - 60 * MIN

    def state(self) -> NodeState:
        annotations = state.state_patch(
            reboot_boot_id=self.reboot_boot_id, reboot_triggered_at=self.granted_at,
            release_after=self.release_after, fleetlock_id="zid" if self.fleetlock else None,
            unschedulable_before=False if (self.cycle_started or self.reboot_boot_id) else None,
        )  # fmt: skip
        return NodeState(
            name="n1", boot_id=self.boot_id, ready=self.ready, ready_since=self.ready_since,
            holding=self.holding, annotations={k: v for k, v in annotations.items() if v is not None},
            entry_unschedulable=False if self.holding else None,
        )  # fmt: skip


IDLE = View(holding=False, fleetlock=False)
FOREIGN = View(holding=True, fleetlock=False, reboot_boot_id="b1")
DRAINING = View(holding=True, fleetlock=True, cycle_started=True)
GRANTED = View(holding=True, fleetlock=True, reboot_boot_id="b1", granted_at=NOW - 5 * MIN)
STUCK = View(holding=True, fleetlock=True, reboot_boot_id="b1", granted_at=NOW - 61 * MIN)
NOT_READY = dataclasses.replace(GRANTED, ready=False, ready_since=None)
REBOOTED = View(holding=True, fleetlock=True, boot_id="b2", reboot_boot_id="b1", granted_at=NOW - 5 * MIN)
JUST_BACK = dataclasses.replace(REBOOTED, ready_since=NOW - MIN)
RELEASING = dataclasses.replace(REBOOTED, release_after=NOW - MIN)
RELEASE_LATER = dataclasses.replace(REBOOTED, release_after=NOW + MIN)
STALE = View(holding=False, fleetlock=True, reboot_boot_id="b1")

ROWS = [
    # (id, view, required, draining, step, hold)
    ("pre-reboot idle: take the lock", IDLE, True, False, Step.ACQUIRE, Hold.NONE),
    ("steady-state idle: nothing held", IDLE, False, False, Step.WAIT, Hold.NOT_REQUIRED),
    ("reconcile idle", IDLE, None, False, Step.WAIT, Hold.NOT_REQUIRED),
    ("pre-reboot, the node's own cycle", FOREIGN, True, False, Step.WAIT, Hold.FOREIGN),
    ("steady-state, the node's own cycle", FOREIGN, False, False, Step.WAIT, Hold.FOREIGN),
    ("pre-reboot while draining here", DRAINING, True, True, Step.WAIT, Hold.DRAINING),
    ("pre-reboot, drain not running: drain", DRAINING, True, False, Step.DRAIN_AND_REBOOT, Hold.NONE),
    ("reconcile, drain not running: resume", DRAINING, None, False, Step.DRAIN_AND_REBOOT, Hold.NONE),
    ("steady-state before the grant: release", DRAINING, False, False, Step.ABORT, Hold.NONE),
    ("pre-reboot granted: 200 again", GRANTED, True, False, Step.WAIT, Hold.GRANTED),
    ("steady-state granted, not rebooted: release", GRANTED, False, False, Step.ABORT, Hold.NONE),
    ("steady-state granted, not Ready", NOT_READY, False, False, Step.WAIT, Hold.NOT_READY),
    ("reconcile granted", GRANTED, None, False, Step.WAIT, Hold.GRANTED),
    ("reconcile granted long ago: stuck", STUCK, None, False, Step.ALERT_STUCK, Hold.GRANTED),
    ("steady-state rebooted: finish", REBOOTED, False, False, Step.POST_REBOOT, Hold.NONE),
    ("pre-reboot rebooted: finish first", REBOOTED, True, False, Step.POST_REBOOT, Hold.NONE),
    ("reconcile rebooted, Ready long enough", REBOOTED, None, False, Step.POST_REBOOT, Hold.NONE),
    ("reconcile rebooted, just back", JUST_BACK, None, False, Step.WAIT, Hold.REBOOTING),
    ("release delay passed", RELEASING, None, False, Step.RELEASE, Hold.NONE),
    ("release delay not passed", RELEASE_LATER, True, False, Step.WAIT, Hold.RELEASE_DELAY),
    ("mark without a slot: clean up", STALE, None, False, Step.CLEANUP, Hold.NONE),
    ("mark without a slot, draining here", STALE, True, True, Step.WAIT, Hold.DRAINING),
]


@pytest.mark.parametrize(("view", "required", "draining", "step", "hold"), [r[1:] for r in ROWS],
                         ids=[r[0] for r in ROWS])  # fmt: skip
def test_fleetlock_rows(view: View, required: bool | None, draining: bool, step: Step, hold: Hold) -> None:
    obs = Observation(
        required=required, in_window=True, node=view.state(), driver=Driver.FLEETLOCK, draining=draining
    )
    action = decide(obs, policy=POLICY, now=NOW)
    assert (action.step, action.hold) == (step, hold), action


def test_the_daemon_leaves_a_fleetlock_cycle_alone_and_fleetlock_a_daemon_cycle() -> None:
    for view, driver in ((GRANTED, Driver.DAEMON), (FOREIGN, Driver.FLEETLOCK)):
        obs = Observation(required=True, in_window=True, node=view.state(), driver=driver)
        action = decide(obs, policy=POLICY, now=NOW)
        assert (action.step, action.hold) == (Step.WAIT, Hold.FOREIGN)


def test_a_fleetlock_release_never_backs_off_the_next_update() -> None:
    obs = Observation(required=True, in_window=True, node=RELEASING.state(), driver=Driver.FLEETLOCK)
    action = decide(obs, policy=POLICY, now=NOW)
    assert action.step is Step.RELEASE and action.backoff_until is None
    daemon = dataclasses.replace(obs, driver=Driver.DAEMON, node=dataclasses.replace(obs.node, annotations={
        k: v for k, v in obs.node.annotations.items() if k != state.FLEETLOCK_ID_ANNOTATION}))  # fmt: skip
    assert decide(daemon, policy=POLICY, now=NOW).backoff_until == NOW + POLICY.sentinel_loop_backoff


def test_outside_the_window_pre_reboot_waits_but_a_started_cycle_goes_on() -> None:
    idle = Observation(required=True, in_window=False, node=IDLE.state(), driver=Driver.FLEETLOCK)
    assert decide(idle, policy=POLICY, now=NOW).hold is Hold.WINDOW
    draining = dataclasses.replace(idle, node=DRAINING.state())
    assert decide(draining, policy=POLICY, now=NOW).step is Step.DRAIN_AND_REBOOT
