"""The reboot cycle as one pure decision, for every driver: what one pass does next, and every rule the steps
act on.

Every path a reboot can take is decided here and only here: the sentinel daemon, a reboot request, a Node
condition and the Zincati marker hand-off (:class:`Driver.DAEMON`: the agent on the node), and FleetLock,
central or node-local (:class:`Driver.FLEETLOCK`: Zincati asks over HTTP; ``required`` is its request,
``None`` on a reconcile pass when Zincati said nothing). The drivers observe, call :func:`decide` (and
:func:`drain_outcome` after a drain), and run the step with :class:`~pykured.cycle.run.CycleRunner`; none
of them decides anything.

kured's cycle lives in two ``for range tick`` loops whose state is the program counter, so a pod restart at
the wrong moment loses it (nodes left cordoned, #63/#955; reboot loops, #44/#976). pykured keeps the state
where it survives a restart — the lock entry and ``pykured.dev/*`` annotations on the Node — and every pass
derives the next step from it afresh. Each step is small and idempotent, so repeating one after a crash is
harmless. The steps (:mod:`pykured.cycle.steps`) only act: whether the node rebooted, whose cordon it is,
which back-off to write and what a failed drain means are decided here, with ``now`` passed in.

The phases, as the state reads them::

    idle ──acquire──▶ holding ──drain+reboot──▶ rebooting ──new bootID──▶ rebooted ──delay──▶ release ─▶ idle
                         │                          │ same bootID after --reboot-retry-delay: retry once,
                         │ sentinel gone / window   │ then give up (uncordon, release, back off)
                         └──────────▶ abort ◀───────┘

Invariants:
* A node is uncordoned only when pykured (or kured, per the lock entry) recorded that it was schedulable
  before the cordon (:func:`cordon_was_ours`): an administrator's cordon is never undone.
* The holder always finishes its own cycle, even after its lock TTL expired (``holding`` ignores TTL).
* A reboot is triggered at most ``max_attempts`` times per boot, and a sentinel still present right after a
  completed reboot backs off (kured #976) instead of rebooting again at once. The loop guard is the
  sentinel's only (:class:`Trigger`): a reboot request names the boot it wants left, and a Node condition
  counts only when it appeared since the current boot, so neither can loop, and neither writes a loop
  back-off nor waits for one; a back-off after a reboot that never happened holds every trigger.
* Every action has a reason (it is what the daemon logs).
* A quarantined node (``--drain-escalation=…,quarantine``) is never uncordoned by the cycle and never drained:
  a cycle that finds the quarantine before its drain (a restart mid-way through the quarantine step, a
  record written by hand) ends without touching the cordon; a new one is blocked (the quarantine blocker).
"""

from __future__ import annotations

import dataclasses
import datetime
import enum

from pykured.core.model import GateResult, Reason, Verdict
from pykured.cycle.state import NodeState


class Driver(enum.Enum):
    """Who drives the cycle."""

    DAEMON = "daemon"
    """The agent on the node: the sentinel, a reboot request, a Node condition, the Zincati marker
    hand-off."""
    FLEETLOCK = "fleetlock"
    """Zincati over FleetLock: its pre-reboot request is the need, the 200 answer is the reboot (a grant)."""


class Trigger(enum.Flag):
    """What makes the daemon's node need a reboot (:attr:`Observation.trigger`; FleetLock's is Zincati)."""

    NONE = 0
    SENTINEL = enum.auto()
    """The sentinel file or command. It can outlive the reboot it asked for (a command that stays true, a file
    on a disk that survives the boot: kured #976), so the loop guard applies to it. On the Zincati marker
    path the need is the same sentinel (the command that sees a staged deployment), which stays true if the
    node rebooted without finalizing: the guard applies there too."""
    REQUEST = enum.auto()
    """A reboot request naming the current boot (:mod:`pykured.requests.record`). The boot it names is left
    by the reboot, so it cannot ask twice: the loop guard never applies to it."""
    CONDITION = enum.auto()
    """A Node condition of ``--reboot-condition`` that appeared since the current boot
    (:mod:`pykured.conditions.record`). One left from before the reboot is not a need, so it cannot loop
    either: the loop guard never applies to it (a condition that comes back after each reboot is bounded by
    its breakers, ``--reboot-condition-max`` and ``--reboot-condition-fleet-max``)."""


