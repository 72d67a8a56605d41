"""Carrying out the decided step, the same for every driver: one method per
:class:`~pykured.cycle.decide.Step`.

Concept: the daemon (sentinel, reboot request, Zincati marker) and FleetLock (central and node-local) observe
in their own way, then both call :meth:`CycleRunner.decide` (:func:`~pykured.cycle.decide.decide`, with the
gate verdict it needs) and :meth:`CycleRunner.execute`. So every driver gets the same hands — lock, drain,
reboot or hand-off, notifications, Events — the same observers of the cycle's moments
(:mod:`pykured.cycle.observers`: the metrics, the PreferNoSchedule taint, reboot hooks and settle gates, …)
and the same
log lines, Events and metrics for the same step. What stays the driver's own is how it
waits (the daemon sleeps or watches the lock; FleetLock answers Zincati) and the little memory kured keeps in
the process (the retry time after a failed drain), which :class:`Outcome` hands back.

Invariants:
* The runner decides nothing: every choice comes in the :class:`~pykured.cycle.decide.Action`, or from
  :func:`~pykured.cycle.decide.drain_outcome` after a drain.
* Uncordon before release: a slot released first lets another node cordon while this one still is.
* A drain cancelled by a stop does nothing more: the cycle stays where it is, and the next pass (or a
  restarted agent) resumes it from the Node and the lock.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import logging
import threading
from collections.abc import Callable

from pykured.core import errors
from pykured.core.model import GateResult
from pykured.core.printable import bounded_names
from pykured.core.times import format_rfc3339
from pykured.cycle.decide import (
    Action,
    Backoff,
    CyclePolicy,
    DrainOutcome,
    Driver,
    Escalation,
    Observation,
    Step,
    decide,
    drain_outcome,
    gate_point,
    next_escalation,
)
from pykured.cycle.state import NodeState, unix_ns
from pykured.cycle.steps import Behaviour, DrainFailure, Hands, Steps
from pykured.lock.record import LockEntry
from pykured.policy.quarantine import QuarantineRecord

logger = logging.getLogger(__name__)

GATE_POLL = 5.0
"""How often a lock holder re-checks a hook or settle gate it waits for."""


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _reason(action: Action) -> str | None:
    """The back-off's reason as written on the Node (``None``: no back-off, or none said)."""
    return action.backoff.value if action.backoff is not None else None


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    """What a step did that its driver needs to know."""

    pause: float = 0.0
    """How long to wait before the next pass (seconds; the daemon sleeps it, FleetLock ignores it)."""
    acquired: bool | None = None
    """For ``ACQUIRE``: whether the slot was taken."""
    holders: str = ""
    """For ``ACQUIRE`` that failed: who holds the lock."""
    drain: DrainOutcome | None = None
    """For ``DRAIN_AND_REBOOT``: what the drain led to (``None``: not drained, e.g. cancelled or held)."""
    failure: str | None = None
    """The drain's failure, if any."""
    retry: bool = False
    """The cycle ended as after a failed drain: the driver starts no new one for a period (kured)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Texts:
    """What the driver's steps say (Events and log lines differ only in naming who reboots)."""

    drain_event: str
    reboot_event: str
    announce: str
    """``{node}`` and ``{boot_id}`` are filled in."""


DAEMON_TEXTS = Texts(
    drain_event="cordoning and draining the node before its reboot",
    reboot_event="triggering the reboot",
    announce="Triggering reboot for node {node}",
)
FLEETLOCK_TEXTS = Texts(
    drain_event="cordoning and draining the node for Zincati's reboot",
    reboot_event="drained; FleetLock granted Zincati's pre-reboot (Zincati reboots)",
    announce="FleetLock granted node {node} its reboot (bootID {boot_id})",
)

StepMethod = Callable[[Action, Observation, datetime.datetime], Outcome]


