"""The reboot cycle as a pure decision: what one reconcile pass does next, given what it observed.

kured's cycle lives in two ``for range tick`` loops whose state is the program counter, so a pod restart at
the wrong moment loses it (nodes left cordoned, #63/#955; reboot loops, #44/#976). pykured keeps the state
where it survives a restart — the lock entry and ``pykured.dev/*`` annotations on the Node — and every pass
derives the next step from it afresh. Each action is small and idempotent, so repeating one after a crash is
harmless.

The phases, as the state reads them::

    idle ──acquire──▶ holding ──drain+reboot──▶ rebooting ──new bootID──▶ rebooted ──delay──▶ release ─▶ idle
                         │                          │ same bootID after --reboot-retry-delay: retry once,
                         │ sentinel gone / window   │ then give up (uncordon, release, back off)
                         └──────────▶ abort ◀───────┘

Invariants:
* A node is uncordoned only when pykured (or kured, per the lock entry) recorded that it was schedulable
  before the cordon: an administrator's cordon is never undone.
* The holder always finishes its own cycle, even after its lock TTL expired (``holding`` ignores TTL).
* A reboot is triggered at most ``max_attempts`` times per boot, and a sentinel still present right after a
  completed reboot backs off (kured #976) instead of rebooting again at once.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum

from pykured.model import Reason


class Step(enum.Enum):
    """The next action of a reconcile pass."""

    WAIT = "wait"
    """Nothing to do until ``until`` (or a sentinel/lock event, or the next period)."""
    SYNC_TAINT = "sync-taint"
    """Remove the PreferNoSchedule taint (the node does not need a reboot, or the window is closed)."""
    ANNOTATE = "annotate"
    """Add kured's reboot-in-progress / most-recent-reboot-needed annotations (``--annotate-nodes``)."""
    BLOCKED = "blocked"
    """A blocker (Prometheus alerts, pods) holds the reboot back: log ``Reboot blocked: …`` and wait."""
    ACQUIRE = "acquire"
    """Take a lock slot (or, failing that, taint and wait for the lock)."""
    DRAIN_AND_REBOOT = "drain-and-reboot"
    """Record memory, pre-reboot labels, cordon, drain, then trigger the reboot."""
    RETRY_REBOOT = "retry-reboot"
    """The bootID did not change after the retry delay: notify and trigger the reboot once more."""
    GIVE_UP = "give-up"
    """The reboot never happened: uncordon if we cordoned, release, back off."""
    POST_REBOOT = "post-reboot"
    """The node came back with a new bootID: uncordon if we cordoned, post labels, notify, set the release."""
    RELEASE = "release"
    """The release delay passed: free the slot and clear pykured's memory on the Node."""
    ABORT = "abort"
    """Holding the lock but no reboot is wanted any more: uncordon if we cordoned and release."""
    CLEANUP = "cleanup"
    """pykured's memory is on the Node but the lock is gone (expired and taken, or freed by hand)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Action:
    """What to do, and why (the reason is logged)."""

    step: Step
    reason: str = ""
    until: datetime.datetime | None = None
    """For ``WAIT``: when to look again at the latest (``None``: the next period)."""
    blocked: Reason | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class NodeMemory:
    """What the Node's annotations and status say about the cycle."""

    boot_id: str = ""
    unschedulable: bool = False
    reboot_boot_id: str | None = None
    reboot_triggered_at: datetime.datetime | None = None
    reboot_attempts: int = 0
    release_after: datetime.datetime | None = None
    backoff_until: datetime.datetime | None = None
    in_progress_annotation: bool = False
    has_taint: bool = False
    cycle_started: bool = False
    """``pykured.dev/unschedulable-before`` is set: pykured took the lock and may have cordoned."""
    fleetlock_cycle: bool = False
    """``pykured.dev/fleetlock-id`` is set: Zincati drives this cycle through FleetLock; hands off."""