class Backoff(enum.Enum):
    """Why a back-off was written (``pykured.dev/backoff-reason``), and so which triggers it holds."""

    SENTINEL = "sentinel"
    """The sentinel was still present right after a completed reboot: holds the sentinel only."""
    NO_REBOOT = "no-reboot"
    """The reboot never happened (bootID unchanged after every attempt): holds every trigger."""


class Escalation(enum.Enum):
    """One step of ``--drain-escalation``: what happens when ``--drain-timeout`` runs out.

    The flag is an ordered list: ``delete`` may come first and is followed by another ``--drain-timeout``;
    ``force`` or ``quarantine`` (at most one of them) ends it. A drain that fails for anything but the timeout
    (an API error, a pod the filters refuse) is not escalated: kured's path (release, retry) or
    ``--force-reboot`` applies."""

    DELETE = "delete"
    """Delete the pods still there without the eviction API (a PodDisruptionBudget no longer holds them),
    each with its grace period; the drain's filters still apply."""
    FORCE = "force"
    """Reboot anyway, as ``--force-reboot`` does."""
    QUARANTINE = "quarantine"
    """Leave the node cordoned and not rebooted, mark it quarantined, release the lock: the roll goes on."""


class Hold(enum.Enum):
    """What a ``WAIT`` waits for (FleetLock answers Zincati by it; the daemon logs the reason)."""

    NONE = "none"
    NOT_REQUIRED = "not-required"
    WINDOW = "window"
    BACKOFF = "backoff"
    """After a reboot that did not clear the sentinel, or one that never happened."""
    DRAIN_RETRY = "drain-retry"
    """After a failed drain (or a before-reboot hook that timed out): no new cycle for one period."""
    FOREIGN = "foreign"
    """The other driver runs this node's cycle."""
    DRAINING = "draining"
    """A drain runs in this process."""
    GRANTED = "granted"
    """FleetLock granted the reboot; Zincati reboots."""
    REBOOTING = "rebooting"
    """The reboot was triggered; waiting for the new bootID."""
    NOT_READY = "not-ready"
    """Granted, and the node is not Ready: its new bootID is not known yet."""
    RELEASE_DELAY = "release-delay"


class Step(enum.Enum):
    """The next action of a reconcile pass."""

    WAIT = "wait"
    """Nothing to do until ``until`` (or a sentinel/lock event, or the next period)."""
    SYNC_TAINT = "sync-taint"
    """Remove the PreferNoSchedule taint (the node does not need a reboot, or the window is closed)."""
    TAINT = "taint"
    """Put the PreferNoSchedule taint on at once (``--prefer-no-schedule-early``): the node needs a reboot
    and waits (window, blocker, back-off), so new pods stop landing on it before its turn."""
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
    HOLD = "hold"
    """Keep the lock while a reboot hook or settle gate is closed (``gate`` says which, and until when)."""
    ALERT_STUCK = "alert-stuck"
    """FleetLock granted the reboot long ago and the bootID never changed: finalization is stuck."""


