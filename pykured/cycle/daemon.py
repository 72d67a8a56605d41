"""The reconcile loop: observe, :func:`~pykured.cycle.policy.decide`, execute one idempotent step, repeat.

Mirrors kured's ``rebootAsRequired`` (``cmd/kured/main.go``) but level-triggered: each pass re-reads the
Node, the lock and the sentinel, so a pod restart at any step resumes where the cluster's state says it is.
A pass starts when the sentinel changes (inotify), when the lock changes (a Lease watch), when a wait ends,
or every ``--period`` as a safety net. Nothing here exits the process: API outages, notification failures
and reboot failures are logged and retried; none of them may reboot a node or leave one cordoned that
pykured did not cordon.

:meth:`Daemon.execute` dispatches one small method per :class:`~pykured.cycle.policy.Step`; each carries out
the decisions in the :class:`~pykured.cycle.policy.Action` through :class:`~pykured.cycle.steps.Steps`
(shared with FleetLock) and decides nothing itself. The only memory kept in the process is kured's: the
retry time after a failed drain, and the last decision logged.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import threading
from collections.abc import Callable, Sequence

from pykured import __version__, errors
from pykured.blockers import Blocker, first_block
from pykured.cycle.book import NodeBook
from pykured.cycle.policy import Action, Observation, Policy, Step, decide, needs_blockers
from pykured.cycle.requests import RequestKeeper
from pykured.cycle.requestwatch import RequestWatch
from pykured.cycle.state import NodeState, unix_ns
from pykured.cycle.steps import Behaviour, Hands, Steps
from pykured.cycle.turns import RollTurns
from pykured.drain import Drainer
from pykured.events import EventRecorder
from pykured.gates.cycle import CycleGates
from pykured.gates.phase import GateResult, Verdict
from pykured.kube import Kube
from pykured.lock.base import Lock
from pykured.lock.queue import RollQueue
from pykured.metrics import Metrics, NullMetrics
from pykured.nodeinfo import format_rfc3339
from pykured.notify import Notifier
from pykured.policy.maintenance import Window
from pykured.reboot import Rebooter
from pykured.sentinel import Sentinel
from pykured.taints import PreferNoScheduleTaint

logger = logging.getLogger(__name__)

METRIC_REFRESH = 60.0
ERROR_BACKOFF = 5.0
GATE_POLL = 5.0
"""How often a lock holder re-checks a hook or settle gate it waits for."""
LOCK_WAIT_MAX = 60.0
"""The longest single wait for the lock to change before the next pass looks again."""


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    """The daemon's configuration (from :class:`pykured.config.Config`)."""

    node: str
    period: float = 3600.0
    behaviour: Behaviour = dataclasses.field(default_factory=Behaviour)
    policy: Policy = dataclasses.field(default_factory=Policy)


@dataclasses.dataclass
class Parts:
    """The adapters the loop drives."""

    kube: Kube
    lock: Lock
    book: NodeBook
    drainer: Drainer
    rebooter: Rebooter
    sentinel: Sentinel
    window: Window
    notifier: Notifier
    events: EventRecorder
    metrics: Metrics = dataclasses.field(default_factory=NullMetrics)
    taint: PreferNoScheduleTaint | None = None
    blockers: Sequence[Blocker] = ()
    gates: CycleGates | None = None
    """Reboot hooks and settle gates (:mod:`pykured.gates.cycle`); None or empty = kured's cycle."""
    queue: RollQueue | None = None
    """The lock queue of ``--resume-rolls`` (:mod:`pykured.lock.queue`); None = kured's race for the lock."""
    freeze_state: Callable[[], str] = lambda: "off"
    """Whether the agent honours the freeze, as published in its status (``on``, ``forbidden``, ``off``…)."""
    policy_where: str = ""
    """The policy ConfigMap watched, ``namespace/name`` ("" when none), published with ``freeze_state``."""


StepMethod = Callable[[Action, Observation, datetime.datetime], float]


