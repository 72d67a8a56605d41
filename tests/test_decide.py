"""Every transition of the pure reboot-cycle decision."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

import pytest

from pykured.decide import NodeMemory, Observation, Policy, Step, decide, needs_blockers
from pykured.model import Reason

NOW = datetime.datetime(2026, 6, 30, 12, 0, 0, tzinfo=datetime.UTC)
MIN = datetime.timedelta(minutes=1)
POLICY = Policy(annotate_nodes=True, taint=True, reboot_retry_delay=10 * MIN, max_attempts=2)
BLOCK = Reason("prometheus", "1 active alerts: [Down]")


def obs(
    *,
    required: bool = True,
    in_window: bool = True,
    holding: bool = False,
    blocked: Reason | None = None,
    next_window: datetime.datetime | None = None,
    **node: Any,
) -> Observation:
    return Observation(
        required=required,
        in_window=in_window,
        holding=holding,
        blocked=blocked,
        next_window=next_window,
        node=dataclasses.replace(NodeMemory(boot_id="boot-1", in_progress_annotation=True), **node),
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
        Policy(),
        Step.WAIT,
        "",
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
        "",
    ),
    ("idle: annotate first (--annotate-nodes)", obs(in_progress_annotation=False), POLICY, Step.ANNOTATE, ""),
    ("idle: no annotation without the flag", obs(in_progress_annotation=False), Policy(), Step.ACQUIRE, ""),
    ("idle: blocked", obs(blocked=BLOCK), POLICY, Step.BLOCKED, "1 active alerts: [Down]"),
    ("idle: acquire", obs(), POLICY, Step.ACQUIRE, "Reboot required"),
    (
        "idle: back off after a reboot that left the sentinel",
        obs(backoff_until=NOW + 30 * MIN),
        POLICY,
        Step.WAIT,
        "backing off",
    ),
    ("idle: backoff expired", obs(backoff_until=NOW - MIN), POLICY, Step.ACQUIRE, ""),
    # holding the lock, before the reboot
    ("holding: drain and reboot", obs(holding=True, cycle_started=True), POLICY, Step.DRAIN_AND_REBOOT, ""),
    (
        "holding: resume after a restart before memory was written",
        obs(holding=True),
        POLICY,
        Step.DRAIN_AND_REBOOT,
        "",
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
        "",
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
        "",
    ),
    (
        "rebooting: gives up after the retry",
        obs(holding=True, reboot_boot_id="boot-1", reboot_triggered_at=NOW - 11 * MIN, reboot_attempts=2),
        POLICY,
        Step.GIVE_UP,
        "",
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
        "",
    ),
    # after the reboot
    (
        "rebooted: post-reboot steps",
        obs(holding=True, reboot_boot_id="boot-0", reboot_triggered_at=NOW - MIN),
        POLICY,
        Step.POST_REBOOT,
        "",
    ),
    (
        "rebooted: waits for the release delay",
        obs(holding=True, reboot_boot_id="boot-0", release_after=NOW + MIN),
        POLICY,
        Step.WAIT,
        "",
    ),
    (
        "rebooted: releases after the delay",
        obs(holding=True, reboot_boot_id="boot-0", release_after=NOW),
        POLICY,
        Step.RELEASE,
        "",
    ),
    (
        "rebooted: releases even with the sentinel back",
        obs(holding=True, required=True, reboot_boot_id="boot-0", release_after=NOW - MIN),
        POLICY,
        Step.RELEASE,
        "",
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
        "FleetLock",
    ),
    ("fleetlock: idle with sentinel", obs(fleetlock_cycle=True), POLICY, Step.WAIT, "FleetLock"),
    # lost lock (TTL expired and taken, or freed by an operator) with memory on the node
    ("lost lock mid-drain: clean up", obs(cycle_started=True), POLICY, Step.CLEANUP, ""),
    (
        "lost lock after reboot: clean up",
        obs(reboot_boot_id="boot-0", cycle_started=True),
        POLICY,
        Step.CLEANUP,
        "",
    ),
    (
        "lost lock while rebooting: wait for the reboot first",
        obs(reboot_boot_id="boot-1", reboot_triggered_at=NOW - MIN),
        POLICY,
        Step.WAIT,
        "Waiting for reboot",
    ),
    (
        "lost lock, reboot never came: clean up",
        obs(reboot_boot_id="boot-1", reboot_triggered_at=NOW - 20 * MIN),
        POLICY,
        Step.CLEANUP,
        "",
    ),
    (
        "lost lock during release delay: clean up",
        obs(release_after=NOW + MIN, reboot_boot_id="boot-0"),
        POLICY,
        Step.CLEANUP,
        "",
    ),
]


@pytest.mark.parametrize(
    ("observation", "policy", "step", "reason"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_decide(observation: Observation, policy: Policy, step: Step, reason: str) -> None:
    action = decide(observation, policy=policy, now=NOW)
    assert action.step is step
    assert reason in action.reason


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