@dataclasses.dataclass(frozen=True, slots=True)
class Action:
    """What to do, and why (the reason is logged); the other fields are the decisions the step carries out."""

    step: Step
    reason: str
    until: datetime.datetime | None = None
    """For ``WAIT``: when to look again at the latest (``None``: the next period)."""
    blocked: Reason | None = None
    uncordon: bool = False
    """The cordon is ours: uncordon (and apply the post-reboot labels) when the cycle ends."""
    unschedulable_before: bool | None = None
    """For ``DRAIN_AND_REBOOT``: the value to record first (``None``: already recorded)."""
    post_reboot: bool = False
    """For ``CLEANUP``: the node rebooted, so finish the reboot (uncordon if ours, labels, notify)."""
    settle_cordon: bool = False
    """For ``CLEANUP``: the cycle ended mid-way: uncordon if ours (else leave the cordon, and say so)."""
    remove_in_progress: bool = False
    """Remove kured's reboot-in-progress annotation after the reboot."""
    release_after: datetime.datetime | None = None
    """For ``POST_REBOOT``: when the slot may be released (``--lock-release-delay``)."""
    backoff_until: datetime.datetime | None = None
    """For ``GIVE_UP`` and ``RELEASE``: no new cycle before this time (``None``: clear the back-off)."""
    backoff: Backoff | None = None
    """With ``backoff_until``: why, and so which triggers it holds."""
    reboot_if_drain_fails: bool = False
    """For ``DRAIN_AND_REBOOT``: reboot even when cordon or drain fails (``--force-reboot``)."""
    hold: Hold = Hold.NONE
    """For ``WAIT``: what it waits for."""
    gate: GateResult | None = None
    """For ``HOLD``: the closed gate; for ``ABORT`` and ``RELEASE``: a gate that timed out."""
    retry: bool = False
    """For ``ABORT``: the cycle ends as after a failed drain (no new one for a period)."""
    no_steady_state: bool = False
    """For FleetLock's ``POST_REBOOT``: Zincati sent no steady-state; the node has been Ready long enough."""


@dataclasses.dataclass(frozen=True, slots=True)
class Observation:
    """One pass's view of the world."""

    required: bool | None
    """The sentinel, a request or a Node condition (daemon); Zincati's pre-reboot / steady-state
    (FleetLock); ``None``: FleetLock's reconcile pass, Zincati said nothing."""
    in_window: bool
    node: NodeState
    next_window: datetime.datetime | None = None
    has_taint: bool = False
    """The node carries the configured PreferNoSchedule taint."""
    retry_at: datetime.datetime | None = None
    """After a failed drain: no new cycle before this time (kept in memory, as kured)."""
    blocked: Reason | None = None
    """Evaluated only when the decision depends on it (see :func:`needs_blockers`)."""
    driver: Driver = Driver.DAEMON
    trigger: Trigger = Trigger.SENTINEL
    """The daemon: which triggers make ``required`` true (the loop guard's scope depends on it). The default
    is kured's one trigger, the sentinel: a need whose trigger is not said is guarded against a loop."""
    draining: bool = False
    """A drain of this node runs in this process (FleetLock's drain worker)."""
    gate: GateResult | None = None
    """The gate of the step decided without it (:func:`gate_point`); ``None``: not evaluated."""


@dataclasses.dataclass(frozen=True, slots=True)
class CyclePolicy:
    """The configuration the decisions depend on."""

    annotate_nodes: bool = False
    taint: bool = False
    taint_early: bool = False
    """``--prefer-no-schedule-early``: taint as soon as the node needs a reboot, not only while the lock is
    held by others; removed when the need goes away."""
    reboot_retry_delay: datetime.timedelta = datetime.timedelta(minutes=10)
    max_attempts: int = 2
    release_delay: datetime.timedelta = datetime.timedelta(0)
    sentinel_loop_backoff: datetime.timedelta = datetime.timedelta(hours=1)
    force_reboot: bool = False
    ready_grace: datetime.timedelta = datetime.timedelta(minutes=10)
    """FleetLock: how long a rebooted node must be Ready before its cycle ends without a steady-state."""
    stuck_after: datetime.timedelta = datetime.timedelta(hours=1)
    """FleetLock: how long after the grant an unchanged bootID counts as a stuck finalization."""
    escalation: tuple[Escalation, ...] = ()
    """``--drain-escalation``, in order (empty: off, kured's behaviour)."""


