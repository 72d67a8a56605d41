"""The reconcile loop: observe, :func:`~pykured.cycle.decide.decide`, execute one idempotent step, repeat.

Mirrors kured's ``rebootAsRequired`` (``cmd/kured/main.go``) but level-triggered: each pass re-reads the
Node, the lock and the sentinel, so a pod restart at any step resumes where the cluster's state says it is
(an idle pass skips the lock once a read found it clear, as kured reads its lock only at start-up).
A pass starts when the sentinel changes (inotify), when the lock changes (a Lease watch), when a wait ends,
or every ``--period`` as a safety net. Nothing here exits the process: API outages, notification failures
and reboot failures are logged and retried; none of them may reboot a node or leave one cordoned that
pykured did not cordon. Nor does anything else: a pass that raises any other exception (a bug, or a value
no parser foresaw) is logged with its traceback (once while it repeats), counted in
``pykured_pass_errors_total`` and followed, after a back-off, by a fresh pass.

The daemon drives the cycle for the sentinel, a reboot request, a Node condition (``--reboot-condition``) and
the Zincati marker hand-off, one need whichever asks: it observes,
and :class:`~pykured.cycle.run.CycleRunner` (shared with FleetLock) decides and carries out the step. What is
the daemon's own is how it waits — for the sentinel, a request, the lock (a background watch), the window —
and the order of a roll (``--resume-rolls``). The only memory kept in the process is kured's: the retry
time after a failed drain, and the last decision logged.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import threading
from collections.abc import Callable, Sequence

from pykured.agent.parts import Parts, build_parts
from pykured.blockers import Blocker, first_block
from pykured.core import errors
from pykured.cycle.decide import (
    Action,
    CyclePolicy,
    Driver,
    Observation,
    Step,
    Trigger,
    decide,
    needs_blockers,
)
from pykured.cycle.run import CycleRunner
from pykured.cycle.state import NodeState, unix_ns
from pykured.cycle.steps import Behaviour, Hands
from pykured.host.sentinel import Sentinel
from pykured.kube.api import KubeApi
from pykured.metrics import Metrics, NullMetrics
from pykured.policy.maintenance import Window
from pykured.policy.quarantine import quarantine_record
from pykured.requests.record import REQUEST_ANNOTATION, Classified
from pykured.status.agent import AgentStatus

logger = logging.getLogger(__name__)

METRIC_REFRESH = 60.0
ERROR_BACKOFF = 5.0
PASS_ERROR_BACKOFF_MAX = 300.0
"""The longest back-off after passes that keep ending in an unexpected error (it doubles from
:data:`ERROR_BACKOFF`)."""
LOCK_WAIT_MAX = 60.0
"""The longest single wait for the lock to change before the next pass looks again."""
LOCK_WAIT_SLACK = 30.0
"""How much longer than a lock wait the loop itself waits: the wait's end wakes the loop, so one pass follows
each wait (the loop's own timeout is only a safety net; were it as long as the wait, it would run a pass at
the same moment as the wait's end, and the wait's wake a second one right after)."""


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _cycle_marks(node: NodeState) -> bool:
    """Does the Node carry anything of a reboot cycle or a reboot request (then the pass reads the lock)?"""
    return (
        node.has_memory
        or node.in_progress
        or node.fleetlock_id is not None
        or REQUEST_ANNOTATION in node.annotations
    )


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    """The daemon's configuration (from :class:`pykured.config.Config`)."""

    node: str
    period: float = 3600.0
    behaviour: Behaviour = dataclasses.field(default_factory=Behaviour)
    policy: CyclePolicy = dataclasses.field(default_factory=CyclePolicy)


