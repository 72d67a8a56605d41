"""Every transition of the pure reboot-cycle decision, and the rules the steps act on."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

import pytest

from pykured.core.model import Reason
from pykured.cycle import state
from pykured.cycle.decide import (
    Backoff,
    CyclePolicy,
    DrainOutcome,
    Driver,
    Escalation,
    Observation,
    Step,
    Trigger,
    cordon_was_ours,
    decide,
    drain_outcome,
    needs_blockers,
    next_escalation,
    rebooted,
    unschedulable_to_record,
)
from pykured.cycle.state import NodeState

NOW = datetime.datetime(2026, 6, 30, 12, 0, 0, tzinfo=datetime.UTC)
MIN = datetime.timedelta(minutes=1)
POLICY = CyclePolicy(annotate_nodes=True, taint=True, reboot_retry_delay=10 * MIN, max_attempts=2)
BLOCK = Reason("prometheus", "1 active alerts: [Down]")


def node_state(
    *,
    boot_id: str = "boot-1",
    holding: bool = False,
    unschedulable: bool = False,
    entry_unschedulable: bool | None = None,
    in_progress_annotation: bool = True,
    cycle_started: bool = False,
    unschedulable_before: bool | None = None,
    reboot_boot_id: str | None = None,
    reboot_triggered_at: datetime.datetime | None = None,
    reboot_attempts: int = 0,
    release_after: datetime.datetime | None = None,
    backoff_until: datetime.datetime | None = None,
    backoff_reason: str | None = None,
    fleetlock_cycle: bool = False,
) -> NodeState:
    """A NodeState as the Node's annotations and the lock entry would give it."""
    if cycle_started and unschedulable_before is None:
        unschedulable_before = False
    patch = state.state_patch(
        unschedulable_before=unschedulable_before, reboot_boot_id=reboot_boot_id,
        reboot_triggered_at=reboot_triggered_at, release_after=release_after,
        reboot_attempts=reboot_attempts or None, backoff_until=backoff_until, backoff_reason=backoff_reason,
        fleetlock_id="zincati-id" if fleetlock_cycle else None,
    )  # fmt: skip
    annotations = {k: v for k, v in patch.items() if v is not None}
    if in_progress_annotation:
        annotations[state.IN_PROGRESS_ANNOTATION] = "2026-06-30T11:00:00Z"
    return NodeState(
        name="n1", boot_id=boot_id, unschedulable=unschedulable, annotations=annotations, holding=holding,
        entry_unschedulable=entry_unschedulable if holding else None,
    )  # fmt: skip


def obs(
    *,
    required: bool = True,
    in_window: bool = True,
    blocked: Reason | None = None,
    next_window: datetime.datetime | None = None,
    has_taint: bool = False,
    retry_at: datetime.datetime | None = None,
    trigger: Trigger = Trigger.SENTINEL,
    **node: Any,
) -> Observation:
    return Observation(
        required=required,
        trigger=trigger,
        in_window=in_window,
        blocked=blocked,
        next_window=next_window,
        has_taint=has_taint,
        retry_at=retry_at,
        node=node_state(**node),
    )