# -- the rules ----------------------------------------------------------------------------------------------


def rebooted(node: NodeState) -> bool:
    """The node runs a boot other than the one its reboot was triggered (or granted) in."""
    return node.reboot_boot_id is not None and bool(node.boot_id) and node.boot_id != node.reboot_boot_id


def cordon_was_ours(node: NodeState) -> bool:
    """The node was schedulable before the cycle (pykured's record, else kured's lock entry says so)."""
    before = node.unschedulable_before
    if before is None:
        before = node.entry_unschedulable
    return before is False


def unschedulable_to_record(node: NodeState) -> bool | None:
    """What to record as "unschedulable before" when the cycle starts (``None``: already recorded)."""
    if node.unschedulable_before is not None:
        return None
    return node.entry_unschedulable if node.entry_unschedulable is not None else node.unschedulable


@dataclasses.dataclass(frozen=True, slots=True)
class LostLock:
    """What is left to do when a node's memory is on the Node but its slot is gone."""

    post_reboot: bool
    """The node rebooted and the reboot was not finished: finish it (uncordon if ours, labels, notify)."""
    settle_cordon: bool
    """The cycle ended before the reboot: uncordon if ours (else leave the cordon, and say so)."""
    uncordon: bool
    """The cordon is ours."""


def lost_lock(node: NodeState) -> LostLock:
    """The plan for a cycle whose slot is gone (expired and taken, freed by hand, a crash mid-way)."""
    unfinished = node.release_after is None
    return LostLock(
        post_reboot=unfinished and rebooted(node),
        settle_cordon=unfinished and not rebooted(node),
        uncordon=cordon_was_ours(node),
    )


def _stored_backoff(obs: Observation) -> datetime.datetime | None:
    """The back-off on the Node, if it holds this need: one written because the sentinel outlived a reboot
    does not hold a reboot request or a condition (neither can loop)."""
    stored = obs.node.backoff_until
    if stored is None:
        return None
    sentinel_only = obs.node.backoff_reason == Backoff.SENTINEL.value
    if sentinel_only and obs.driver is Driver.DAEMON and obs.trigger & (Trigger.REQUEST | Trigger.CONDITION):
        return None
    return stored


def _backoff(obs: Observation) -> datetime.datetime | None:
    stored = _stored_backoff(obs)
    if stored is None or obs.retry_at is None:
        return stored or obs.retry_at
    return max(stored, obs.retry_at)


def loop_guarded(obs: Observation) -> bool:
    """Does the loop guard apply to this need right after a completed reboot? Only to the sentinel (file or
    command, the Zincati marker path's included): a reboot request names the boot it wants left."""
    return obs.driver is Driver.DAEMON and obs.required is True and Trigger.SENTINEL in obs.trigger


def needs_blockers(obs: Observation, *, now: datetime.datetime) -> bool:
    """Whether :func:`decide` would look at blockers: the node is idle and a reboot is due."""
    backoff = _backoff(obs)
    return (
        not _foreign(obs)
        and not obs.node.holding
        and not obs.node.has_memory
        and obs.in_window
        and obs.required is True
        and not (backoff and now < backoff)
    )


def _foreign(obs: Observation) -> bool:
    """The other driver runs this node's cycle (FleetLock's mark for the daemon, a daemon's slot for
    FleetLock)."""
    if obs.driver is Driver.DAEMON:
        return obs.node.fleetlock_id is not None
    return obs.node.holding and obs.node.fleetlock_id is None


def gate_point(action: Action) -> str | None:
    """The gate phase the step decided without a gate verdict would pass first: ``before-drain`` for
    ``DRAIN_AND_REBOOT``, ``before-release`` for ``RELEASE`` (the driver evaluates it and decides again)."""
    if action.step is Step.DRAIN_AND_REBOOT:
        return "before-drain"
    if action.step is Step.RELEASE:
        return "before-release"
    return None


