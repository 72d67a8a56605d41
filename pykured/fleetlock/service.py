"""FleetLock's two operations and its reconcile loop: a driver of the one reboot cycle.

Concept (docs/fleetlock.md): Zincati's ``pre-reboot`` is the need for a reboot and ``steady-state`` its end;
a reconcile pass is a look with no word from Zincati. For each, the service observes the node (its Node, its
lock entry, the window, the blockers, a drain running here) and lets :meth:`CycleRunner.decide
<pykured.cycle.run.CycleRunner.decide>` — :func:`pykured.cycle.decide.decide` with ``Driver.FLEETLOCK`` —
say what to do, then runs the step with the same :class:`~pykured.cycle.run.CycleRunner` the daemon uses, and
answers Zincati from the decision. So a Zincati node gets the daemon's cycle: the window and blockers, the
annotation, the lock, the PreferNoSchedule taint while it waits, reboot hooks and settle gates, pre- and
post-reboot labels, ``--drain-delay`` and ``--reboot-delay``, notifications, Events and metrics. The one
difference is the reboot: the 200 answer is a grant, and Zincati reboots.

Invariants:
* 200 only when the operation is complete; waiting is 423 (``drain_in_progress``, ``lock_held``,
  ``outside_window``, ``blocked``), a failed drain 503, an API failure 500. Bad input never gets here.
* The state is the lock plus the Node; this object only remembers live drain workers and recent drain
  failures (kured's retry after a failed drain). Restarting loses neither a slot nor a cordon.
* One request at a time per node (a lock per node); long-polls and drains run outside it.
* Only the node itself is answered: a caller whose address is not the named Node's gets 403 and changes
  nothing (:meth:`~pykured.fleetlock.nodes.Resolver.admits`).
* pykured never reboots a node here: Zincati finalizes and reboots.
* ``release-after``: steady-state answers 200 as soon as the post-reboot work is done, because Zincati
  never calls again after a 200; the reconcile loop releases the slot when the delay has passed.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import threading
from collections.abc import Callable, Sequence

from pykured.blockers import Blocker, first_block
from pykured.core import errors
from pykured.cycle.decide import (
    Action,
    CyclePolicy,
    DrainOutcome,
    Driver,
    Hold,
    Observation,
    Step,
    needs_blockers,
)
from pykured.cycle.run import CycleRunner
from pykured.cycle.state import unix_ns
from pykured.cycle.steps import Behaviour, Hands
from pykured.fleetlock import protocol as p
from pykured.fleetlock.nodes import Resolver
from pykured.fleetlock.worker import Worker, Workers
from pykured.lock.base import Lock
from pykured.metrics import Metrics, NullMetrics
from pykured.policy.maintenance import Window
from pykured.policy.quarantine import quarantine_record

logger = logging.getLogger(__name__)

Blockers = Sequence[Blocker] | Callable[[str], Sequence[Blocker]]
"""The blockers, or a per-node factory (the pod blocker looks at one node)."""

HandsFactory = Callable[[str, threading.Event], Hands]
"""``(node, cancel) -> Hands``: the adapters the steps act through (``cancel`` stops a drain no longer
wanted); its rebooter is :class:`ZincatiGrant`."""

MAX_STEPS = 8
"""The most steps one request or reconcile pass runs for a node (each step moves the cycle on)."""


def utcnow() -> datetime.datetime:
    """The wall clock (the default ``clock``)."""
    return datetime.datetime.now(datetime.UTC)


class ZincatiGrant:
    """FleetLock's hand-off: the 200 answer to Zincati's pre-reboot is the grant, and Zincati reboots."""

    hands_off = True

    def reboot(self) -> None:
        """Nothing to do here: the answer to the request allows the reboot."""

    def withdraw(self) -> None:
        """Nothing to take back: Zincati asks again before its next reboot."""


@dataclasses.dataclass
class _Node:
    """What the service keeps per node: its runner (over its hands) and its cancel event."""

    runner: CycleRunner
    cancel: threading.Event
    lock: threading.Lock


class FleetLockService:
    """Answers FleetLock requests for the nodes a :class:`~pykured.fleetlock.nodes.Resolver` knows."""

    def __init__(
        self,
        *,
        hands: HandsFactory,
        lock: Lock,
        policy: CyclePolicy,
        behaviour: Behaviour,
        resolver: Resolver,
        window: Window,
        blockers: Blockers = (),
        metrics: Metrics | None = None,
        group: str = "default",
        long_poll_s: float = 25.0,
        drain_retry_s: float = 300.0,
        clock: Callable[[], datetime.datetime] = utcnow,
    ) -> None:
        self._hands = hands
        self.lock = lock
        self.policy = policy
        self.behaviour = behaviour
        self.resolver = resolver
        self.window = window
        self._blockers = blockers
        self.metrics = metrics or NullMetrics()
        self.group = group
        self.long_poll_s = long_poll_s
        self.drain_retry_s = drain_retry_s
        self._clock = clock
        self.workers = Workers()
        self._nodes: dict[str, _Node] = {}
        self._guard = threading.Lock()
        self._failures: dict[str, tuple[datetime.datetime, str]] = {}
        self._alerted: set[tuple[str, str]] = set()

    # -- per node ------------------------------------------------------------------------------------------

    def _node(self, node: str) -> _Node:
        with self._guard:
            found = self._nodes.get(node)
            if found is None:
                cancel = threading.Event()
                lock = threading.Lock()
                runner = CycleRunner(
                    node, self._hands(node, cancel), self.behaviour, self.policy, driver=Driver.FLEETLOCK,
                    cancel=cancel, period_s=self.drain_retry_s, after_drain=lambda: lock, clock=self._clock,
                )  # fmt: skip
                found = self._nodes[node] = _Node(runner, cancel, lock)
            return found

    def node_lock(self, node: str) -> threading.Lock:
        return self._node(node).lock

    def blockers_for(self, node: str) -> Sequence[Blocker]:
        return self._blockers(node) if callable(self._blockers) else self._blockers

    def draining_here(self, node: str) -> bool:
        """A drain worker for ``node`` runs in this process."""
        return self.workers.live(node) is not None

    def failure(self, node: str, now: datetime.datetime) -> str | None:
        """The last drain failure of ``node`` while its retry back-off lasts."""
        failed = self._failures.get(node)
        return failed[1] if failed is not None and now < failed[0] else None

    def count(self, outcome: str) -> None:
        """``pykured_fleetlock_requests_total{api="cycle", kind=outcome}``: cycle outcomes, bounded."""
        self.metrics.fleetlock_request("cycle", outcome)

    def observe(self, node: str, now: datetime.datetime, *, required: bool | None) -> Observation:
        """The node as the decision sees it: the Node, its lock entry, the window, a drain here, blockers."""
        runner = self._node(node).runner
        entry = self.lock.holding(now_ns=unix_ns(now), honour_ttl=False, node_id=node)
        view = runner.hands.book.view(entry)
        self.metrics.set_quarantined(node, quarantine_record(view.annotations) is not None)
        runner.hands.observers.observed(view)
        in_window = self.window.contains(now)
        failed = self._failures.get(node)
        obs = Observation(
            required=required, in_window=in_window, node=view, driver=Driver.FLEETLOCK,
            next_window=None if in_window else self.window.next_open(now),
            has_taint=runner.hands.observers.marked(view),
            retry_at=failed[0] if failed is not None else None, draining=self.draining_here(node),
        )  # fmt: skip
        if needs_blockers(obs, now=now):
            obs = dataclasses.replace(obs, blocked=first_block(self.blockers_for(node), now=now))
        return obs

    # -- requests ------------------------------------------------------------------------------------------

    def handle(self, request: p.Request, *, peer: str) -> p.Reply:
        """Answer one parsed request from the caller at address ``peer`` (the TCP peer); never raises.

        A caller that is not the node it names (:meth:`Resolver.admits`) gets 403 ``forbidden`` and
        changes nothing: no cordon, no drain, no slot taken or freed; one warning names node and address.
        """
        wrong_group = p.check_group(request, served=self.group)
        if wrong_group is not None:
            return wrong_group
        node, why = self.resolver.resolve(request.id)
        if node is None:
            if request.api is p.Api.STEADY_STATE and why.startswith("no Node"):
                return p.ok(f"no Node has id {request.id[:64]}, so it holds no slot")  # unlock-if-held
            return p.Reply(p.UNKNOWN_NODE, why)
        if not self.resolver.admits(node, peer):
            logger.warning(
                "FleetLock refused %s for node %s from address %s: not an address of that Node",
                request.api.value, node, peer[:64],
            )  # fmt: skip
            return p.Reply(p.FORBIDDEN, "the caller's address is not an address of the node it names")
        try:
            return self.serve(node, request.id, required=request.api is p.Api.PRE_REBOOT)
        except errors.NotFoundError as exc:
            return p.Reply(p.UNKNOWN_NODE, f"node {node}: {exc}")
        except errors.PykuredError as exc:
            logger.error("FleetLock %s for node %s failed: %s", request.api.value, node, exc)
            return p.Reply(p.INTERNAL_ERROR, f"{request.api.value} for node {node} failed: {exc}")
        except Exception as exc:
            logger.exception("FleetLock %s for node %s failed", request.api.value, node)
            return p.Reply(
                p.INTERNAL_ERROR, f"{request.api.value} for node {node} failed: {type(exc).__name__}"
            )

    def pre_reboot(self, node: str, ident: str) -> p.Reply:
        """RecursiveLock with a complete drain before the 200."""
        return self.serve(node, ident, required=True)

    def steady_state(self, node: str) -> p.Reply:
        """UnlockIfHeld."""
        return self.serve(node, "", required=False)

    def serve(self, node: str, ident: str, *, required: bool) -> p.Reply:
        """Run the node's cycle until the decision answers Zincati (a long-poll waits outside the node
        lock)."""
        waited = False
        for _ in range(MAX_STEPS):
            with self.node_lock(node):
                now = self._clock()
                runner = self._node(node).runner
                action, obs = runner.decide(self.observe(node, now, required=required), now)
                answer = self._step(node, ident, action, obs, now, required=required)
            if isinstance(answer, p.Reply):
                return answer
            if answer is None:
                continue
            if waited:  # one long-poll per request
                verb = "draining" if required else "cancelling the drain of"
                return p.Reply(
                    p.DRAIN_IN_PROGRESS, f"node {node} is {verb}" if required else f"{verb} {node}"
                )
            if not required:
                answer.cancel.set()  # Zincati no longer wants this reboot: stop the drain
            answer.done.wait(self.long_poll_s)
            waited = True
        return p.Reply(p.LOCK_HELD, f"node {node}: the cycle did not settle; retry")

    def _step(
        self,
        node: str,
        ident: str,
        action: Action,
        obs: Observation,
        now: datetime.datetime,
        *,
        required: bool,
    ) -> p.Reply | Worker | None:
        """Run the step; the reply that ends the request, a drain worker to wait for, or ``None``: go on."""
        runner = self._node(node).runner
        step = action.step
        if step is Step.WAIT:
            worker = self.workers.live(node) if action.hold is Hold.DRAINING else None
            return worker or self._waiting(node, action, required=required)
        if step is Step.DRAIN_AND_REBOOT:
            return self.start_drain(node, action, obs)
        if step is Step.ACQUIRE:
            outcome = runner.execute(action, obs, now, mark=ident or None)
            if not outcome.acquired:
                return p.Reply(p.LOCK_HELD, f"reboot lock held by: {outcome.holders}")
            logger.info("FleetLock acquired the reboot lock for node %s (Zincati id %s)", node, ident)
            return None
        if step is Step.BLOCKED:
            runner.execute(action, obs, now)
            return p.Reply(p.BLOCKED, f"Reboot blocked: {action.reason}")
        if step is Step.HOLD:
            runner.execute(action, obs, now)
            if action.gate is not None and action.gate.start:
                return None  # the phase began (hooks asked, settle start stamped): look again at once
            if required:
                return p.Reply(p.LOCK_HELD, f"node {node}: {action.reason}")
            return p.ok(f"node {node} rebooted; release scheduled ({action.reason})")
        granted = obs.node.reboot_boot_id is not None
        outcome = runner.execute(action, obs, now)
        if step is Step.POST_REBOOT:
            self.count("released_no_steady_state" if action.no_steady_state else "rebooted")
        elif step is Step.ABORT:
            if outcome.retry:
                self._remember_failure(node, str(action.gate.reason if action.gate else action.reason))
            elif not required:
                if granted or obs.node.holding:
                    self.count("released_without_reboot")
                return p.ok(f"node {node} released without reboot")
        return None

    def _waiting(self, node: str, action: Action, *, required: bool) -> p.Reply:
        hold = action.hold
        if not required:
            if hold is Hold.DRAINING:
                return p.Reply(p.DRAIN_IN_PROGRESS, f"cancelling the drain of {node}")
            if hold is Hold.NOT_READY:
                return p.Reply(p.NODE_NOT_READY, f"node {node} is not Ready; its new bootID is not known yet")
            if hold is Hold.RELEASE_DELAY:
                return p.ok(f"node {node} rebooted; release scheduled")
            return p.ok(f"node {node} holds no FleetLock slot")
        if hold is Hold.GRANTED:
            return p.ok(f"node {node} holds its reboot slot and is drained; reboot granted")
        if hold is Hold.WINDOW:
            return p.Reply(p.OUTSIDE_WINDOW, f"outside the reboot window ({self.window})")
        if hold is Hold.DRAIN_RETRY:
            failed = self.failure(node, self._clock()) or action.reason
            return p.Reply(p.DRAIN_FAILED, f"the last drain of node {node} failed: {failed}")
        if hold is Hold.RELEASE_DELAY:
            return p.Reply(p.LOCK_HELD, f"node {node} is still releasing its previous slot")
        if hold is Hold.DRAINING:
            return p.Reply(p.DRAIN_IN_PROGRESS, f"node {node} is draining")
        return p.Reply(p.LOCK_HELD, f"node {node}: {action.reason}")

    def _remember_failure(self, node: str, failure: str) -> None:
        until = self._clock() + datetime.timedelta(seconds=self.drain_retry_s)
        self._failures[node] = (until, failure)
        self.count("drain_failed")

    def start_drain(self, node: str, action: Action, obs: Observation) -> Worker:
        """Drain (and grant) in the background: the shared ``DRAIN_AND_REBOOT`` step."""
        entry = self._node(node)
        runner = entry.runner

        def drain(worker: Worker) -> str | None:
            self._failures.pop(node, None)
            outcome = runner.execute(action, obs, self._clock())
            if outcome.retry and outcome.failure is not None:
                self._remember_failure(node, outcome.failure)
            elif outcome.drain in (DrainOutcome.REBOOT, DrainOutcome.REBOOT_ANYWAY):
                self.count("granted")
            return outcome.failure

        if self.workers.live(node) is None:
            entry.cancel.clear()
        return self.workers.start(node, drain, lambda _w: None, cancel=entry.cancel)

    # -- reconcile -----------------------------------------------------------------------------------------

    def reconcile_once(self) -> None:
        """One pass over the FleetLock nodes (never raises)."""
        for node in self.resolver.fleetlock_nodes():
            try:
                self._reconcile_node(node)
            except errors.NotFoundError:
                logger.debug("FleetLock node %s is gone", node)
            except Exception as exc:
                logger.warning("FleetLock reconcile of node %s failed: %s", node, exc)

    def _reconcile_node(self, node: str) -> None:
        for _ in range(MAX_STEPS):
            with self.node_lock(node):
                now = self._clock()
                runner = self._node(node).runner
                action, obs = runner.decide(self.observe(node, now, required=None), now)
                if action.step is Step.WAIT:
                    return
                if action.step is Step.DRAIN_AND_REBOOT:
                    logger.info("Resuming the drain of node %s", node)
                    self.start_drain(node, action, obs)
                    return
                if action.step is Step.ALERT_STUCK:
                    key = (node, obs.node.reboot_boot_id or "")
                    if key not in self._alerted:
                        self._alerted.add(key)
                        runner.execute(action, obs, now)
                        self.count("stuck_finalization")
                    return
                runner.execute(action, obs, now)
                if action.step is Step.POST_REBOOT:
                    self.count("released_no_steady_state")
                if action.step is Step.HOLD and not (action.gate is not None and action.gate.start):
                    return

    def stop(self) -> None:
        """Cancel the drains (a restarted pykured resumes them)."""
        self.workers.stop()
