"""The reconcile loop: observe, :func:`pykured.decide.decide`, execute one small idempotent step, repeat.

Mirrors kured's ``rebootAsRequired`` (kured.md §5) but level-triggered: each pass re-reads the Node, the lock
and the sentinel, so a pod restart at any step resumes where the cluster's state says it is. A pass starts
when the sentinel changes (inotify), when the lock changes (a Lease watch), when a wait ends, or every
``--period`` as a safety net. Nothing here exits the process: API outages, notification failures and reboot
failures are logged and retried; none of them may reboot a node or leave one cordoned that pykured did not
cordon.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import threading
import time
from collections.abc import Callable, Sequence

from pykured import __version__, errors
from pykured.blockers import Blocker, first_block
from pykured.decide import Action, NodeMemory, Observation, Policy, Step, decide, needs_blockers
from pykured.drain import Drainer
from pykured.events import EventRecorder
from pykured.kube import MERGE_PATCH, Kube
from pykured.lock.base import Lock
from pykured.metrics import Metrics
from pykured.node import NodeBook
from pykured.nodeinfo import FLEETLOCK_ID_ANNOTATION, NodeView, format_rfc3339, parse_rfc3339
from pykured.notify import Notifier
from pykured.reboot import Rebooter
from pykured.requestkeeper import RequestKeeper
from pykured.sentinel import Sentinel
from pykured.taints import PreferNoScheduleTaint
from pykured.window import TimeWindow

logger = logging.getLogger(__name__)

BACKOFF_UNTIL_ANNOTATION = "pykured.dev/backoff-until"
FLEETLOCK_ANNOTATION = FLEETLOCK_ID_ANNOTATION
"""Set by FleetLock while it runs a Zincati node's cycle: the daemon leaves that node alone."""
METRIC_REFRESH = 60.0
ERROR_BACKOFF = 5.0
LOCK_WAIT_MAX = 60.0


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    """The daemon's configuration (from :class:`pykured.config.Config`)."""

    node: str
    period: float = 3600.0
    drain_delay: float = 0.0
    reboot_delay: float = 0.0
    release_delay: float = 0.0
    sentinel_loop_backoff: float = 3600.0
    force_reboot: bool = False
    pre_labels: dict[str, str] = dataclasses.field(default_factory=dict)
    post_labels: dict[str, str] = dataclasses.field(default_factory=dict)
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
    window: TimeWindow
    notifier: Notifier
    events: EventRecorder
    metrics: Metrics | None = None
    taint: PreferNoScheduleTaint | None = None
    blockers: Sequence[Blocker] = ()