class DrainOutcome(enum.Enum):
    """What a finished drain means."""

    REBOOT = "reboot"
    REBOOT_ANYWAY = "reboot-anyway"
    """Cordon or drain failed and ``--force-reboot`` is set."""
    RELEASE = "release"
    """Cordon or drain failed: uncordon (if ours), release, no new cycle for one period (kured)."""
    QUARANTINE = "quarantine"
    """The drain timed out and ``--drain-escalation`` ends in ``quarantine``: leave the node cordoned, mark
    it quarantined, release; no reboot."""
    LOST = "lost"
    """The slot was lost while draining (freed by hand, expired and taken): no reboot; the next pass cleans
    up."""


def next_escalation(*, timed_out: bool, taken: int, policy: CyclePolicy) -> Escalation | None:
    """The escalation step after a drain (or after ``taken`` escalation steps) that ended; ``None``: none
    (the drain completed or failed for another reason than the timeout, or the list is used up)."""
    if not timed_out or taken >= len(policy.escalation):
        return None
    return policy.escalation[taken]


def drain_outcome(
    failure: str | None,
    *,
    holding: bool,
    policy: CyclePolicy,
    escalation: Escalation | None = None,
) -> DrainOutcome:
    """The decision after a drain (and its ``delete`` escalation steps), the same for every driver.
    ``escalation``: the step :func:`next_escalation` gave last (``None``: none is left)."""
    if not holding:
        return DrainOutcome.LOST
    if failure is None:
        return DrainOutcome.REBOOT
    if escalation is Escalation.QUARANTINE:
        return DrainOutcome.QUARANTINE
    if escalation is Escalation.FORCE or policy.force_reboot:
        return DrainOutcome.REBOOT_ANYWAY
    return DrainOutcome.RELEASE


def _retry_due(node: NodeState, policy: CyclePolicy) -> datetime.datetime:
    started = node.reboot_triggered_at or datetime.datetime.min.replace(tzinfo=datetime.UTC)
    return started + policy.reboot_retry_delay


def _remove_in_progress(obs: Observation, policy: CyclePolicy) -> bool:
    return policy.annotate_nodes and not obs.required and obs.node.in_progress


def _with_gate(obs: Observation, action: Action, now: datetime.datetime) -> Action:
    """Apply the evaluated gate to a ``DRAIN_AND_REBOOT`` or ``RELEASE``."""
    gate = obs.gate
    if gate is None or gate.verdict is Verdict.OPEN:
        return action
    if gate.verdict is Verdict.WAIT:
        return Action(Step.HOLD, str(gate.reason), gate=gate, until=gate.deadline)
    if action.step is Step.RELEASE:  # a stuck settle gate must not stop the fleet: release, with a warning
        return dataclasses.replace(action, gate=gate)
    # a before-reboot hook that never answers must not let the node reboot: end the cycle, retry later
    return Action(
        Step.ABORT,
        f"timed out waiting: {gate.reason}",
        uncordon=cordon_was_ours(obs.node),
        gate=gate,
        retry=True,
    )


def _release(obs: Observation, policy: CyclePolicy, now: datetime.datetime) -> Action:
    node = obs.node
    assert node.release_after is not None
    if now < node.release_after:
        return Action(
            Step.WAIT, "waiting for the lock release delay", until=node.release_after, hold=Hold.RELEASE_DELAY
        )
    loop = loop_guarded(obs)
    action = Action(
        Step.RELEASE, "lock release delay passed",
        backoff_until=now + policy.sentinel_loop_backoff if loop else None,
        backoff=Backoff.SENTINEL if loop else None,
    )  # fmt: skip
    return _with_gate(obs, action, now)


