"""The parity matrix: every policy feature against every driver, each cell a test or the reason it is n/a.

``docs/parity.md`` is rendered from :data:`FEATURES` (``PYKURED_UPDATE_GOLDEN=1 pytest
tests/parity/test_matrix.py`` rewrites it); :mod:`tests.parity.test_matrix` fails when the document drifts
or when a cell names a test that does not exist.
"""

from __future__ import annotations

import dataclasses

from tests.parity.harness import DAEMON_DRIVERS, DRIVERS, FLEETLOCK_DRIVERS

__all__ = ["DRIVERS", "FEATURES", "Feature", "cell", "render"]

FLEETLOCK_NO_QUEUE = (
    "Zincati asks again on its own schedule (every few minutes); a queue entry needs an agent that renews "
    "it, so FleetLock nodes take a free slot as kured's nodes do"
)
FLEETLOCK_NO_LOOP = (
    "a reboot Zincati asks for right after a completed one is a new update, not a sentinel that did not "
    "clear; Zincati's own state machine cannot loop on one update"
)


CONDITION_IS_A_NEED = (
    "a reboot request is a need of its own; a condition is another, joining the same decision as the "
    "sentinel does (the sentinel's and the marker's cells)"
)
FLEETLOCK_NO_CONDITION = (
    "Zincati's request is the need and Zincati decides when to ask; a Node's condition is read by the agent "
    "on that node, which hands its reboot to Zincati on the marker path"
)


@dataclasses.dataclass(frozen=True)
class Feature:
    name: str
    test: str
    """The test function in tests/e2e/parity/test_parity.py; its ids name the driver."""
    na: dict[str, str] = dataclasses.field(default_factory=dict)
    """Driver → why the feature does not apply to it."""