class Daemon:
    """One node's agent."""

    def __init__(
        self,
        parts: Parts,
        settings: Settings,
        *,
        clock: Callable[[], datetime.datetime] = _utcnow,
        stopping: threading.Event | None = None,
    ) -> None:
        self.p = parts
        self.s = settings
        self._clock = clock
        self.wake = threading.Event()
        self.stopping = stopping or threading.Event()
        """Set by :meth:`stop`; also the drainer's cancel event, so a stop interrupts a blocked drain."""
        self._last_reason = ""
        self._retry_at: datetime.datetime | None = None
        self._entry_unschedulable: bool | None = None
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
        """Reboot requests bound to a boot, and the status published on the Node (pykured.requestkeeper)."""
        self._sentinel = False
        self._lock_holders: tuple[str, ...] = ()

    # -- the loop ----------------------------------------------------------------------------------------

    def run(self) -> None:
        """Reconcile until :meth:`stop`."""
        metric_thread = threading.Thread(target=self._metric_loop, name="reboot-required-metric", daemon=True)
        metric_thread.start()
        try:
            self.p.sentinel.start()
        except errors.PykuredError as exc:
            logger.warning("sentinel watch unavailable, checking every period instead: %s", exc)
        try:
            while not self.stopping.is_set():
                pause = self.run_once()
                if pause > 0:
                    self.wake.wait(pause)
                    self.wake.clear()
        finally:
            self.p.sentinel.stop()

    def stop(self) -> None:
        """Ask the loop to end after the current step."""
        self.stopping.set()
        self.wake.set()

    def notify_change(self) -> None:
        """Start a pass now (the sentinel's change callback)."""
        self.wake.set()

    def _metric_loop(self) -> None:
        """kured refreshes ``kured_reboot_required`` every minute, whatever the loop is doing."""
        while not self.stopping.wait(METRIC_REFRESH):
            if self.requests.poll(self._clock()):  # a reboot request appeared: start a pass now
                self.wake.set()
            self._refresh_metric()

    def _refresh_metric(self) -> bool:
        """Check the sentinel; ``kured_reboot_required`` is 1 for the sentinel or a pending request."""
        required = self._required()
        if self.p.metrics:
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
            view, obs = self.observe(now)
        except errors.PykuredError as exc:
            logger.warning("Cannot observe node %s, will retry: %s", self.s.node, exc)
            return ERROR_BACKOFF
        action = decide(obs, policy=self.s.policy, now=now)
        self._log_decision(action)
        try:
            pause = self.execute(action, view, obs, now)
        except errors.PykuredError as exc:
            logger.error("Step %s failed for node %s, will retry: %s", action.step.value, self.s.node, exc)
            pause = ERROR_BACKOFF
        self._publish_status(view, obs, action, now)
        return pause

    def _publish_status(
        self, view: NodeView, obs: Observation, action: Action, now: datetime.datetime
    ) -> None:
        """Publish ``pykured.dev/status`` for ``pykured status``, only when it changed."""
        self.requests.publish(
            view,
            step=action.step.value,
            reason=action.reason,
            sentinel=self._sentinel,
            blocked=action.blocked.kind if action.blocked else "",
            blocked_by=action.blocked.message if action.blocked else "",
            window_opens=None if obs.in_window else obs.next_window,
            lock_holders=self._lock_holders if action.step is Step.ACQUIRE else (),
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

    def observe(self, now: datetime.datetime) -> tuple[NodeView, Observation]:
        """Read the sentinel, the window, the Node and the lock (and the blockers when they matter)."""
        required = self._sentinel = self._refresh_metric()
        view = self.p.book.view()
        request = self.requests.observe(view, now, in_cycle=view.reboot_boot_id is not None)
        if request.pending:  # a reboot request for the current boot counts as the sentinel does
            required = True
            if self.p.metrics:
                self.p.metrics.set_reboot_required(self.s.node, True)
        entry = self.p.lock.holding(now_ns=_ns(now), honour_ttl=False)
        taint_key = self.p.taint.key if self.p.taint else ""
        memory = NodeMemory(
            boot_id=view.boot_id,
            unschedulable=view.unschedulable,
            reboot_boot_id=view.reboot_boot_id,
            reboot_triggered_at=view.reboot_triggered_at,
            reboot_attempts=view.reboot_attempts,
            release_after=view.release_after,
            backoff_until=_later(
                parse_rfc3339(view.annotations.get(BACKOFF_UNTIL_ANNOTATION, "")), self._retry_at
            ),
            in_progress_annotation=view.in_progress,
            has_taint=bool(taint_key) and view.has_taint(taint_key, "PreferNoSchedule"),
            cycle_started=view.unschedulable_before is not None,
            fleetlock_cycle=FLEETLOCK_ANNOTATION in view.annotations,
        )
        in_window = self.p.window.contains(now)
        obs = Observation(
            required=required,
            in_window=in_window,
            node=memory,
            holding=entry is not None,
            next_window=None if in_window else self.p.window.next_open(now),
        )
        self._entry_unschedulable = entry.unschedulable if entry is not None else None
        if needs_blockers(obs, now=now):
            obs = dataclasses.replace(obs, blocked=first_block(self.p.blockers, now=now))
        return view, obs

    # -- execution ---------------------------------------------------------------------------------------

    def execute(self, action: Action, view: NodeView, obs: Observation, now: datetime.datetime) -> float:
        """Carry out one step; returns the pause before the next pass."""
        step = action.step
        if self.p.metrics and step not in (Step.BLOCKED, Step.WAIT):
            self.p.metrics.set_blocked(None)
        if step is Step.WAIT:
            return self._pause(action.until, now)
        if step is Step.SYNC_TAINT:
            if self.p.taint:
                self.p.taint.disable()
            return 0
        if step is Step.ANNOTATE:
            self.p.book.add_reboot_annotations(now)
            return 0
        if step is Step.BLOCKED:
            logger.info("Reboot blocked: %s", action.reason)
            if self.p.metrics:
                self.p.metrics.set_blocked(action.blocked.kind if action.blocked else "unknown")
            self.p.events.record("RebootBlocked", f"Reboot blocked: {action.reason}", warning=True)
            return self.s.period
        if step is Step.ACQUIRE:
            return self._acquire(view, now)
        if step is Step.DRAIN_AND_REBOOT:
            return self._drain_and_reboot(view, now)
        if step is Step.RETRY_REBOOT:
            logger.warning(
                "Node %s did not reboot (bootID unchanged since %s): triggering the reboot once more",
                self.s.node,
                format_rfc3339(view.reboot_triggered_at or now),
            )
            self.p.events.record(
                "RebootRetry", "bootID unchanged after the reboot: retrying once", warning=True
            )
            self._trigger_reboot(view, now)
            return 0
        if step is Step.GIVE_UP:
            logger.error(
                "Node %s did not reboot after %d attempts: giving up this cycle, backing off for %ss",
                self.s.node,
                view.reboot_attempts,
                int(self.s.sentinel_loop_backoff),
            )
            self.p.events.record("RebootLoopBackoff", action.reason, warning=True)
            if self.p.metrics:
                self.p.metrics.reboot("failed")
            self._uncordon_if_ours(view)
            self._release()
            self._clear_state(backoff=now + datetime.timedelta(seconds=self.s.sentinel_loop_backoff))
            return 0
        if step is Step.POST_REBOOT:
            self._post_reboot(view, obs)
            release_after = now + datetime.timedelta(seconds=self.s.release_delay)
            self.p.book.update_state(release_after=release_after)
            return 0
        if step is Step.RELEASE:
            self._release()
            backoff = None
            if obs.required:
                backoff = now + datetime.timedelta(seconds=self.s.sentinel_loop_backoff)
                logger.warning(
                    "Reboot sentinel still present after a completed reboot: not rebooting again "
                    "before %s (kured #976)",
                    format_rfc3339(backoff),
                )
                self.p.events.record("RebootLoopBackoff", "sentinel still present after reboot", warning=True)
            self._clear_state(backoff=backoff)
            return 0
        if step is Step.ABORT:
            logger.info("Releasing the lock without rebooting: %s", action.reason)
            self._uncordon_if_ours(view)
            self._release()
            self._clear_state()
            return 0
        # CLEANUP
        if view.release_after is None and view.reboot_boot_id and view.boot_id != view.reboot_boot_id:
            self._post_reboot(view, obs)
        elif view.release_after is None:
            self._uncordon_if_ours(view)
        self._clear_state()
        return 0

    def _pause(self, until: datetime.datetime | None, now: datetime.datetime) -> float:
        pause = self.s.period
        if until is not None:
            pause = min(pause, max((until - now).total_seconds(), 0.05))
        return pause

    def _acquire(self, view: NodeView, now: datetime.datetime) -> float:
        if not self.p.window.contains(self._clock()):
            # The pass saw the window open, but observing took long enough (a slow API server) for it to
            # close: take no slot outside the window; the next pass waits for it to open again.
            logger.info("Not taking the lock: the maintenance window closed during this pass")
            return 0
        logger.info("Reboot required")
        result = self.p.lock.acquire(unschedulable=view.unschedulable, now_ns=_ns(now))
        if self.p.metrics:
            self.p.metrics.lock_waiting(not result.acquired)
            self.p.metrics.lock_holders(self.p.lock.backend, len(result.holders))
        self._lock_holders = tuple(h.node_id for h in result.holders) if not result.acquired else ()
        if not result.acquired:
            logger.warning("Lock already held: %s", result.holder_names)
            if self.p.metrics:
                self.p.metrics.set_blocked("lock")
            if self.p.taint:
                self.p.taint.enable()
            return self._wait_for_lock(min(self.s.period, LOCK_WAIT_MAX))
        logger.info("Acquired reboot lock for node %s (%s)", self.s.node, self.p.lock.backend)
        self.p.book.update_state(unschedulable_before=view.unschedulable)
        self.p.events.record("LockAcquired", f"acquired the reboot lock ({self.p.lock.backend})")
        return 0

    def _wait_for_lock(self, timeout: float) -> float:
        """Wait for the lock to change in a background thread; its end, an event or stop() wakes the loop.

        The wait (a Lease watch, or DaemonSet polls) can last ``timeout`` seconds; run in the loop's thread it
        kept a SIGTERM waiting that long, past a pod's 30 s grace period (found by the soak).
        """
        if self._lock_waiter is None or not self._lock_waiter.is_alive():
            self._lock_waiter = threading.Thread(
                target=self._lock_wait, args=(timeout,), name="lock-wait", daemon=True
            )
            self._lock_waiter.start()
        return timeout

    def _lock_wait(self, timeout: float) -> None:
        try:
            self.p.lock.wait_for_change(timeout)
        except errors.PykuredError as exc:
            logger.debug("Waiting for the lock failed: %s", exc)
        finally:
            self.wake.set()

    def _drain_and_reboot(self, view: NodeView, now: datetime.datetime) -> float:
        if view.unschedulable_before is None:
            before = (
                self._entry_unschedulable if self._entry_unschedulable is not None else view.unschedulable
            )
            self.p.book.update_state(unschedulable_before=before)
        self.p.book.apply_labels(self.s.pre_labels)
        self._sleep(self.s.drain_delay)
        logger.info("Draining node %s", self.s.node)
        self.p.notifier.notify_drain(self.s.node)
        self.p.events.record("Draining", "cordoning and draining the node before its reboot")
        started = time.monotonic()
        try:
            self.p.drainer.cordon()
            self.p.drainer.drain()
        except errors.PykuredError as exc:
            if self.p.metrics:
                self.p.metrics.observe_drain(time.monotonic() - started)
            if not self.s.force_reboot:
                logger.error(
                    "Unable to cordon or drain %s: %s, will release lock and retry cordon and drain "
                    "before rebooting when lock is next acquired",
                    self.s.node,
                    exc,
                )
                self.p.events.record("DrainFailed", str(exc), warning=True)
                # Uncordon before releasing: a slot released first lets another node cordon while this one
                # still is (found by the soak: three nodes cordoned at --concurrency=2).
                self._retry_at = self._clock() + datetime.timedelta(seconds=self.s.period)
                logger.info("Performing a best-effort uncordon after failed cordon and drain")
                self._uncordon_if_ours(self.p.book.view())
                self._release()
                self._clear_state()
                return self.s.period
            logger.warning(
                "Unable to cordon or drain %s: %s; rebooting anyway (--force-reboot)", self.s.node, exc
            )
        if self.p.metrics:
            self.p.metrics.observe_drain(time.monotonic() - started)
        self._sleep(self.s.reboot_delay)
        self._trigger_reboot(self.p.book.view(), self._clock())
        return 0

    def _trigger_reboot(self, view: NodeView, now: datetime.datetime) -> None:
        self.p.book.update_state(
            reboot_boot_id=view.boot_id, reboot_triggered_at=now, reboot_attempts=view.reboot_attempts + 1
        )
        self.p.notifier.notify_reboot(self.s.node)
        self.p.events.record("Rebooting", "triggering the reboot")
        logger.info("Triggering reboot for node %s", self.s.node)
        try:
            self.p.rebooter.reboot()
        except errors.PykuredError as exc:
            logger.error("Error rebooting node %s: %s", self.s.node, exc)
            self.p.events.record("RebootFailed", str(exc), warning=True)
            if self.p.metrics:
                self.p.metrics.reboot("failed")
            return
        if self.p.metrics:
            handoff = hasattr(self.p.rebooter, "present")
            self.p.metrics.reboot("handoff" if handoff else "triggered")
            if handoff:
                self.p.metrics.set_handoff("allowed")
        logger.info("Waiting for reboot")

    def _post_reboot(self, view: NodeView, obs: Observation) -> None:
        logger.info("Node %s rebooted (bootID %s)", self.s.node, view.boot_id)
        if self.p.metrics:
            self.p.metrics.reboot("completed")
        remove = getattr(self.p.rebooter, "remove", None)
        if callable(remove):
            remove()
            if self.p.metrics:
                self.p.metrics.set_handoff(None)
        uncordoned = self._uncordon_if_ours(view)
        if self.p.taint:
            self.p.taint.disable()
        if self.s.policy.annotate_nodes and not obs.required and view.in_progress:
            self.p.book.remove_in_progress_annotation()
        if uncordoned:
            self.p.notifier.notify_uncordon(self.s.node)
            self.p.events.record("Uncordoned", "node rebooted and uncordoned")
        self.requests.settle(view, self._clock())  # the reboot satisfied a request for the old boot

    def _uncordon_if_ours(self, view: NodeView) -> bool:
        """Uncordon only when pykured (or kured's lock entry) says the node was schedulable before."""
        before = view.unschedulable_before
        if before is None:
            before = self._entry_unschedulable
        if before is not False:
            if view.unschedulable:
                logger.info(
                    "Leaving node %s cordoned: it was unschedulable before the reboot cycle", self.s.node
                )
            return False
        if view.unschedulable:
            self.p.drainer.uncordon()
            logger.info("Uncordoned node %s", self.s.node)
        self.p.book.apply_labels(self.s.post_labels)
        return True

    def _release(self) -> None:
        if self.p.lock.release():
            logger.info("Released the reboot lock of node %s", self.s.node)
        if self.p.metrics:
            self.p.metrics.lock_waiting(False)

    def _clear_state(self, *, backoff: datetime.datetime | None = None) -> None:
        self.p.book.update_state(
            unschedulable_before=None,
            reboot_boot_id=None,
            reboot_triggered_at=None,
            release_after=None,
            reboot_attempts=None,
        )
        value = format_rfc3339(backoff) if backoff else None
        self.p.kube.patch_node(
            self.s.node,
            {"metadata": {"annotations": {BACKOFF_UNTIL_ANNOTATION: value}}},
            patch_type=MERGE_PATCH,
        )

    def _sleep(self, seconds: float) -> None:
        if seconds > 0:
            self.stopping.wait(seconds)


def _ns(moment: datetime.datetime) -> int:
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1_000


def _later(a: datetime.datetime | None, b: datetime.datetime | None) -> datetime.datetime | None:
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)