def _decide_granted(obs: Observation, policy: CyclePolicy, now: datetime.datetime) -> Action:
    """FleetLock: granted, and the node still runs the boot it was granted in."""
    node = obs.node
    if obs.required is True:
        return Action(Step.WAIT, "holds its reboot slot and is drained", hold=Hold.GRANTED)
    if obs.required is False:
        if not node.ready:
            # Rebooting, or back before its kubelet reported the new bootID: not "released without reboot".
            return Action(Step.WAIT, "not Ready; its new bootID is not known yet", hold=Hold.NOT_READY)
        return Action(
            Step.ABORT, "Zincati reported steady state without a reboot", uncordon=cordon_was_ours(node)
        )
    granted_at = node.reboot_triggered_at
    if granted_at is not None and now - granted_at >= policy.stuck_after:
        return Action(Step.ALERT_STUCK, "granted but the bootID has not changed", hold=Hold.GRANTED)
    return Action(Step.WAIT, "granted; Zincati reboots", hold=Hold.GRANTED)


def _post_reboot(obs: Observation, policy: CyclePolicy, now: datetime.datetime) -> Action:
    node = obs.node
    no_steady_state = False
    if obs.driver is Driver.FLEETLOCK and obs.required is None:
        since = node.ready_since
        if not (node.ready and since is not None and now - since >= policy.ready_grace):
            return Action(Step.WAIT, "rebooted; waiting for Zincati's steady-state", hold=Hold.REBOOTING)
        no_steady_state = True
    return Action(
        Step.POST_REBOOT, "node rebooted (bootID changed)", uncordon=cordon_was_ours(node),
        remove_in_progress=_remove_in_progress(obs, policy), release_after=now + policy.release_delay,
        no_steady_state=no_steady_state,
    )  # fmt: skip


def _drain(obs: Observation, policy: CyclePolicy, now: datetime.datetime) -> Action:
    node = obs.node
    record = unschedulable_to_record(node)
    action = Action(
        Step.DRAIN_AND_REBOOT, "Reboot required", unschedulable_before=record,
        uncordon=(record if record is not None else node.unschedulable_before) is False,
        reboot_if_drain_fails=policy.force_reboot,
    )  # fmt: skip
    return _with_gate(obs, action, now)


def _decide_holding(obs: Observation, policy: CyclePolicy, now: datetime.datetime) -> Action:
    node = obs.node
    ours = cordon_was_ours(node)
    fleetlock = obs.driver is Driver.FLEETLOCK
    if node.release_after is not None:
        return _release(obs, policy, now)
    if node.reboot_boot_id is not None:
        if rebooted(node):
            return _post_reboot(obs, policy, now)
        if fleetlock:
            return _decide_granted(obs, policy, now)
        due = _retry_due(node, policy)
        if now < due:
            return Action(Step.WAIT, "Waiting for reboot", until=due, hold=Hold.REBOOTING)
        if node.reboot_attempts < policy.max_attempts:
            return Action(Step.RETRY_REBOOT, f"bootID unchanged {policy.reboot_retry_delay} after the reboot")
        return Action(
            Step.GIVE_UP, f"bootID unchanged after {node.reboot_attempts} reboot attempts", uncordon=ours,
            backoff_until=now + policy.sentinel_loop_backoff, backoff=Backoff.NO_REBOOT,
        )  # fmt: skip
    if obs.draining:
        return Action(Step.WAIT, "draining", hold=Hold.DRAINING)
    if node.quarantined:
        return Action(Step.ABORT, "the node is quarantined (pykured unquarantine ends it)", uncordon=False)
    if fleetlock:
        # Drained but not granted: drain (again: idempotent) unless Zincati no longer wants the reboot.
        if obs.required is False:
            return Action(Step.ABORT, "Zincati reported steady state before the reboot", uncordon=ours)
        return _drain(obs, policy, now)
    if obs.required and obs.in_window:
        return _drain(obs, policy, now)
    why = "reboot no longer required" if not obs.required else "outside the maintenance window"
    return Action(Step.ABORT, why, uncordon=ours)