FEATURES = (
    Feature("weekly window (`--reboot-days`, `--start-time`, `--end-time`)",
            "test_held_before_the_lock[weekly-window-{driver}]"),
    Feature("calendar windows (`--maintenance-window`)",
            "test_held_before_the_lock[calendar-window-{driver}]"),
    Feature("blackouts (`--blackout`, the policy ConfigMap)", "test_held_before_the_lock[blackout-{driver}]"),
    Feature("freeze (`pykured freeze`)", "test_held_before_the_lock[freeze-{driver}]"),
    Feature("blocking pods (`--blocking-pod-selector`)", "test_held_before_the_lock[blocking-pods-{driver}]"),
    Feature("blocking node labels (`--blocking-node-label`, `--blocking-node-annotation`)",
            "test_held_before_the_lock[blocking-node-{driver}]"),
    Feature("Prometheus alerts (`--prometheus-url`)", "test_held_before_the_lock[alerts-{driver}]"),
    Feature("Alertmanager alerts (`--alertmanager-url`)", "test_held_before_the_lock[alertmanager-{driver}]"),
    Feature("an operator's silence in Alertmanager lets the node go",
            "test_an_operators_silence_lets_the_node_go[{driver}]"),
    Feature("a silence while the node reboots (`--silence-during-reboot`)",
            "test_silenced_while_the_node_reboots[{driver}]"),
    Feature("the silence expired by an agent restarted mid-cycle",
            "test_a_restarted_agent_expires_the_silence[{driver}]"),
    Feature("the silence expired before the slot is freed: the release (annotation lock)",
            "test_the_silence_ends_before_the_slot_is_freed[release-daemonset-{driver}]"),
    Feature("the silence expired before the slot is freed: the release (Lease lock)",
            "test_the_silence_ends_before_the_slot_is_freed[release-lease-{driver}]"),
    Feature("the silence expired before the slot is freed: a failed drain",
            "test_the_silence_ends_before_the_slot_is_freed[drain-fails-{driver}]"),
    Feature("the silence expired before the slot is freed: a quarantine",
            "test_the_silence_ends_before_the_slot_is_freed[quarantine-{driver}]"),
    Feature("the silence expired before the slot is freed: an abort (the need gone before the drain)",
            "test_the_silence_ends_before_the_slot_is_freed[abort-{driver}]"),
    Feature("a refused expiry: the slot freed, the next node held by the alert under the silence, retried",
            "test_a_refused_expiry_holds_the_next_node_until_it_is_retried[{driver}]"),
    Feature("autoscalers kept off the node for its cycle (`--cluster-autoscaler-annotation`, "
            "`--karpenter-annotation`), until the release (annotation lock)",
            "test_the_autoscalers_keep_off_the_node_for_its_cycle[done-daemonset-{driver}]"),
    Feature("autoscalers kept off the node for its cycle, until the release (Lease lock)",
            "test_the_autoscalers_keep_off_the_node_for_its_cycle[done-lease-{driver}]"),
    Feature("autoscalers kept off the node for its cycle, until a failed drain",
            "test_the_autoscalers_keep_off_the_node_for_its_cycle[drain-fails-{driver}]"),
    Feature("autoscalers kept off the node for its cycle, until a quarantine",
            "test_the_autoscalers_keep_off_the_node_for_its_cycle[quarantine-{driver}]"),
    Feature("autoscalers kept off the node for its cycle, until an abort (the need gone before the drain)",
            "test_the_autoscalers_keep_off_the_node_for_its_cycle[abort-{driver}]"),
    Feature("autoscalers kept off the node for its cycle, until the slot freed by an operator "
            "(`pykured lock release`)",
            "test_the_autoscalers_keep_off_the_node_for_its_cycle[released-{driver}]"),
    Feature("autoscalers kept off the node for its cycle, through an agent restarted mid-cycle",
            "test_the_autoscalers_keep_off_the_node_for_its_cycle[restarted-{driver}]"),
    Feature("an operator's own autoscaler annotation stays; an autoscaler's annotation renamed",
            "test_an_operators_autoscaler_annotation_stays_and_each_may_be_renamed_or_off"
            "[operators-own-renamed-{driver}]"),
    Feature("the autoscalers' annotations turned off (`\"\"`)",
            "test_an_operators_autoscaler_annotation_stays_and_each_may_be_renamed_or_off[off-{driver}]"),
    Feature("drain failure and timeout (`--drain-timeout`)", "test_a_drain_that_fails[drain-fails-{driver}]"),
    Feature("`--force-reboot`", "test_a_drain_that_fails[force-reboot-{driver}]"),
    Feature("a drain you can watch: the pods it waits on and why in `pykured.dev/status`, cleared when it "
            "times out", "test_a_drain_you_can_watch[timed-out-{driver}]"),
    Feature("a drain you can watch, cleared when it is escalated (`--drain-escalation=delete`); "
            "`pykured_drain_pods_waiting`, `DrainSlow`", "test_a_drain_you_can_watch[escalated-{driver}]"),
    Feature("halt after failed drains (`--max-failed-drains`)",
            "test_failed_drains_halt_the_fleet[{driver}]"),
    Feature("drain escalation: delete past a PodDisruptionBudget (`--drain-escalation=delete`)",
            "test_drain_escalation_delete[{driver}]"),
    Feature("drain escalation: delete, then reboot anyway (`--drain-escalation=delete,force`)",
            "test_drain_escalation_delete_then_force[{driver}]"),
    Feature("drain escalation: quarantine and `pykured unquarantine` (`--drain-escalation=quarantine`)",
            "test_drain_escalation_quarantine[daemonset-{driver}]"),
    Feature("drain escalation: quarantine on the Lease lock",
            "test_drain_escalation_quarantine[lease-{driver}]"),
    Feature("before- and after-reboot hooks", "test_before_and_after_reboot_hooks[{driver}]"),
    Feature("settle gates (`--settle-*`)", "test_settle_gates_hold_the_release[{driver}]"),
    Feature("PreferNoSchedule taint while waiting", "test_a_held_lock_taints_and_waits[{driver}]"),
    Feature("early PreferNoSchedule taint (`--prefer-no-schedule-early`)",
            "test_the_early_taint_while_the_node_waits[{driver}]"),
    Feature("`--concurrency`", "test_a_held_lock_taints_and_waits[{driver}]"),
    Feature("per-label pacing (`--concurrency-label`)", "test_zone_pacing[{driver}]"),
    Feature("per-label share (`--concurrency-per-label=P%`)", "test_zone_share[{driver}]"),
    Feature("reboot budget on the Lease lock (`--max-unavailable`)", "test_max_unavailable[{driver}-lease]"),
    Feature("reboot budget on the annotation lock (`--max-unavailable`)",
            "test_max_unavailable[{driver}-daemonset]"),
    Feature("resume order (`--resume-rolls`)", "test_resume_rolls_queue[{driver}]",
            na={d: FLEETLOCK_NO_QUEUE for d in DRIVERS if d not in DAEMON_DRIVERS}),
    Feature("pre/post-reboot labels", "test_a_whole_cycle[{driver}-daemonset]"),
    Feature("`--annotate-nodes`", "test_a_whole_cycle[{driver}-daemonset]"),
    Feature("notifications and message templates", "test_a_whole_cycle[{driver}-daemonset]"),
    Feature("metrics", "test_a_whole_cycle[{driver}-daemonset]"),
    Feature("Events", "test_a_whole_cycle[{driver}-daemonset]"),
    Feature("both lock backends", "test_a_whole_cycle[{driver}-lease]"),
    Feature("`--lock-release-delay`", "test_the_lock_release_delay[{driver}]"),
    Feature("boot-ID proof of the reboot", "test_a_whole_cycle[{driver}-daemonset]"),
    Feature("no reboot loop (`--sentinel-loop-backoff`, boot-bound requests)",
            "test_no_second_reboot_for_the_same_need[{driver}]",
            na={d: FLEETLOCK_NO_LOOP for d in DRIVERS if d not in DAEMON_DRIVERS}),
    Feature("the loop guard holds the sentinel, never a boot-bound request",
            "test_the_loop_guard_holds_the_sentinel_never_a_request[{driver}]",
            na={d: FLEETLOCK_NO_LOOP for d in DRIVERS if d not in DAEMON_DRIVERS}),
    Feature("a Node condition as the need (`--reboot-condition`)",
            "test_a_node_condition_is_the_need[{driver}]",
            na={"request": CONDITION_IS_A_NEED, **{d: FLEETLOCK_NO_CONDITION for d in FLEETLOCK_DRIVERS}}),
)  # fmt: skip