CASES = [
    # idle node
    ("idle: reboot not required", obs(required=False), POLICY, Step.WAIT, "Reboot not required"),
    (
        "idle: not required removes a leftover taint",
        obs(required=False, has_taint=True),
        POLICY,
        Step.SYNC_TAINT,
        "Reboot not required",
    ),
    (
        "idle: taint ignored when the flag is off",
        obs(required=False, has_taint=True),
        CyclePolicy(),
        Step.WAIT,
        "Reboot not required",
    ),
    (
        "idle: outside window sleeps until it opens",
        obs(in_window=False, next_window=NOW + 60 * MIN),
        POLICY,
        Step.WAIT,
        "outside the maintenance window",
    ),
    (
        "idle: outside window removes the taint",
        obs(in_window=False, has_taint=True),
        POLICY,
        Step.SYNC_TAINT,
        "outside the maintenance window",
    ),
    (
        "idle: annotate first (--annotate-nodes)",
        obs(in_progress_annotation=False),
        POLICY,
        Step.ANNOTATE,
        "Reboot required",
    ),
    (
        "idle: no annotation without the flag",
        obs(in_progress_annotation=False),
        CyclePolicy(),
        Step.ACQUIRE,
        "Reboot required",
    ),
    ("idle: blocked", obs(blocked=BLOCK), POLICY, Step.BLOCKED, "1 active alerts: [Down]"),
    ("idle: acquire", obs(), POLICY, Step.ACQUIRE, "Reboot required"),
    (
        "idle: back off after a reboot that left the sentinel",
        obs(backoff_until=NOW + 30 * MIN, backoff_reason="sentinel"),
        POLICY,
        Step.WAIT,
        "backing off after a reboot that did not clear the sentinel",
    ),
    ("idle: backoff expired", obs(backoff_until=NOW - MIN), POLICY, Step.ACQUIRE, "Reboot required"),
    # holding the lock, before the reboot
    (
        "holding: drain and reboot",
        obs(holding=True, cycle_started=True),
        POLICY,
        Step.DRAIN_AND_REBOOT,
        "Reboot required",
    ),
    (
        "holding: resume after a restart before memory was written",
        obs(holding=True),
        POLICY,
        Step.DRAIN_AND_REBOOT,
        "Reboot required",
    ),
    (
        "holding: sentinel gone aborts",
        obs(holding=True, required=False, cycle_started=True),
        POLICY,
        Step.ABORT,
        "reboot no longer required",
    ),
    (
        "holding: window closed aborts",
        obs(holding=True, in_window=False, cycle_started=True),
        POLICY,
        Step.ABORT,
        "outside the maintenance window",
    ),
    (
        "holding: blockers are not re-checked",
        obs(holding=True, blocked=BLOCK),
        POLICY,
        Step.DRAIN_AND_REBOOT,
        "Reboot required",
    ),
    # rebooting
    (
        "rebooting: waits for the new bootID",
        obs(holding=True, reboot_boot_id="boot-1", reboot_triggered_at=NOW - MIN, reboot_attempts=1),
        POLICY,
        Step.WAIT,
        "Waiting for reboot",
    ),
    (
        "rebooting: retries once after the delay",
        obs(holding=True, reboot_boot_id="boot-1", reboot_triggered_at=NOW - 11 * MIN, reboot_attempts=1),
        POLICY,
        Step.RETRY_REBOOT,
        "bootID unchanged 0:10:00 after the reboot",
    ),
    (
        "rebooting: gives up after the retry",
        obs(holding=True, reboot_boot_id="boot-1", reboot_triggered_at=NOW - 11 * MIN, reboot_attempts=2),
        POLICY,
        Step.GIVE_UP,
        "bootID unchanged after 2 reboot attempts",
    ),
    (
        "rebooting: window and sentinel do not matter",
        obs(
            holding=True,
            required=False,
            in_window=False,
            reboot_boot_id="boot-1",
            reboot_triggered_at=NOW,
            reboot_attempts=1,
        ),
        POLICY,
        Step.WAIT,
        "Waiting for reboot",
    ),
    # after the reboot
    (
        "rebooted: post-reboot steps",
        obs(holding=True, reboot_boot_id="boot-0", reboot_triggered_at=NOW - MIN),
        POLICY,
        Step.POST_REBOOT,
        "node rebooted (bootID changed)",
    ),
    (
        "rebooted: waits for the release delay",
        obs(holding=True, reboot_boot_id="boot-0", release_after=NOW + MIN),
        POLICY,
        Step.WAIT,
        "waiting for the lock release delay",
    ),
    (
        "rebooted: releases after the delay",
        obs(holding=True, reboot_boot_id="boot-0", release_after=NOW),
        POLICY,
        Step.RELEASE,
        "lock release delay passed",
    ),
    (
        "rebooted: releases even with the sentinel back",
        obs(holding=True, required=True, reboot_boot_id="boot-0", release_after=NOW - MIN),
        POLICY,
        Step.RELEASE,
        "lock release delay passed",
    ),
    # FleetLock runs a Zincati node's cycle: the sentinel-driven loop keeps its hands off
    (
        "fleetlock: holding, rebooting",
        obs(
            holding=True,
            fleetlock_cycle=True,
            reboot_boot_id="boot-1",
            reboot_triggered_at=NOW - 60 * MIN,
            reboot_attempts=1,
        ),
        POLICY,
        Step.WAIT,
        "FleetLock (Zincati) runs this node's reboot cycle",
    ),
    (
        "fleetlock: idle with sentinel",
        obs(fleetlock_cycle=True),
        POLICY,
        Step.WAIT,
        "FleetLock (Zincati) runs this node's reboot cycle",
    ),
    # lost lock (TTL expired and taken, or freed by an operator) with memory on the node
    (
        "lost lock mid-drain: clean up",
        obs(cycle_started=True),
        POLICY,
        Step.CLEANUP,
        "the lock is no longer held by this node",
    ),
    (
        "lost lock after reboot: clean up",
        obs(reboot_boot_id="boot-0", cycle_started=True),
        POLICY,
        Step.CLEANUP,
        "the lock is no longer held by this node",
    ),
    (
        "lost lock while rebooting: wait for the reboot first",
        obs(reboot_boot_id="boot-1", reboot_triggered_at=NOW - MIN),
        POLICY,
        Step.WAIT,
        "Waiting for reboot (lock no longer held)",
    ),
    (
        "lost lock, reboot never came: clean up",
        obs(reboot_boot_id="boot-1", reboot_triggered_at=NOW - 20 * MIN),
        POLICY,
        Step.CLEANUP,
        "the lock is no longer held by this node",
    ),
    (
        "lost lock during release delay: clean up",
        obs(release_after=NOW + MIN, reboot_boot_id="boot-0"),
        POLICY,
        Step.CLEANUP,
        "the lock is no longer held by this node",
    ),
]