class CycleRunner:
    """The steps of one node's cycle, as every driver runs them."""

    def __init__(
        self,
        node: str,
        hands: Hands,
        behaviour: Behaviour,
        policy: CyclePolicy,
        *,
        driver: Driver = Driver.DAEMON,
        cancel: threading.Event,
        period_s: float = 3600.0,
        after_drain: Callable[[], contextlib.AbstractContextManager[object]] = contextlib.nullcontext,
        clock: Callable[[], datetime.datetime] = _utcnow,
    ) -> None:
        self.node = node
        self.hands = hands
        self.policy = policy
        self.driver = driver
        self.period_s = period_s
        self.texts = DAEMON_TEXTS if driver is Driver.DAEMON else FLEETLOCK_TEXTS
        self.steps = Steps(node, hands, behaviour, cancel=cancel)
        self._after_drain = after_drain
        self._clock = clock
        self._last_gate = ""
        self._dispatch: dict[Step, StepMethod] = {
            Step.WAIT: self._wait,
            Step.SYNC_TAINT: self._sync_taint,
            Step.TAINT: self._taint,
            Step.ANNOTATE: self._annotate,
            Step.BLOCKED: self._blocked,
            Step.ACQUIRE: self._acquire,
            Step.DRAIN_AND_REBOOT: self._drain_and_reboot,
            Step.RETRY_REBOOT: self._retry_reboot,
            Step.GIVE_UP: self._give_up,
            Step.POST_REBOOT: self._post_reboot,
            Step.RELEASE: self._release,
            Step.ABORT: self._abort,
            Step.CLEANUP: self._cleanup,
            Step.HOLD: self._hold,
            Step.ALERT_STUCK: self._alert_stuck,
        }

    # -- deciding ------------------------------------------------------------------------------------------

    def decide(self, obs: Observation, now: datetime.datetime) -> tuple[Action, Observation]:
        """:func:`~pykured.cycle.decide.decide`, with the verdict of the gate the step would pass first (the
        observers' answer at that point, when one has something to say)."""
        action = decide(obs, policy=self.policy, now=now)
        point = gate_point(action)
        if point is None or obs.gate is not None:
            return action, obs
        gate = self.hands.observers.hold(self.node, point, now)
        if gate is None:
            return action, obs
        obs = dataclasses.replace(obs, gate=gate)
        return decide(obs, policy=self.policy, now=now), obs

    # -- execution -----------------------------------------------------------------------------------------

    def execute(
        self, action: Action, obs: Observation, now: datetime.datetime, *, mark: str | None = None
    ) -> Outcome:
        """Carry out one step. ``mark``: FleetLock's Zincati id, set on the Node before the lock is taken."""
        if action.step not in (Step.BLOCKED, Step.WAIT, Step.HOLD):
            self.hands.observers.blocked(self.node, None)
        if action.step is Step.ACQUIRE:
            return self._acquire(action, obs, now, mark=mark)
        return self._dispatch[action.step](action, obs, now)

    def _wait(self, action: Action, obs: Observation, now: datetime.datetime) -> Outcome:
        pause = self.period_s
        if action.until is not None:
            pause = min(pause, max((action.until - now).total_seconds(), 0.05))
        return Outcome(pause=pause)

    def _sync_taint(self, action: Action, obs: Observation, now: datetime.datetime) -> Outcome:
        self.hands.observers.not_waiting(self.node)
        return Outcome()

    def _taint(self, action: Action, obs: Observation, now: datetime.datetime) -> Outcome:
        self.hands.observers.waiting(self.node)
        return Outcome()

    def _annotate(self, action: Action, obs: Observation, now: datetime.datetime) -> Outcome:
        self.steps.annotate(now)
        return Outcome()

    def _blocked(self, action: Action, obs: Observation, now: datetime.datetime) -> Outcome:
        logger.info("Reboot blocked: %s", action.reason)
        self.hands.observers.blocked(self.node, action.blocked.kind if action.blocked else "unknown")
        self.hands.events.record("RebootBlocked", f"Reboot blocked: {action.reason}", warning=True)
        return Outcome(pause=self.period_s)

    def _acquire(
        self, action: Action, obs: Observation, now: datetime.datetime, *, mark: str | None = None
    ) -> Outcome:
        if mark is not None:
            self.hands.book.mark(mark)
        unschedulable = obs.node.unschedulable
        result = self.hands.lock.acquire(unschedulable=unschedulable, now_ns=unix_ns(now), node_id=self.node)
        self.hands.observers.lock_tried(
            self.node, self.hands.lock.backend, acquired=result.acquired, holders=len(result.holders)
        )
        if not result.acquired:
            if mark is not None:
                self.hands.book.mark(None)
            logger.warning("Lock already held: %s", result.holder_names)
            self.hands.observers.waiting(self.node)
            return Outcome(acquired=False, holders=result.holder_names or "?")
        logger.info("Acquired reboot lock for node %s (%s)", self.node, self.hands.lock.backend)
        self.steps.begin(obs.node, unschedulable_before=obs.node.unschedulable)
        self.hands.events.record("LockAcquired", f"acquired the reboot lock ({self.hands.lock.backend})")
        self.hands.observers.slot_taken(self.node)
        return Outcome(acquired=True)

    def _drain_and_reboot(self, action: Action, obs: Observation, now: datetime.datetime) -> Outcome:
        if action.unschedulable_before is not None:
            self.steps.begin(obs.node, unschedulable_before=action.unschedulable_before)
        if obs.gate is not None:
            self._gate_passed()
        self.hands.observers.drain_starting(self.node)  # also when a restarted agent resumes the cycle
        failed = self.steps.drain(event=self.texts.drain_event)
        taken = 0
        escalation = self._next_escalation(failed, taken)
        while escalation is Escalation.DELETE and failed is not None and not self.steps.cancel.is_set():
            failed = self.steps.delete_remaining(failed)
            taken += 1
            escalation = self._next_escalation(failed, taken)
        failure = failed.text if failed is not None else None
        if self.steps.cancel.is_set():
            logger.info("Stopped while draining node %s: the next pass resumes the cycle", self.node)
            return Outcome(failure=failure)
        self.hands.observers.drained(self.node, failure)
        with self._after_drain():
            view = self.hands.book.view(self._holding(now))
            outcome = drain_outcome(failure, holding=view.holding, policy=self.policy, escalation=escalation)
            if outcome is DrainOutcome.LOST:
                logger.warning("Node %s lost its reboot slot while draining", self.node)
                return Outcome(drain=outcome, failure=failure)
            if outcome is DrainOutcome.RELEASE:
                assert failure is not None
                self._drain_failed(failure, view, ours=action.uncordon)
                return Outcome(drain=outcome, failure=failure, retry=True, pause=self.period_s)
            if outcome is DrainOutcome.QUARANTINE:
                assert failed is not None
                self._quarantine(failed, view, ours=action.uncordon, now=self._clock())
                return Outcome(drain=outcome, failure=failure, pause=self.period_s)
            if failed is not None and escalation is Escalation.FORCE:
                logger.warning(
                    "Drain escalation (force) on node %s: the drain did not finish in time; rebooting anyway "
                    "over %d pods still there: %s",
                    self.node,
                    len(failed.pods),
                    bounded_names(failed.pods),
                )
                self.hands.events.record(
                    "DrainEscalated",
                    f"drain timed out: rebooting anyway over {len(failed.pods)} pods still there",
                    warning=True,
                )
            elif failure is not None:
                logger.warning(
                    "Unable to cordon or drain %s: %s; rebooting anyway (--force-reboot)", self.node, failure
                )
            self.steps.pause_before_reboot()
            self._reboot(self.hands.book.view(), self._clock())
            return Outcome(drain=outcome, failure=failure)

    def _next_escalation(self, failed: DrainFailure | None, taken: int) -> Escalation | None:
        timed_out = failed is not None and failed.timed_out
        return next_escalation(timed_out=timed_out, taken=taken, policy=self.policy)

    def _quarantine(
        self, failed: DrainFailure, node: NodeState, *, ours: bool, now: datetime.datetime
    ) -> None:
        """``--drain-escalation=…,quarantine``: one log line naming the pods, then the quarantine step."""
        steps = ",".join(e.value for e in self.policy.escalation)
        reason = f"the drain did not finish in time (--drain-escalation={steps})"
        record = QuarantineRecord.make(reason=reason, at=now, pods=failed.pods, cordoned=ours)
        logger.error(
            "Drain escalation (quarantine) on node %s: %s; leaving it cordoned and not rebooted, releasing "
            "the lock (pykured unquarantine %s ends it); %d pods would not leave: %s",
            self.node,
            reason,
            self.node,
            len(failed.pods),
            bounded_names(failed.pods),
        )
        self.steps.quarantine(node, record, message=record.describe())

    def _holding(self, now: datetime.datetime) -> LockEntry | None:
        return self.hands.lock.holding(now_ns=unix_ns(now), honour_ttl=False, node_id=self.node)

    def _drain_failed(self, failure: str, view: NodeState, *, ours: bool) -> None:
        logger.error(
            "Unable to cordon or drain %s: %s, will release lock and retry cordon and drain "
            "before rebooting when lock is next acquired",
            self.node,
            failure,
        )
        self.hands.events.record("DrainFailed", failure, warning=True)
        logger.info("Performing a best-effort uncordon after failed cordon and drain")
        self.steps.end(view, ours=ours, backoff_until=None)

    def _retry_reboot(self, action: Action, obs: Observation, now: datetime.datetime) -> Outcome:
        logger.warning(
            "Node %s did not reboot (bootID unchanged since %s): triggering the reboot once more",
            self.node,
            format_rfc3339(obs.node.reboot_triggered_at or now),
        )
        self.hands.events.record(
            "RebootRetry", "bootID unchanged after the reboot: retrying once", warning=True
        )
        self._reboot(obs.node, now)
        return Outcome()

    def _reboot(self, node: NodeState, now: datetime.datetime) -> None:
        announce = self.texts.announce.format(node=self.node, boot_id=node.boot_id)
        attempts = node.reboot_attempts + 1
        event = self.texts.reboot_event
        triggered = self.steps.reboot(node, now, attempts=attempts, event=event, announce=announce)
        if triggered and self.driver is Driver.DAEMON:
            logger.info("Waiting for reboot")

    def _give_up(self, action: Action, obs: Observation, now: datetime.datetime) -> Outcome:
        logger.error(
            "Node %s did not reboot after %d attempts: giving up this cycle, backing off for %ss",
            self.node,
            obs.node.reboot_attempts,
            int(self.policy.sentinel_loop_backoff.total_seconds()),
        )
        self.hands.events.record("RebootLoopBackoff", action.reason, warning=True)
        self.hands.observers.reboot_outcome(self.node, "failed")
        self.steps.end(
            obs.node, ours=action.uncordon, backoff_until=action.backoff_until, backoff_reason=_reason(action)
        )
        return Outcome()

    def _post_reboot(self, action: Action, obs: Observation, now: datetime.datetime) -> Outcome:
        if action.no_steady_state:
            logger.warning(
                "Node %s rebooted and is Ready, but Zincati sent no steady-state: releasing", self.node
            )
            self.hands.events.record(
                "FleetLockNoSteadyState", "rebooted and Ready without a steady-state call", warning=True
            )
        self.finish(action, obs)
        self.hands.book.update_state(release_after=action.release_after or now)
        return Outcome()

    def finish(self, action: Action, obs: Observation) -> None:
        """The node is back: uncordon if ours, labels, untaint, notify (the post-reboot work)."""
        node = obs.node
        logger.info("Node %s rebooted (bootID %s -> %s)", self.node, node.reboot_boot_id, node.boot_id)
        self.hands.observers.reboot_outcome(self.node, "completed")
        self.steps.finish(obs.node, uncordon=action.uncordon, remove_in_progress=action.remove_in_progress)

    def count_holders(self, now: datetime.datetime) -> None:
        """``pykured_lock_holders`` as the lock is now, read after the agent released its slot (a waiter's
        passes count the holders as they try); a failed read leaves the gauge as it was."""
        try:
            holders = self.hands.lock.holders(now_ns=unix_ns(now))
        except errors.PykuredError as exc:
            logger.debug("Counting the lock's holders failed: %s", exc)
            return
        self.hands.observers.lock_counted(self.node, self.hands.lock.backend, len(holders))

    def _release(self, action: Action, obs: Observation, now: datetime.datetime) -> Outcome:
        if action.gate is not None:
            self._gate_timed_out(action.gate, releasing=True)
        if obs.gate is not None:
            self._gate_passed()
        if self.steps.release(event="released the reboot lock"):
            self.count_holders(now)
        if action.backoff_until is not None and action.backoff is Backoff.SENTINEL:
            logger.warning(
                "Reboot sentinel still present after a completed reboot: not rebooting again "
                "before %s (kured #976)",
                format_rfc3339(action.backoff_until),
            )
            self.hands.events.record("RebootLoopBackoff", "sentinel still present after reboot", warning=True)
        self.steps.forget(obs.node, backoff_until=action.backoff_until, backoff_reason=_reason(action))
        return Outcome()

    def _abort(self, action: Action, obs: Observation, now: datetime.datetime) -> Outcome:
        if action.gate is not None:
            self._gate_passed()
            self._gate_timed_out(action.gate, releasing=False)
        else:
            logger.info("Releasing the lock without rebooting: %s", action.reason)
        if obs.node.reboot_boot_id is not None:  # granted, and Zincati reported no reboot
            logger.warning("Released the slot of node %s without a reboot (bootID unchanged)", self.node)
            self.hands.events.record("LockReleased", action.reason, warning=True)
        self.steps.end(obs.node, ours=action.uncordon, backoff_until=None)
        return Outcome(retry=action.retry, pause=self.period_s if action.retry else 0.0)

    def _cleanup(self, action: Action, obs: Observation, now: datetime.datetime) -> Outcome:
        logger.info("Node %s no longer holds its reboot slot: cleaning up", self.node)
        if action.post_reboot:
            self.finish(action, obs)
        elif action.settle_cordon:
            self.steps.uncordon(obs.node, ours=action.uncordon)
        self.steps.forget(obs.node, backoff_until=None)
        return Outcome()

    def _alert_stuck(self, action: Action, obs: Observation, now: datetime.datetime) -> Outcome:
        logger.warning(
            "Node %s was granted its reboot at %s and has not rebooted: finalization stuck?",
            self.node,
            format_rfc3339(obs.node.reboot_triggered_at or now),
        )
        self.hands.events.record("FleetLockStuck", action.reason, warning=True)
        return Outcome(pause=self.period_s)

    # -- holds: an observer's gate (reboot hooks, settle gates) ----------------------------------------------

    def _hold(self, action: Action, obs: Observation, now: datetime.datetime) -> Outcome:
        """Keep the lock while an observer's gate is closed; log each new reason once. A phase that has not
        begun is begun here (e.g. the hooks asked, the settle start stamped), then looked at at once."""
        gate = action.gate
        if gate is not None and gate.start:
            self.hands.observers.begin(self.node, gate.start, now)
            return Outcome(pause=0.0)
        reason = str(gate.reason) if gate else action.reason
        deadline = gate.deadline if gate else None
        if reason != self._last_gate:
            until = f" (until {format_rfc3339(deadline)})" if deadline else ""
            logger.info("Holding the reboot lock: %s%s", reason, until)
            self.hands.events.record("HoldingLock", reason)
            self._last_gate = reason
        self.hands.observers.holding(self.node, gate.reason.kind if gate and gate.reason else "unknown")
        pause = GATE_POLL if deadline is None else (deadline - now).total_seconds()
        return Outcome(pause=max(min(GATE_POLL, self.period_s, pause), 0.05))

    def _gate_passed(self) -> None:
        self._last_gate = ""
        self.hands.observers.holding(self.node, None)

    def _gate_timed_out(self, gate: GateResult, *, releasing: bool) -> None:
        kind = gate.reason.kind if gate.reason else ""
        event = "RebootHookTimeout" if kind.endswith("-reboot-hooks") else "SettleTimeout"
        what = "releasing the lock anyway" if releasing else "not rebooting, releasing the lock"
        logger.warning("Timed out waiting: %s; %s", gate.reason, what)
        self.hands.events.record(event, f"timed out: {gate.reason}; {what}", warning=True)