def cell(feature: Feature, driver: str) -> str:
    """The test id of a cell, or ``n/a — reason``."""
    if driver in feature.na:
        return f"n/a — {feature.na[driver]}"
    return feature.test.format(driver=driver)


def render() -> str:
    """``docs/parity.md``."""
    lines = [
        "# Parity: every feature through every path a reboot can take",
        "",
        "Generated from `tests/parity/matrix.py`",
        "(`PYKURED_UPDATE_GOLDEN=1 tools/dev test tests/parity/test_matrix.py` rewrites it; the test fails",
        "when it drifts). Every path goes through one decision (`pykured.cycle.decide`) and one runner of",
        "the steps (`pykured.cycle.run`); each cell below names the test in",
        "`tests/e2e/parity/test_parity.py` that runs the feature's scenario through that path against the",
        "real API server and checks the same observable writes (Node, lock, Events, notifications, metrics),",
        "or says why the feature does not apply.",
        "",
        "The paths: **sentinel** (the daemon, `/var/run/reboot-required` or `--reboot-sentinel-command`),",
        "**request** (the daemon, `pykured request-reboot`), **zincati-marker** (the daemon,",
        "`--reboot-method=zincati`), **fleetlock-central** and **fleetlock-node-local** (stock Zincati over",
        "FleetLock, `--fleetlock-listen`).",
        "",
        "| feature | " + " | ".join(DRIVERS) + " |",
        "|---|" + "---|" * len(DRIVERS),
    ]
    for feature in FEATURES:
        cells = []
        for driver in DRIVERS:
            text = cell(feature, driver)
            cells.append(text if text.startswith("n/a") else f"`{text}`")
        lines.append(f"| {feature.name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