@dataclasses.dataclass(frozen=True, slots=True)
class Senses:
    """What only the daemon has, beside the :class:`~pykured.cycle.steps.Hands` every driver's cycle acts
    through: how it learns that a reboot is needed and may start, and what it reports about itself."""

    kube: KubeApi
    """The API the reboot requests are watched and the status is published through."""
    sentinel: Sentinel
    window: Window
    blockers: Sequence[Blocker] = ()
    freeze_state: Callable[[], str] = lambda: "off"
    """Whether the agent honours the freeze, as published in its status (``on``, ``forbidden``, ``off``…)."""
    policy_where: str = ""
    """The policy ConfigMap watched, ``namespace/name`` ("" when none), published with ``freeze_state``."""
    metrics: Metrics = dataclasses.field(default_factory=NullMetrics)
    """The agent's metrics: what the daemon reports of itself (kured's ``kured_reboot_required``, its pass
    errors, the lock wait of its watch); the cycle's own are its observer's (:mod:`pykured.cyclemetrics`)."""


class Daemon:
    """One node's agent.

    ``parts``: its request keeper and watch, status publisher and turns in a roll, as the composition root
    built them (:mod:`pykured.agent.parts`); without them, the same ones are built for it."""

    def __init__(
        self,
        hands: Hands,
        senses: Senses,
        *,
        settings: Settings,
        clock: Callable[[], datetime.datetime] = _utcnow,
        stopping: threading.Event | None = None,
        wake: threading.Event | None = None,
        parts: Parts | None = None,
    ) -> None:
        self.hands = hands
        """What the cycle acts through (the same object the runner's steps use)."""
        self.senses = senses
        self.settings = settings
        self.node = settings.node
        self._clock = clock
        self.wake = wake or threading.Event()
        """Set to start a pass now: by the sentinel's change callback, the end of a lock wait, or a stop."""
        self.stopping = stopping or threading.Event()
        """Set by :meth:`stop`; also the drainer's cancel event, so a stop interrupts a blocked drain."""
        self.runner = CycleRunner(
            settings.node,
            hands,
            settings.behaviour,
            settings.policy,
            driver=Driver.DAEMON,
            cancel=self.stopping,
            period_s=settings.period,
            clock=clock,
        )
        """The decision and the steps, as every driver runs them (pykured.cycle.run)."""
        self._last_reason = ""
        self.last_action: Action | None = None
        """The decision of the latest pass (for logs and tests)."""
        self._retry_at: datetime.datetime | None = None
        self._lock_waiter: threading.Thread | None = None
        self.passes = 0
        self.pass_errors = 0
        """Passes that ended in an unexpected error (also ``pykured_pass_errors_total``)."""
        self._failing: tuple[str, int] | None = None
        """The unexpected error the latest passes ended in (its text) and how many in a row; None after a
        pass that ended normally."""
        parts = parts or build_parts(
            senses.kube,
            hands,
            node=settings.node,
            period=settings.period,
            wake=self.wake,
            clock=clock,
            metrics=senses.metrics,
        )
        self.requests = parts.requests
        """Reboot requests bound to a boot (pykured.requests.keeper)."""
        self.status = parts.status
        """The status published on the Node for ``pykured status`` (pykured.status.publisher)."""
        self._turns = parts.turns
        """``--resume-rolls``: the node's turn in the roll (pykured.roll.turns)."""
        self._watch = parts.watch
        """The reboot requests' watch, run on its own thread (pykured.requests.watch)."""
        self.conditions = parts.conditions
        """``--reboot-condition``: the Node conditions that are needs (pykured.conditions.keeper)."""
        self._condition_due: datetime.datetime | None = None
        """When a condition not yet held for its FOR becomes a need (the next pass looks then)."""
        self._sentinel = False
        self._waiting_for_lock = False
        self._held_since_ns: int | None = None
        """When this node's lock entry was written (the cycle's start), while it holds one."""
        self._last_cycle_s: int | None = None
        self._request: Classified | None = None
        """This pass's classification of the reboot request (its writes follow the step)."""
        self._lock_clear = False
        """The last read of the lock found no slot of this node's, and no step has run since but waits.

        Then a pass with nothing to do (no sentinel, no request, no cycle's mark on the Node) does not read
        the lock again: as kured, which looks at its lock at start-up and then only once its sentinel is
        there, an idle agent makes no request but its watches' renewals. The first pass (start-up) reads it,
        so a slot left from before a restart is found and released."""

    # -- the loop ----------------------------------------------------------------------------------------

    def run(self) -> None:
        """Reconcile until :meth:`stop`."""
        metric_thread = threading.Thread(target=self._metric_loop, name="reboot-required-metric", daemon=True)
        metric_thread.start()
        threading.Thread(
            target=self._watch.run, args=(self.stopping,), name="reboot-request-watch", daemon=True
        ).start()
        try:
            self.senses.sentinel.start()
        except errors.PykuredError as exc:
            logger.warning("sentinel watch unavailable, checking every period instead: %s", exc)
        try:
            while not self.stopping.is_set():
                pause = self.run_once()
                if pause > 0 and not self.stopping.is_set():
                    self.wake.wait(pause)
                    self.wake.clear()
        finally:
            self.senses.sentinel.stop()

    def stop(self) -> None:
        """Ask the loop to end after the current step (a wait for the lock or a delay ends at once)."""
        self.stopping.set()
        self.wake.set()

    def _metric_loop(self) -> None:
        """kured refreshes ``kured_reboot_required`` every minute, whatever the loop is doing."""
        while not self.stopping.wait(METRIC_REFRESH):
            try:
                self._refresh_metric()
            except Exception:  # the refresh never dies: the next minute looks again
                logger.exception("Refreshing kured_reboot_required failed")

    def _refresh_metric(self) -> bool:
        """Check the sentinel; ``kured_reboot_required`` is 1 for the sentinel, a pending request or a Node
        condition."""
        required = self._required()
        condition = self.conditions is not None and self.conditions.pending is not None
        self.senses.metrics.set_reboot_required(
            self.node, required or self.requests.pending is not None or condition
        )
        return required

    def _required(self) -> bool:
        try:
            return self.senses.sentinel.required()
        except errors.PykuredError as exc:
            logger.error("Error checking the reboot sentinel: %s", exc)
            return False

    def run_once(self) -> float:
        """One pass: observe, decide, execute. Returns how long to wait before the next pass (seconds).

        Never raises: an unexpected error ends the pass (see :meth:`_pass_failed`)."""
        try:
            pause = self._pass()
        except Exception as exc:
            return self._pass_failed(exc)
        if self._failing is not None:
            logger.info("Node %s: a pass completed again after %d that failed", self.node, self._failing[1])
            self._failing = None
        return pause

    def _pass_failed(self, exc: Exception) -> float:
        """Log the error (with its traceback the first time in a row, one line while it repeats), count it,
        and return the back-off: :data:`ERROR_BACKOFF`, doubled for each failure in a row up to
        :data:`PASS_ERROR_BACKOFF_MAX`."""
        self.pass_errors += 1
        self.senses.metrics.pass_error()
        text = f"{type(exc).__name__}: {exc}"[:500]
        same = self._failing is not None and self._failing[0] == text
        count = self._failing[1] + 1 if self._failing is not None else 1
        self._failing = (text, count)
        backoff = min(ERROR_BACKOFF * (1 << min(count - 1, 16)), PASS_ERROR_BACKOFF_MAX)
        if same:
            logger.error("Pass for node %s failed again (%d in a row), retrying in %gs: %s",
                         self.node, count, backoff, text)  # fmt: skip
        else:
            logger.error("Pass for node %s failed unexpectedly, retrying in %gs: %s",
                         self.node, backoff, text, exc_info=exc)  # fmt: skip
        self._request = None
        return backoff

    def _pass(self) -> float:
        self.passes += 1
        now = self._clock()
        try:
            obs = self.observe(now)
        except errors.PykuredError as exc:
            logger.warning("Cannot observe node %s, will retry: %s", self.node, exc)
            return ERROR_BACKOFF
        try:
            action, obs = self.runner.decide(obs, now)
        except errors.PykuredError as exc:
            logger.warning("Cannot evaluate the gates of node %s, will retry: %s", self.node, exc)
            return ERROR_BACKOFF
        self.last_action = action
        self._log_decision(action)
        if action.step is not Step.WAIT:
            self._lock_clear = False  # a step may write the lock: the next pass reads it again
        try:
            pause = self.execute(action, obs, now)
        except errors.PykuredError as exc:
            logger.error("Step %s failed for node %s, will retry: %s", action.step.value, self.node, exc)
            pause = ERROR_BACKOFF
        if self._request is not None:  # the writes the request's classification asks for, as a step
            self.requests.tidy(obs.node, self._request, now, in_cycle=obs.node.reboot_boot_id is not None)
            self._request = None
        if self._turns is not None and action.step is not Step.ACQUIRE:  # ACQUIRE renews or clears it itself
            self._turns.after_pass(obs.node, required=obs.required is True, in_window=obs.in_window, now=now)
        self._publish_status(obs, action, now)
        if self._condition_due is not None:  # look again when a condition has held for its FOR
            pause = min(pause, max((self._condition_due - now).total_seconds(), 1.0))
        return pause

    def _publish_status(self, obs: Observation, action: Action, now: datetime.datetime) -> None:
        """Publish ``pykured.dev/status`` for ``pykured status``, only when it changed. A condition a breaker
        holds back is named, with the breaker as what blocks it."""
        found = self.conditions.last if self.conditions is not None else None
        held = found.held if found is not None else None
        held_back = found.held_back if found is not None else ""
        status = AgentStatus(
            step=action.step.value,
            reason=action.reason,
            sentinel=self._sentinel,
            request=self.requests.pending.reason if self.requests.pending else None,
            condition=held.describe() if held is not None else None,
            blocked=action.blocked.kind if action.blocked else ("conditions" if held_back else ""),
            blocked_by=action.blocked.message if action.blocked else held_back,
            window_opens=None if obs.in_window else obs.next_window,
            lock_wait=self._waiting_for_lock and action.step is Step.ACQUIRE,
            resume_rolls=self._turns is not None,
            freeze=self.senses.freeze_state(),
            policy=self.senses.policy_where,
            last_cycle_s=self._last_cycle_s,
        )
        self.status.publish(obs.node, status, now=now)

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
        node = self.hands.book.view()
        condition = self.conditions is not None and self.conditions.wants(node, now)
        if self._lock_clear and not required and not condition and not _cycle_marks(node):
            entry = None  # nothing asks for a reboot; the lock was clear at the last read since a write
        else:
            entry = self.hands.lock.holding(now_ns=unix_ns(now), honour_ttl=False)
            self._lock_clear = entry is None
            node = node.with_entry(entry)
        self._held_since_ns = entry.created_ns if entry is not None else None
        self.senses.metrics.set_quarantined(self.node, quarantine_record(node.annotations) is not None)
        self.hands.observers.observed(node)
        request = self._request = self.requests.observe(node, now)
        trigger = Trigger.SENTINEL if required else Trigger.NONE
        if request.pending:  # a request for the current boot counts as the sentinel does (no loop guard)
            required = True
            trigger |= Trigger.REQUEST
            self.senses.metrics.set_reboot_required(self.node, True)
        self._condition_due = None
        if self.conditions is not None:  # a condition since the boot counts as the sentinel does (no guard)
            found = self.conditions.observe(node, now)
            self._condition_due = found.due
            if found.need is not None:
                required = True
                trigger |= Trigger.CONDITION
                self.senses.metrics.set_reboot_required(self.node, True)
        in_window = self.senses.window.contains(now)
        obs = Observation(
            required=required,
            trigger=trigger,
            in_window=in_window,
            node=node,
            next_window=None if in_window else self.senses.window.next_open(now),
            has_taint=self.hands.observers.marked(node),
            retry_at=self._retry_at,
        )
        if needs_blockers(obs, now=now):
            obs = dataclasses.replace(obs, blocked=first_block(self.senses.blockers, now=now))
        return obs

    # -- execution: the runner carries out the step; the daemon waits its own way ---------------------------

    def execute(self, action: Action, obs: Observation, now: datetime.datetime) -> float:
        """Carry out one step; returns the pause before the next pass."""
        if action.step is Step.ACQUIRE:
            return self._acquire(action, obs, now)
        if action.step is Step.DRAIN_AND_REBOOT and Trigger.CONDITION in obs.trigger and self.conditions:
            self.conditions.count(obs.node, now)  # counted before the drain: no uncounted reboot
        outcome = self.runner.execute(action, obs, now)
        if (
            action.step is Step.RELEASE
            and self._held_since_ns is not None
            and unix_ns(now) > self._held_since_ns
        ):
            held = (unix_ns(now) - self._held_since_ns) // 1_000_000_000
            self._last_cycle_s = held if held < 7 * 24 * 3600 else None  # kured's entries carry no real time
        if outcome.retry:
            self._retry_at = self._clock() + datetime.timedelta(seconds=self.settings.period)
        if action.step is Step.POST_REBOOT or (action.step is Step.CLEANUP and action.post_reboot):
            self.requests.settle(obs.node, self._clock())  # the reboot satisfied a request for the old boot
        return outcome.pause

    def _acquire(self, action: Action, obs: Observation, now: datetime.datetime) -> float:
        # The pass saw the window open, but observing may have taken long enough (a slow API server) for it
        # to close: decide again on the window as it is now; no slot is taken outside it.
        later = self._clock()
        again = dataclasses.replace(obs, in_window=self.senses.window.contains(later))
        if decide(again, policy=self.settings.policy, now=later).step is not Step.ACQUIRE:
            logger.info("Not taking the lock: the maintenance window closed during this pass")
            return 0
        logger.info("Reboot required")
        self.senses.metrics.set_blocked(None)
        if self._turns is not None:
            turn = self._turns.take(obs.node, now)
            if not turn.go:
                self.senses.metrics.lock_waiting(True)
                self.senses.metrics.set_blocked("lock")
                self._waiting_for_lock = True
                return self._wait_for_lock(turn.wait_s)
        outcome = self.runner.execute(action, obs, now)
        self._waiting_for_lock = not outcome.acquired
        if not outcome.acquired:
            return self._wait_for_lock()
        if self._turns is not None:
            self._turns.taken()
        return 0

    def _wait_for_lock(self, at_most: float | None = None) -> float:
        """Wait for the lock to change in the background; its end (or :meth:`stop`) wakes the loop.

        A watched lock (Leases) ends the wait itself when a slot frees, so the loop looks again only at
        ``--period`` (as kured polls its lock); a polled one (kured's annotation) at least every minute.
        Returns the loop's own pause: :data:`LOCK_WAIT_SLACK` longer than the wait, whose end wakes the loop,
        so each wait is followed by one pass (one read of the lock and of the Node), not two."""
        period = self.settings.period
        timeout = min(period, period if self.hands.lock.watched else LOCK_WAIT_MAX)
        if at_most is not None:
            timeout = min(timeout, at_most)
        if self._lock_waiter is None or not self._lock_waiter.is_alive():
            self._lock_waiter = threading.Thread(
                target=self._lock_wait, args=(timeout,), name="lock-wait", daemon=True
            )
            self._lock_waiter.start()
        return timeout + LOCK_WAIT_SLACK

    def _lock_wait(self, timeout: float) -> None:
        try:
            self.hands.lock.wait_for_change(timeout)
        except Exception as exc:  # a wait never ends the agent: the next pass looks again
            logger.debug("waiting for the lock failed: %s", exc)
        finally:
            self.wake.set()