class Daemon:
    """One node's agent."""

    def __init__(
        self,
        parts: Parts,
        settings: Settings,
        *,
        clock: Callable[[], datetime.datetime] = _utcnow,
        stopping: threading.Event | None = None,
        wake: threading.Event | None = None,
    ) -> None:
        self.p = parts
        self.s = settings
        self._clock = clock
        self.wake = wake or threading.Event()
        """Set to start a pass now: by the sentinel's change callback, the end of a lock wait, or a stop."""
        self.stopping = stopping or threading.Event()
        """Set by :meth:`stop`; also the drainer's cancel event, so a stop interrupts a blocked drain."""
        self.steps = Steps(
            settings.node,
            Hands(
                book=parts.book, drainer=parts.drainer, lock=parts.lock, rebooter=parts.rebooter,
                notifier=parts.notifier, events=parts.events, metrics=parts.metrics, taint=parts.taint,
                gates=parts.gates,
            ),
            settings.behaviour,
            cancel=self.stopping,
        )  # fmt: skip
        self._last_reason = ""
        self._last_gate = ""
        self.last_action: Action | None = None
        """The decision of the latest pass (for logs and tests)."""
        self._retry_at: datetime.datetime | None = None
        self._lock_waiter: threading.Thread | None = None
        self.passes = 0
        self.requests = RequestKeeper(
            parts.kube,
            node=settings.node,
            version=__version__,
            events=parts.events,
            notifier=parts.notifier,
            metrics=parts.metrics,
        )
        """Reboot requests bound to a boot, and the status published on the Node (cycle.requests)."""
        self._turns = RollTurns(parts.queue, parts.lock, settings.node) if parts.queue else None
        """``--resume-rolls``: the node's turn in the roll (cycle.turns)."""
        self._sentinel = False
        self._waiting_for_lock = False
        self._held_since_ns: int | None = None
        """When this node's lock entry was written (the cycle's start), while it holds one."""
        self._last_cycle_s: int | None = None
        self._dispatch: dict[Step, StepMethod] = {
            Step.WAIT: self._wait,
            Step.SYNC_TAINT: self._sync_taint,
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
        }

    # -- the loop ----------------------------------------------------------------------------------------

    def run(self) -> None:
        """Reconcile until :meth:`stop`."""
        metric_thread = threading.Thread(target=self._metric_loop, name="reboot-required-metric", daemon=True)
        metric_thread.start()
        watch = RequestWatch(
            self.p.kube,
            self.requests,
            on_request=self.wake.set,
            clock=self._clock,
            poll_seconds=self.s.period,
        )
        threading.Thread(
            target=watch.run, args=(self.stopping,), name="reboot-request-watch", daemon=True
        ).start()
        try:
            self.p.sentinel.start()
        except errors.PykuredError as exc:
            logger.warning("sentinel watch unavailable, checking every period instead: %s", exc)
        try:
            while not self.stopping.is_set():
                pause = self.run_once()
                if pause > 0 and not self.stopping.is_set():
                    self.wake.wait(pause)
                    self.wake.clear()
        finally:
            self.p.sentinel.stop()

    def stop(self) -> None:
        """Ask the loop to end after the current step (a wait for the lock or a delay ends at once)."""
        self.stopping.set()
        self.wake.set()

    def notify_change(self) -> None:
        """Start a pass now (the sentinel's change callback)."""
        self.wake.set()

    def _metric_loop(self) -> None:
        """kured refreshes ``kured_reboot_required`` every minute, whatever the loop is doing."""
        while not self.stopping.wait(METRIC_REFRESH):
            self._refresh_metric()

    def _refresh_metric(self) -> bool:
        """Check the sentinel; ``kured_reboot_required`` is 1 for the sentinel or a pending request."""
        required = self._required()
        self.p.metrics.set_reboot_required(self.s.node, required or self.requests.pending is not None)
        return required

    def _required(self) -> bool:
        try:
            return self.p.sentinel.required()
        except errors.PykuredError as exc:
            logger.error("Error checking the reboot sentinel: %s", exc)
            return False

    def run_once(self) -> float:
        """One pass: observe, decide, execute. Returns how long to wait before the next pass (seconds)."""
        self.passes += 1
        now = self._clock()
        try:
            obs = self.observe(now)
        except errors.PykuredError as exc:
            logger.warning("Cannot observe node %s, will retry: %s", self.s.node, exc)
            return ERROR_BACKOFF
        action = decide(obs, policy=self.s.policy, now=now)
        self.last_action = action
        self._log_decision(action)
        try:
            pause = self.execute(action, obs, now)
        except errors.PykuredError as exc:
            logger.error("Step %s failed for node %s, will retry: %s", action.step.value, self.s.node, exc)
            pause = ERROR_BACKOFF
        if self._turns is not None and action.step is not Step.ACQUIRE:  # ACQUIRE renews or clears it itself
            self._turns.after_pass(obs.node, required=obs.required, in_window=obs.in_window, now=now)
        self._publish_status(obs, action, now)
        return pause

    def _publish_status(self, obs: Observation, action: Action, now: datetime.datetime) -> None:
        """Publish ``pykured.dev/status`` for ``pykured status``, only when it changed."""
        self.requests.publish(
            obs.node,
            step=action.step.value,
            reason=action.reason,
            sentinel=self._sentinel,
            blocked=action.blocked.kind if action.blocked else "",
            blocked_by=action.blocked.message if action.blocked else "",
            window_opens=None if obs.in_window else obs.next_window,
            lock_wait=self._waiting_for_lock and action.step is Step.ACQUIRE,
            resume_rolls=self._turns is not None,
            freeze=self.p.freeze_state(),
            policy=self.p.policy_where,
            last_cycle_s=self._last_cycle_s,
            now=now,
        )

    def _log_decision(self, action: Action) -> None:
        key = f"{action.step.value}:{action.reason}"
        if key != self._last_reason:
            if action.step is Step.WAIT and action.reason in ("Reboot not required", "Waiting for reboot"):
                logger.info(action.reason)
            elif action.step not in (Step.BLOCKED, Step.ACQUIRE, Step.DRAIN_AND_REBOOT):
                level = logging.DEBUG if action.step is Step.WAIT else logging.INFO
                logger.log(level, "%s: %s", action.step.value, action.reason)
        self._last_reason = key

    # -- observation -------------------------------------------------------------------------------------

    def observe(self, now: datetime.datetime) -> Observation:
        """Read the sentinel, the window, the Node and the lock (and the blockers when they matter)."""
        required = self._sentinel = self._refresh_metric()
        entry = self.p.lock.holding(now_ns=unix_ns(now), honour_ttl=False)
        self._held_since_ns = entry.created_ns if entry is not None else None
        node = self.p.book.view(entry)
        request = self.requests.observe(node, now, in_cycle=node.reboot_boot_id is not None)
        if request.pending:  # a reboot request for the current boot counts as the sentinel does
            required = True
            self.p.metrics.set_reboot_required(self.s.node, True)
        in_window = self.p.window.contains(now)
        obs = Observation(
            required=required,
            in_window=in_window,
            node=node,
            next_window=None if in_window else self.p.window.next_open(now),
            has_taint=self.p.taint is not None and node.has_taint(self.p.taint.key, "PreferNoSchedule"),
            retry_at=self._retry_at,
        )
        if needs_blockers(obs, now=now):
            obs = dataclasses.replace(obs, blocked=first_block(self.p.blockers, now=now))
        return obs

    # -- execution: one method per step, each acting on the action's decisions ---------------------------

    def execute(self, action: Action, obs: Observation, now: datetime.datetime) -> float:
        """Carry out one step; returns the pause before the next pass."""
        if action.step not in (Step.BLOCKED, Step.WAIT):
            self.p.metrics.set_blocked(None)
        return self._dispatch[action.step](action, obs, now)

    def _wait(self, action: Action, obs: Observation, now: datetime.datetime) -> float:
        pause = self.s.period
        if action.until is not None:
            pause = min(pause, max((action.until - now).total_seconds(), 0.05))
        return pause

    def _sync_taint(self, action: Action, obs: Observation, now: datetime.datetime) -> float:
        if self.p.taint:
            self.p.taint.disable()
        return 0

    def _annotate(self, action: Action, obs: Observation, now: datetime.datetime) -> float:
        self.steps.annotate(now)
        return 0

    def _blocked(self, action: Action, obs: Observation, now: datetime.datetime) -> float:
        logger.info("Reboot blocked: %s", action.reason)
        self.p.metrics.set_blocked(action.blocked.kind if action.blocked else "unknown")
        self.p.events.record("RebootBlocked", f"Reboot blocked: {action.reason}", warning=True)
        return self.s.period

    def _acquire(self, action: Action, obs: Observation, now: datetime.datetime) -> float:
        if not self.p.window.contains(self._clock()):
            # The pass saw the window open, but observing took long enough (a slow API server) for it to
            # close: take no slot outside the window; the next pass waits for it to open again.
            logger.info("Not taking the lock: the maintenance window closed during this pass")
            return 0
        logger.info("Reboot required")
        if self._turns is not None:
            turn = self._turns.take(obs.node, now)
            if not turn.go:
                self.p.metrics.lock_waiting(True)
                self.p.metrics.set_blocked("lock")
                self._waiting_for_lock = True
                return self._wait_for_lock(turn.wait_s)
        result = self.p.lock.acquire(unschedulable=obs.node.unschedulable, now_ns=unix_ns(now))
        self.p.metrics.lock_waiting(not result.acquired)
        self.p.metrics.lock_holders(self.p.lock.backend, len(result.holders))
        self._waiting_for_lock = not result.acquired
        if not result.acquired:
            logger.warning("Lock already held: %s", result.holder_names)
            self.p.metrics.set_blocked("lock")
            if self.p.taint:
                self.p.taint.enable()
            return self._wait_for_lock()
        logger.info("Acquired reboot lock for node %s (%s)", self.s.node, self.p.lock.backend)
        if self._turns is not None:
            self._turns.taken()
        self.steps.begin(unschedulable_before=obs.node.unschedulable)
        self.p.events.record("LockAcquired", f"acquired the reboot lock ({self.p.lock.backend})")
        return 0

    def _wait_for_lock(self, at_most: float = LOCK_WAIT_MAX) -> float:
        """Wait for the lock to change in the background; its end (or :meth:`stop`) wakes the loop."""
        timeout = min(self.s.period, LOCK_WAIT_MAX, at_most)
        if self._lock_waiter is None or not self._lock_waiter.is_alive():
            self._lock_waiter = threading.Thread(
                target=self._lock_wait, args=(timeout,), name="lock-wait", daemon=True
            )
            self._lock_waiter.start()
        return timeout

    def _lock_wait(self, timeout: float) -> None:
        try:
            self.p.lock.wait_for_change(timeout)
        except Exception as exc:  # a wait never ends the agent: the next pass looks again
            logger.debug("waiting for the lock failed: %s", exc)
        finally:
            self.wake.set()

    def _drain_and_reboot(self, action: Action, obs: Observation, now: datetime.datetime) -> float:
        if action.unschedulable_before is not None:
            self.steps.begin(unschedulable_before=action.unschedulable_before)
        if self.p.gates:
            gate = self.p.gates.before_drain(now)
            if gate.verdict is Verdict.WAIT:
                return self._hold_for(gate, now)
            self._gate_passed()
            if gate.verdict is Verdict.TIMED_OUT:
                self._gate_timed_out(gate, releasing=False)
                self.steps.release()
                self.steps.forget(backoff_until=None)
                self._retry_at = self._clock() + datetime.timedelta(seconds=self.s.period)
                return self.s.period
            self.p.gates.note_drain()
        failure = self.steps.drain(event="cordoning and draining the node before its reboot")
        if failure is not None and not action.reboot_if_drain_fails:
            logger.error(
                "Unable to cordon or drain %s: %s, will release lock and retry cordon and drain "
                "before rebooting when lock is next acquired",
                self.s.node,
                failure,
            )
            self.p.events.record("DrainFailed", failure, warning=True)
            self._retry_at = self._clock() + datetime.timedelta(seconds=self.s.period)
            # Uncordon before releasing: a slot released first lets another node cordon while this one
            # still is (found by the soak: three nodes cordoned at --concurrency=2).
            logger.info("Performing a best-effort uncordon after failed cordon and drain")
            self.steps.uncordon(self.p.book.view(), ours=action.uncordon)
            self.steps.release()
            self.steps.forget(backoff_until=None)
            return self.s.period
        if failure is not None:
            logger.warning(
                "Unable to cordon or drain %s: %s; rebooting anyway (--force-reboot)", self.s.node, failure
            )
        self.steps.pause_before_reboot()
        self._reboot(self.p.book.view(), self._clock())
        return 0

    def _retry_reboot(self, action: Action, obs: Observation, now: datetime.datetime) -> float:
        logger.warning(
            "Node %s did not reboot (bootID unchanged since %s): triggering the reboot once more",
            self.s.node,
            format_rfc3339(obs.node.reboot_triggered_at or now),
        )
        self.p.events.record("RebootRetry", "bootID unchanged after the reboot: retrying once", warning=True)
        self._reboot(obs.node, now)
        return 0

    def _reboot(self, node: NodeState, now: datetime.datetime) -> None:
        announce = f"Triggering reboot for node {self.s.node}"
        attempts = node.reboot_attempts + 1
        if self.steps.reboot(node, now, attempts=attempts, event="triggering the reboot", announce=announce):
            logger.info("Waiting for reboot")

    def _give_up(self, action: Action, obs: Observation, now: datetime.datetime) -> float:
        logger.error(
            "Node %s did not reboot after %d attempts: giving up this cycle, backing off for %ss",
            self.s.node,
            obs.node.reboot_attempts,
            int(self.s.policy.sentinel_loop_backoff.total_seconds()),
        )
        self.p.events.record("RebootLoopBackoff", action.reason, warning=True)
        self.p.metrics.reboot("failed")
        self.steps.end(obs.node, ours=action.uncordon, backoff_until=action.backoff_until)
        return 0

    def _post_reboot(self, action: Action, obs: Observation, now: datetime.datetime) -> float:
        self._finish(action, obs)
        self.p.book.update_state(release_after=action.release_after or now)
        return 0

    def _finish(self, action: Action, obs: Observation) -> None:
        logger.info("Node %s rebooted (bootID %s)", self.s.node, obs.node.boot_id)
        self.p.metrics.reboot("completed")
        self.steps.finish(obs.node, uncordon=action.uncordon, remove_in_progress=action.remove_in_progress)
        self.requests.settle(obs.node, self._clock())  # the reboot satisfied a request for the old boot

    def _release(self, action: Action, obs: Observation, now: datetime.datetime) -> float:
        if self.p.gates:
            gate = self.p.gates.before_release(now)
            if gate.verdict is Verdict.WAIT:
                return self._hold_for(gate, now)
            if gate.verdict is Verdict.TIMED_OUT:
                self._gate_timed_out(gate, releasing=True)
            self._gate_passed()
        self.steps.release()
        if self._held_since_ns is not None and unix_ns(now) > self._held_since_ns:
            held = (unix_ns(now) - self._held_since_ns) // 1_000_000_000
            self._last_cycle_s = held if held < 7 * 24 * 3600 else None  # kured's entries carry no real time
        if action.backoff_until is not None:
            logger.warning(
                "Reboot sentinel still present after a completed reboot: not rebooting again "
                "before %s (kured #976)",
                format_rfc3339(action.backoff_until),
            )
            self.p.events.record("RebootLoopBackoff", "sentinel still present after reboot", warning=True)
        self.steps.forget(backoff_until=action.backoff_until)
        return 0

    def _abort(self, action: Action, obs: Observation, now: datetime.datetime) -> float:
        logger.info("Releasing the lock without rebooting: %s", action.reason)
        self.steps.end(obs.node, ours=action.uncordon, backoff_until=None)
        return 0

    def _cleanup(self, action: Action, obs: Observation, now: datetime.datetime) -> float:
        if action.post_reboot:
            self._finish(action, obs)
        elif action.settle_cordon:
            self.steps.uncordon(obs.node, ours=action.uncordon)
        self.steps.forget(backoff_until=None)
        return 0

    # -- reboot hooks and settle gates (pykured.gates) ---------------------------------------------------

    def _hold_for(self, gate: GateResult, now: datetime.datetime) -> float:
        """Keep the lock while a hook or settle gate is closed; log each new reason once."""
        reason = str(gate.reason)
        if reason != self._last_gate:
            until = f" (until {format_rfc3339(gate.deadline)})" if gate.deadline else ""
            logger.info("Holding the reboot lock: %s%s", reason, until)
            self.p.events.record("HoldingLock", reason)
            self._last_gate = reason
        self.p.metrics.set_holding_gate(gate.reason.kind if gate.reason else "unknown")
        pause = GATE_POLL if gate.deadline is None else (gate.deadline - now).total_seconds()
        return max(min(GATE_POLL, self.s.period, pause), 0.05)

    def _gate_passed(self) -> None:
        self._last_gate = ""
        self.p.metrics.set_holding_gate(None)

    def _gate_timed_out(self, gate: GateResult, *, releasing: bool) -> None:
        kind = gate.reason.kind if gate.reason else ""
        event = "RebootHookTimeout" if kind.endswith("-reboot-hooks") else "SettleTimeout"
        what = "releasing the lock anyway" if releasing else "not rebooting, releasing the lock"
        logger.warning("Timed out waiting: %s; %s", gate.reason, what)
        self.p.events.record(event, f"timed out: {gate.reason}; {what}", warning=True)