@dataclasses.dataclass(frozen=True, slots=True)
class Observation:
    """One pass's view of the world."""

    required: bool
    in_window: bool
    node: NodeMemory
    holding: bool
    next_window: datetime.datetime | None = None
    blocked: Reason | None = None
    """Evaluated only when the decision depends on it (see :func:`needs_blockers`)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Policy:
    """The configuration the decision depends on."""

    annotate_nodes: bool = False
    taint: bool = False
    reboot_retry_delay: datetime.timedelta = datetime.timedelta(minutes=10)
    max_attempts: int = 2


def needs_blockers(obs: Observation, *, now: datetime.datetime) -> bool:
    """Whether :func:`decide` would look at blockers: the node is idle and a reboot is due."""
    return (
        not obs.node.fleetlock_cycle
        and not obs.holding
        and not _stale_memory(obs.node)
        and obs.in_window
        and obs.required
        and not (obs.node.backoff_until and now < obs.node.backoff_until)
    )


def _stale_memory(node: NodeMemory) -> bool:
    return node.cycle_started or node.reboot_boot_id is not None or node.release_after is not None


def _rebooted(node: NodeMemory) -> bool:
    return node.reboot_boot_id is not None and bool(node.boot_id) and node.boot_id != node.reboot_boot_id


def _retry_due(node: NodeMemory, policy: Policy) -> datetime.datetime:
    started = node.reboot_triggered_at or datetime.datetime.min.replace(tzinfo=datetime.UTC)
    return started + policy.reboot_retry_delay


def _decide_holding(obs: Observation, policy: Policy, now: datetime.datetime) -> Action:
    node = obs.node
    if node.release_after is not None:
        if now >= node.release_after:
            return Action(Step.RELEASE, "lock release delay passed")
        return Action(Step.WAIT, "waiting for the lock release delay", until=node.release_after)
    if node.reboot_boot_id is not None:
        if _rebooted(node):
            return Action(Step.POST_REBOOT, "node rebooted (bootID changed)")
        due = _retry_due(node, policy)
        if now < due:
            return Action(Step.WAIT, "Waiting for reboot", until=due)
        if node.reboot_attempts < policy.max_attempts:
            return Action(Step.RETRY_REBOOT, f"bootID unchanged {policy.reboot_retry_delay} after the reboot")
        return Action(Step.GIVE_UP, f"bootID unchanged after {node.reboot_attempts} reboot attempts")
    if obs.required and obs.in_window:
        return Action(Step.DRAIN_AND_REBOOT, "Reboot required")
    why = "reboot no longer required" if not obs.required else "outside the maintenance window"
    return Action(Step.ABORT, why)


def decide(obs: Observation, *, policy: Policy, now: datetime.datetime) -> Action:
    """The next step of the reboot cycle. Pure: everything it needs is passed in."""
    if obs.node.fleetlock_cycle:
        return Action(Step.WAIT, "FleetLock (Zincati) runs this node's reboot cycle")
    if obs.holding:
        return _decide_holding(obs, policy, now)
    node = obs.node
    if _stale_memory(node):
        if node.reboot_boot_id is not None and not _rebooted(node) and node.release_after is None:
            due = _retry_due(node, policy)
            if now < due:
                return Action(Step.WAIT, "Waiting for reboot (lock no longer held)", until=due)
        return Action(Step.CLEANUP, "the lock is no longer held by this node")
    if not obs.in_window:
        if node.has_taint and policy.taint:
            return Action(Step.SYNC_TAINT, "outside the maintenance window")
        return Action(Step.WAIT, "outside the maintenance window", until=obs.next_window)
    if not obs.required:
        if node.has_taint and policy.taint:
            return Action(Step.SYNC_TAINT, "Reboot not required")
        return Action(Step.WAIT, "Reboot not required")
    if node.backoff_until and now < node.backoff_until:
        return Action(
            Step.WAIT, "backing off after a reboot that did not clear the sentinel", until=node.backoff_until
        )
    if policy.annotate_nodes and not node.in_progress_annotation:
        return Action(Step.ANNOTATE, "Reboot required")
    if obs.blocked is not None:
        return Action(Step.BLOCKED, str(obs.blocked), blocked=obs.blocked)
    return Action(Step.ACQUIRE, "Reboot required")