@pytest.mark.parametrize(
    ("observation", "policy", "step", "reason"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_decide(observation: Observation, policy: CyclePolicy, step: Step, reason: str) -> None:
    action = decide(observation, policy=policy, now=NOW)
    assert action.step is step
    assert action.reason == reason


def test_wait_outside_window_carries_the_opening_time() -> None:
    action = decide(obs(in_window=False, next_window=NOW + 5 * MIN), policy=POLICY, now=NOW)
    assert action.until == NOW + 5 * MIN


def test_retry_wait_carries_the_due_time() -> None:
    action = decide(
        obs(holding=True, reboot_boot_id="boot-1", reboot_triggered_at=NOW, reboot_attempts=1),
        policy=POLICY,
        now=NOW,
    )
    assert action.until == NOW + 10 * MIN


def test_blocked_action_keeps_the_reason() -> None:
    action = decide(obs(blocked=BLOCK), policy=POLICY, now=NOW)
    assert action.blocked == BLOCK


def test_an_empty_boot_id_never_counts_as_a_reboot() -> None:
    action = decide(
        obs(holding=True, boot_id="", reboot_boot_id="boot-1", reboot_triggered_at=NOW),
        policy=POLICY,
        now=NOW,
    )
    assert action.step is Step.WAIT


@pytest.mark.parametrize(
    ("observation", "expected"),
    [
        (obs(), True),
        (obs(holding=True), False),
        (obs(required=False), False),
        (obs(in_window=False), False),
        (obs(cycle_started=True), False),
        (obs(backoff_until=NOW + MIN), False),
    ],
    ids=["idle and due", "holding", "not required", "window closed", "stale memory", "backing off"],
)
def test_blockers_are_only_queried_when_they_decide(observation: Observation, expected: bool) -> None:
    assert needs_blockers(observation, now=NOW) is expected


def test_decide_is_pure() -> None:
    observation = obs()
    frozen = dataclasses.replace(observation)
    assert decide(observation, policy=POLICY, now=NOW) == decide(frozen, policy=POLICY, now=NOW)


# -- the rules the steps act on ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("node", "expected"),
    [
        (node_state(), False),
        (node_state(reboot_boot_id="boot-1"), False),
        (node_state(reboot_boot_id="boot-0"), True),
        (node_state(boot_id="", reboot_boot_id="boot-0"), False),
    ],
    ids=["no-reboot-recorded", "same-boot", "new-boot", "boot-id-unknown"],
)
def test_rebooted(node: NodeState, expected: bool) -> None:
    assert rebooted(node) is expected


@pytest.mark.parametrize(
    ("node", "ours", "record"),
    [
        (node_state(unschedulable_before=False), True, None),
        (node_state(unschedulable_before=True, unschedulable=True), False, None),
        (node_state(holding=True, entry_unschedulable=False, unschedulable=True), True, False),
        (node_state(holding=True, entry_unschedulable=True, unschedulable=True), False, True),
        (node_state(holding=True, unschedulable=True), False, True),
        (node_state(holding=True), False, False),
        (node_state(unschedulable=True), False, True),
    ],
    ids=[
        "recorded-schedulable",
        "recorded-cordoned-by-admin",
        "kured-entry-schedulable",
        "kured-entry-cordoned",
        "no-record-cordoned-now",
        "no-record-schedulable-now",
        "nothing-known",
    ],
)
def test_whose_cordon(node: NodeState, ours: bool, record: bool | None) -> None:
    assert cordon_was_ours(node) is ours
    assert unschedulable_to_record(node) == record


FULL = CyclePolicy(
    annotate_nodes=True,
    release_delay=5 * MIN,
    sentinel_loop_backoff=60 * MIN,
    force_reboot=True,
    max_attempts=2,
)


def test_drain_and_reboot_carries_what_to_record_and_force_reboot() -> None:
    action = decide(obs(holding=True, entry_unschedulable=False), policy=FULL, now=NOW)
    assert (action.step, action.unschedulable_before, action.uncordon) == (Step.DRAIN_AND_REBOOT, False, True)
    assert action.reboot_if_drain_fails is True
    resumed = decide(obs(holding=True, unschedulable_before=True, unschedulable=True), policy=POLICY, now=NOW)
    assert (resumed.unschedulable_before, resumed.uncordon, resumed.reboot_if_drain_fails) == (
        None,
        False,
        False,
    )


def test_post_reboot_carries_the_release_time_and_the_annotation_removal() -> None:
    node: dict[str, Any] = {
        "holding": True,
        "cycle_started": True,
        "reboot_boot_id": "boot-0",
        "reboot_triggered_at": NOW,
    }
    action = decide(obs(required=False, **node), policy=FULL, now=NOW)
    assert (action.step, action.release_after, action.uncordon) == (Step.POST_REBOOT, NOW + 5 * MIN, True)
    assert action.remove_in_progress is True
    assert decide(obs(required=True, **node), policy=FULL, now=NOW).remove_in_progress is False


def test_release_backs_off_only_when_the_sentinel_is_still_there() -> None:
    node: dict[str, Any] = {"holding": True, "reboot_boot_id": "boot-0", "release_after": NOW}
    assert decide(obs(required=False, **node), policy=FULL, now=NOW).backoff_until is None
    assert decide(obs(required=True, **node), policy=FULL, now=NOW).backoff_until == NOW + 60 * MIN


def test_give_up_backs_off_and_uncordons_only_its_own_cordon() -> None:
    node: dict[str, Any] = {
        "holding": True,
        "reboot_boot_id": "boot-1",
        "reboot_triggered_at": NOW - 11 * MIN,
    }
    mine = decide(obs(reboot_attempts=2, cycle_started=True, **node), policy=FULL, now=NOW)
    assert (mine.step, mine.backoff_until, mine.uncordon) == (Step.GIVE_UP, NOW + 60 * MIN, True)
    admin = decide(obs(reboot_attempts=2, unschedulable_before=True, **node), policy=FULL, now=NOW)
    assert admin.uncordon is False


@pytest.mark.parametrize(
    ("node", "post_reboot", "settle"),
    [
        ({"cycle_started": True}, False, True),
        ({"cycle_started": True, "reboot_boot_id": "boot-0"}, True, False),
        (
            {"cycle_started": True, "reboot_boot_id": "boot-1", "reboot_triggered_at": NOW - 20 * MIN},
            False,
            True,
        ),
        ({"cycle_started": True, "reboot_boot_id": "boot-0", "release_after": NOW}, False, False),
    ],
    ids=["mid-drain", "rebooted", "reboot-never-came", "during-release-delay"],
)
def test_cleanup_finishes_what_the_lost_cycle_left(
    node: dict[str, Any], post_reboot: bool, settle: bool
) -> None:
    action = decide(obs(**node), policy=FULL, now=NOW)
    assert (action.step, action.post_reboot, action.settle_cordon, action.uncordon) == (
        Step.CLEANUP,
        post_reboot,
        settle,
        True,
    )


def test_a_failed_drain_waits_a_period_before_the_next_cycle() -> None:
    action = decide(obs(retry_at=NOW + 5 * MIN), policy=POLICY, now=NOW)
    assert (action.step, action.until) == (Step.WAIT, NOW + 5 * MIN)
    assert needs_blockers(obs(retry_at=NOW + 5 * MIN), now=NOW) is False
    later = decide(obs(retry_at=NOW + 5 * MIN, backoff_until=NOW + 9 * MIN), policy=POLICY, now=NOW)
    assert later.until == NOW + 9 * MIN


EARLY = dataclasses.replace(POLICY, taint_early=True)


@pytest.mark.parametrize(
    ("observation", "policy", "step"),
    [
        (obs(in_window=False), EARLY, Step.TAINT),  # needs a reboot, window closed: tainted at once
        (obs(in_window=False, has_taint=True), EARLY, Step.WAIT),  # kept while it waits for the window
        (obs(blocked=BLOCK), EARLY, Step.TAINT),  # a blocker holds it: tainted
        (obs(blocked=BLOCK, has_taint=True, in_progress_annotation=True), EARLY, Step.BLOCKED),
        (obs(retry_at=NOW + MIN), EARLY, Step.TAINT),  # the back-off after a failed drain
        (obs(required=False, has_taint=True), EARLY, Step.SYNC_TAINT),  # the need went away: untainted
        (obs(required=False, has_taint=True, in_window=False), EARLY, Step.SYNC_TAINT),
        (obs(in_window=False), POLICY, Step.WAIT),  # without the flag: kured's taint only while locked out
        (obs(in_window=False), dataclasses.replace(EARLY, taint=False), Step.WAIT),  # no taint name
        (obs(holding=True, cycle_started=True, has_taint=False), EARLY, Step.DRAIN_AND_REBOOT),  # a cycle
    ],
)
def test_the_early_prefer_no_schedule_taint(
    observation: Observation, policy: CyclePolicy, step: Step
) -> None:
    assert decide(observation, policy=policy, now=NOW).step is step


def test_fleetlocks_reconcile_pass_keeps_the_early_taint_until_zincati_reports_steady_state() -> None:
    quiet = dataclasses.replace(obs(has_taint=True), required=None, driver=Driver.FLEETLOCK)
    assert decide(quiet, policy=EARLY, now=NOW).step is Step.WAIT
    assert decide(quiet, policy=POLICY, now=NOW).step is Step.SYNC_TAINT  # kured's taint: removed
    steady = dataclasses.replace(quiet, required=False)
    assert decide(steady, policy=EARLY, now=NOW).step is Step.SYNC_TAINT


# -- the loop guard's scope: the sentinel (the Zincati marker path's too), never a boot-bound request --------

BOTH = Trigger.SENTINEL | Trigger.REQUEST
RELEASING: dict[str, Any] = {"holding": True, "reboot_boot_id": "boot-0", "release_after": NOW}


@pytest.mark.parametrize(
    ("trigger", "backoff"),
    [
        (Trigger.SENTINEL, Backoff.SENTINEL),
        (Trigger.REQUEST, None),
        (BOTH, Backoff.SENTINEL),
        (Trigger.CONDITION, None),
        (Trigger.SENTINEL | Trigger.CONDITION, Backoff.SENTINEL),
        (Trigger.NONE, None),
    ],
    ids=["sentinel", "request", "sentinel-and-request", "condition", "sentinel-and-condition", "nothing"],
)
def test_the_loop_guard_after_a_completed_reboot_is_the_sentinels(
    trigger: Trigger, backoff: Backoff | None
) -> None:
    """A need still there when the slot is released: the sentinel (file, command, the command of the Zincati
    marker path) can loop and backs off; a request for the new boot cannot, so it writes no back-off."""
    action = decide(
        obs(required=trigger is not Trigger.NONE, trigger=trigger, **RELEASING), policy=FULL, now=NOW
    )
    assert action.step is Step.RELEASE
    assert action.backoff is backoff
    assert action.backoff_until == (NOW + 60 * MIN if backoff else None)


def test_a_request_for_the_new_boot_written_during_the_reboot_is_carried_out_at_once() -> None:
    """The finding, as the decision sees it: the node rebooted boot-0 -> boot-1 for a request, a second
    request (for boot-1) replaced the first meanwhile, and there is no sentinel. The cycle ends without a
    loop back-off and the next pass takes the lock for the second request."""
    holding: dict[str, Any] = {
        "holding": True,
        "cycle_started": True,
        "reboot_boot_id": "boot-0",
        "reboot_triggered_at": NOW,
    }
    post = decide(obs(trigger=Trigger.REQUEST, **holding), policy=FULL, now=NOW)
    assert post.step is Step.POST_REBOOT
    release = decide(obs(trigger=Trigger.REQUEST, **RELEASING), policy=FULL, now=NOW + 5 * MIN)
    assert (release.step, release.backoff_until) == (Step.RELEASE, None)
    idle = decide(obs(trigger=Trigger.REQUEST), policy=POLICY, now=NOW + 5 * MIN)
    assert (idle.step, idle.reason) == (Step.ACQUIRE, "Reboot required")


@pytest.mark.parametrize(
    ("reason", "trigger", "step", "why"),
    [
        (
            "sentinel",
            Trigger.SENTINEL,
            Step.WAIT,
            "backing off after a reboot that did not clear the sentinel",
        ),
        ("sentinel", Trigger.REQUEST, Step.ACQUIRE, "Reboot required"),
        ("sentinel", BOTH, Step.ACQUIRE, "Reboot required"),
        ("sentinel", Trigger.CONDITION, Step.ACQUIRE, "Reboot required"),
        ("no-reboot", Trigger.CONDITION, Step.WAIT, "backing off after a reboot that never happened"),
        ("no-reboot", Trigger.SENTINEL, Step.WAIT, "backing off after a reboot that never happened"),
        ("no-reboot", Trigger.REQUEST, Step.WAIT, "backing off after a reboot that never happened"),
        (None, Trigger.REQUEST, Step.WAIT, "backing off after the last reboot cycle"),
        ("garbled", Trigger.SENTINEL, Step.WAIT, "backing off after the last reboot cycle"),
    ],
    ids=[
        "loop-holds-the-sentinel",
        "loop-never-holds-a-request",
        "loop-lets-a-request-through-with-the-sentinel",
        "loop-never-holds-a-condition",
        "no-reboot-holds-a-condition",
        "no-reboot-holds-the-sentinel",
        "no-reboot-holds-a-request",
        "unsaid-holds-every-trigger",
        "garbled-holds-every-trigger",
    ],
)
def test_which_triggers_a_back_off_holds(reason: str | None, trigger: Trigger, step: Step, why: str) -> None:
    """A loop back-off holds the sentinel only; one after a reboot that never happened (the reboot method
    does not work: a request would cordon and drain again at once) holds every trigger, as does one whose
    reason is not said (written before the reason was)."""
    observation = obs(trigger=trigger, backoff_until=NOW + 30 * MIN, backoff_reason=reason)
    action = decide(observation, policy=CyclePolicy(), now=NOW)
    assert (action.step, action.reason) == (step, why)
    assert needs_blockers(observation, now=NOW) is (step is Step.ACQUIRE)


def test_a_reboot_that_never_happened_backs_off_every_trigger() -> None:
    node: dict[str, Any] = {
        "holding": True,
        "reboot_boot_id": "boot-1",
        "reboot_triggered_at": NOW - 11 * MIN,
    }
    for trigger in (Trigger.SENTINEL, Trigger.REQUEST, BOTH):
        action = decide(obs(trigger=trigger, reboot_attempts=2, **node), policy=FULL, now=NOW)
        assert (action.step, action.backoff) == (Step.GIVE_UP, Backoff.NO_REBOOT)


# -- --drain-escalation ------------------------------------------------------------------------------------

DQ = (Escalation.DELETE, Escalation.QUARANTINE)


@pytest.mark.parametrize(
    ("escalation", "timed_out", "taken", "expected"),
    [
        ((), True, 0, None),
        (DQ, False, 0, None),
        (DQ, True, 0, Escalation.DELETE),
        (DQ, True, 1, Escalation.QUARANTINE),
        (DQ, True, 2, None),
        ((Escalation.FORCE,), True, 0, Escalation.FORCE),
    ],
    ids=["off", "not-a-timeout", "first", "second", "used-up", "force"],
)
def test_next_escalation(
    escalation: tuple[Escalation, ...], timed_out: bool, taken: int, expected: Escalation | None
) -> None:
    policy = CyclePolicy(escalation=escalation)
    assert next_escalation(timed_out=timed_out, taken=taken, policy=policy) is expected


@pytest.mark.parametrize(
    ("failure", "holding", "force", "escalation", "expected"),
    [
        (None, True, False, Escalation.QUARANTINE, DrainOutcome.REBOOT),
        ("t", False, False, Escalation.QUARANTINE, DrainOutcome.LOST),
        ("t", True, False, None, DrainOutcome.RELEASE),
        ("t", True, True, None, DrainOutcome.REBOOT_ANYWAY),
        ("t", True, False, Escalation.FORCE, DrainOutcome.REBOOT_ANYWAY),
        ("t", True, False, Escalation.QUARANTINE, DrainOutcome.QUARANTINE),
    ],
    ids=["drained", "lost", "kured", "force-reboot", "force", "quarantine"],
)
def test_drain_outcome_with_escalation(
    failure: str | None, holding: bool, force: bool, escalation: Escalation | None, expected: DrainOutcome
) -> None:
    policy = CyclePolicy(force_reboot=force)
    assert drain_outcome(failure, holding=holding, policy=policy, escalation=escalation) is expected


def _quarantined(node: NodeState) -> NodeState:
    return dataclasses.replace(node, annotations={**node.annotations, "pykured.dev/quarantined": "{garbled"})


@pytest.mark.parametrize("driver", [Driver.DAEMON, Driver.FLEETLOCK])
def test_a_holder_found_quarantined_before_its_drain_ends_without_touching_the_cordon(driver: Driver) -> None:
    """A restart in the middle of the quarantine step (the record written, the slot not yet released), or a
    record written by hand: no drain, no uncordon; the slot goes."""
    node = _quarantined(
        node_state(
            holding=True,
            cycle_started=True,
            unschedulable=True,
            entry_unschedulable=False,
            fleetlock_cycle=driver is Driver.FLEETLOCK,
        )
    )
    action = decide(dataclasses.replace(obs(), node=node, driver=driver), policy=POLICY, now=NOW)
    assert (action.step, action.uncordon) == (Step.ABORT, False)
    plain = node_state(
        holding=True,
        cycle_started=True,
        unschedulable=True,
        entry_unschedulable=False,
        fleetlock_cycle=driver is Driver.FLEETLOCK,
    )
    assert decide(dataclasses.replace(obs(), node=plain, driver=driver), policy=POLICY, now=NOW).step is (
        Step.DRAIN_AND_REBOOT
    )


def test_a_lost_cycle_of_a_quarantined_node_keeps_its_cordon() -> None:
    """The slot released, the memory not yet cleared (a restart in between): the cleanup leaves the cordon."""
    node = node_state(cycle_started=True, unschedulable=True)
    assert decide(dataclasses.replace(obs(), node=node), policy=POLICY, now=NOW).uncordon is True
    action = decide(dataclasses.replace(obs(), node=_quarantined(node)), policy=POLICY, now=NOW)
    assert (action.step, action.settle_cordon, action.uncordon) == (Step.CLEANUP, True, False)