def _decide_lost(obs: Observation, policy: CyclePolicy, now: datetime.datetime) -> Action:
    """The cycle's memory is on the Node but its slot is gone."""
    node = obs.node
    if obs.draining:
        return Action(Step.WAIT, "draining", hold=Hold.DRAINING)
    waiting = node.reboot_boot_id is not None and not rebooted(node) and node.release_after is None
    if waiting and obs.driver is Driver.DAEMON:
        due = _retry_due(node, policy)
        if now < due:
            why = "Waiting for reboot (lock no longer held)"
            return Action(Step.WAIT, why, until=due, hold=Hold.REBOOTING)
    plan = lost_lock(node)
    return Action(
        Step.CLEANUP, "the lock is no longer held by this node", post_reboot=plan.post_reboot,
        settle_cordon=plan.settle_cordon, uncordon=plan.uncordon and not node.quarantined,
        remove_in_progress=_remove_in_progress(obs, policy),
    )  # fmt: skip


def decide(obs: Observation, *, policy: CyclePolicy, now: datetime.datetime) -> Action:
    """The next step of the reboot cycle, for every driver. Pure: everything it needs is passed in."""
    node = obs.node
    if _foreign(obs):
        if obs.driver is Driver.DAEMON:
            return Action(Step.WAIT, "FleetLock (Zincati) runs this node's reboot cycle", hold=Hold.FOREIGN)
        return Action(Step.WAIT, "holds a slot for its own sentinel-driven reboot cycle", hold=Hold.FOREIGN)
    if node.holding:
        return _decide_holding(obs, policy, now)
    if node.has_memory or node.fleetlock_id is not None:
        return _decide_lost(obs, policy, now)
    return _decide_idle(obs, policy, now)


def _backoff_reason(node: NodeState) -> str:
    """The back-off named by what it followed; one whose reason is not said (written by an earlier version,
    which did not record it) by neither."""
    if node.backoff_reason == Backoff.SENTINEL.value:
        return "backing off after a reboot that did not clear the sentinel"
    if node.backoff_reason == Backoff.NO_REBOOT.value:
        return "backing off after a reboot that never happened"
    return "backing off after the last reboot cycle"


def _decide_idle(obs: Observation, policy: CyclePolicy, now: datetime.datetime) -> Action:
    """No cycle runs on the node: wait, taint or untaint, annotate, blocked, or take the lock."""
    node = obs.node
    early = policy.taint and policy.taint_early
    if early and obs.required and not obs.has_taint:
        return Action(Step.TAINT, "Reboot required (PreferNoSchedule while it waits)")
    if not obs.in_window and obs.required is not None:
        if obs.has_taint and policy.taint and not (early and obs.required):
            return Action(Step.SYNC_TAINT, "outside the maintenance window")
        return Action(Step.WAIT, "outside the maintenance window", until=obs.next_window, hold=Hold.WINDOW)
    if not obs.required:
        # FleetLock's reconcile pass (Zincati said nothing) keeps an early taint: Zincati asked before.
        if obs.has_taint and policy.taint and not (early and obs.required is None):
            return Action(Step.SYNC_TAINT, "Reboot not required")
        return Action(Step.WAIT, "Reboot not required", hold=Hold.NOT_REQUIRED)
    backoff = _backoff(obs)
    if backoff and now < backoff:
        if backoff == obs.retry_at:
            return Action(Step.WAIT, "retrying after a failed drain", until=backoff, hold=Hold.DRAIN_RETRY)
        return Action(Step.WAIT, _backoff_reason(obs.node), until=backoff, hold=Hold.BACKOFF)
    if policy.annotate_nodes and not node.in_progress:
        return Action(Step.ANNOTATE, "Reboot required")
    if obs.blocked is not None:
        return Action(Step.BLOCKED, str(obs.blocked), blocked=obs.blocked)
    return Action(Step.ACQUIRE, "Reboot required")
