"""FleetLock's two operations and its reconcile loop, over kured's lock, drain and bookkeeping.

Concept (docs/fleetlock.md): ``pre-reboot`` = window and blockers → a slot in the *shared* lock
(sentinel-driven and Zincati-driven nodes spend one ``--concurrency`` budget) → pre-reboot labels, cordon,
complete drain (in a :mod:`worker <pykured.fleetlock.worker>`) → reboot notification, annotations,
``reboot-boot-id`` → 200. ``steady-state`` = unlock-if-held: no slot → 200 at once; rebooted → uncordon (if
we cordoned), post labels, uncordon notification, release (after ``--lock-release-delay``, by the reconcile
loop); not rebooted → release too, logged and counted as "released without reboot".

Invariants:
* 200 only when the operation is complete; waiting is 423 (``drain_in_progress``, ``lock_held``,
  ``outside_window``, ``blocked``), a failed drain 503, an API failure 500. Bad input never gets here.
* The state is the lock plus the Node (:class:`~pykured.cycle.state.NodeState`, phases in
  :mod:`pykured.fleetlock.cycle`); this object only remembers live
  drain workers and recent drain failures (a retry back-off). Restarting loses neither a slot nor a cordon.
* One request at a time per node (a lock per node); long-polls wait outside it.
* pykured never reboots a node here: Zincati finalizes and reboots.
* ``release-after``: steady-state answers 200 as soon as the post-reboot work is done, because Zincati
  never calls again after a 200; the reconcile loop releases the slot when the delay has passed.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable, Sequence

from pykured.blockers import Blocker, first_block
from pykured.core import errors
from pykured.cycle.state import NodeState, unix_ns
from pykured.fleetlock import protocol as p
from pykured.fleetlock.core import Core, utcnow
from pykured.fleetlock.cycle import DEFAULT_TIMING, Phase, Step, Timing, phase_of, reconcile
from pykured.fleetlock.nodes import Resolver
from pykured.fleetlock.ops import NodeOps
from pykured.fleetlock.worker import Worker
from pykured.policy.maintenance import Window

logger = logging.getLogger(__name__)

Blockers = Sequence[Blocker] | Callable[[str], Sequence[Blocker]]
"""The blockers, or a per-node factory (the pod blocker looks at one node)."""


class FleetLockService(Core):
    """Answers FleetLock requests for the nodes a :class:`~pykured.fleetlock.nodes.Resolver` knows."""

    def __init__(
        self,
        *,
        ops: NodeOps,
        resolver: Resolver,
        window: Window,
        blockers: Blockers = (),
        group: str = "default",
        long_poll_s: float = 25.0,
        drain_retry_s: float = 300.0,
        timing: Timing = DEFAULT_TIMING,
        clock: Callable[[], datetime.datetime] = utcnow,
    ) -> None:
        super().__init__(ops=ops, drain_retry_s=drain_retry_s, clock=clock)
        self.resolver = resolver
        self.window = window
        self._blockers = blockers
        self.group = group
        self.long_poll_s = long_poll_s
        self.timing = timing
        self._alerted: set[tuple[str, str]] = set()

    def blockers_for(self, node: str) -> Sequence[Blocker]:
        return self._blockers(node) if callable(self._blockers) else self._blockers

    # -- requests ----------------------------------------------------------------------------------------

    def handle(self, request: p.Request) -> p.Reply:
        """Answer one parsed request; never raises."""
        wrong_group = p.check_group(request, served=self.group)
        if wrong_group is not None:
            return wrong_group
        node, why = self.resolver.resolve(request.id)
        if node is None:
            if request.api is p.Api.STEADY_STATE and why.startswith("no Node"):
                return p.ok(f"no Node has id {request.id[:64]}, so it holds no slot")  # unlock-if-held
            return p.Reply(p.UNKNOWN_NODE, why)
        try:
            if request.api is p.Api.PRE_REBOOT:
                return self.pre_reboot(node, request.id)
            return self.steady_state(node)
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
        with self.node_lock(node):
            now = self._clock()
            obs = self.observe(node, now)
            reply = self._pre_reboot_locked(node, ident, obs, now)
            if not isinstance(reply, Worker):
                return reply
        reply.done.wait(self.long_poll_s)
        with self.node_lock(node):
            return self._after_drain_wait(node, self.observe(node, self._clock()))

    def _pre_reboot_locked(
        self, node: str, ident: str, obs: NodeState, now: datetime.datetime
    ) -> p.Reply | Worker:
        phase = phase_of(obs)
        if phase is Phase.FOREIGN:
            return p.Reply(p.LOCK_HELD, f"node {node} holds a slot for its own sentinel-driven reboot cycle")
        if phase is Phase.GRANTED:
            return p.ok(f"node {node} holds its reboot slot and is drained")
        if phase is Phase.RELEASING:
            assert obs.release_after is not None
            if now < obs.release_after:
                return p.Reply(p.LOCK_HELD, f"node {node} is still releasing its previous slot")
            self.ops.release(node)
        if phase is Phase.REBOOTED and not self.ops.finish_reboot(node, obs, now=now):
            return p.Reply(p.LOCK_HELD, f"node {node} is still releasing its previous slot")
        if phase is Phase.STALE:
            if self.draining_here(node):
                return p.Reply(p.DRAIN_IN_PROGRESS, f"node {node} is draining")
            self.ops.cleanup(node, obs)
        if phase is Phase.DRAINING:
            return self.start_drain(node)
        return self._acquire(node, ident, self.observe(node, now) if phase is not Phase.IDLE else obs, now)

    def _acquire(self, node: str, ident: str, obs: NodeState, now: datetime.datetime) -> p.Reply | Worker:
        failed = self.failure(node, now)
        if failed is not None:
            return p.Reply(p.DRAIN_FAILED, f"the last drain of node {node} failed: {failed}")
        if not self.window.contains(now):
            return p.Reply(p.OUTSIDE_WINDOW, f"outside the reboot window ({self.window})")
        blocked = first_block(self.blockers_for(node), now=now)
        if blocked is not None:
            return p.Reply(p.BLOCKED, f"Reboot blocked: {blocked}")
        self.ops.mark(node, ident)
        result = self.ops.lock.acquire(unschedulable=obs.unschedulable, now_ns=unix_ns(now), node_id=node)
        if not result.acquired:
            self.ops.mark(node, None)
            return p.Reply(p.LOCK_HELD, f"reboot lock held by: {result.holder_names or '?'}")
        logger.info("FleetLock acquired the reboot lock for node %s (Zincati id %s)", node, ident)
        self.ops.steps(node).begin(unschedulable_before=obs.unschedulable)
        self.ops.event(node, "LockAcquired", f"FleetLock acquired the reboot lock ({self.ops.lock.backend})")
        return self.start_drain(node)

    def _after_drain_wait(self, node: str, obs: NodeState) -> p.Reply:
        phase = phase_of(obs)
        if phase is Phase.GRANTED:
            return p.ok(f"node {node} drained; reboot granted")
        if self.draining_here(node) or phase is Phase.DRAINING:
            return p.Reply(p.DRAIN_IN_PROGRESS, f"node {node} is draining")
        failed = self.failure(node, self._clock())
        if failed is not None:
            return p.Reply(p.DRAIN_FAILED, f"the drain of node {node} failed: {failed}")
        return p.Reply(p.LOCK_HELD, f"node {node} lost its slot while draining; retry")

    def steady_state(self, node: str) -> p.Reply:
        """UnlockIfHeld."""
        with self.node_lock(node):
            now = self._clock()
            obs = self.observe(node, now)
            phase = phase_of(obs)
            if phase is not Phase.DRAINING and not (phase is Phase.STALE and self.draining_here(node)):
                return self._steady_state_locked(node, obs, now)
            worker = self.workers.live(node)
            if worker is not None:
                worker.cancel.set()
        if worker is not None:
            worker.done.wait(self.long_poll_s)
        with self.node_lock(node):
            now = self._clock()
            obs = self.observe(node, now)
            if self.draining_here(node):
                return p.Reply(p.DRAIN_IN_PROGRESS, f"cancelling the drain of node {node}")
            return self._steady_state_locked(node, obs, now)

    def _steady_state_locked(self, node: str, obs: NodeState, now: datetime.datetime) -> p.Reply:
        phase = phase_of(obs)
        if phase in (Phase.IDLE, Phase.FOREIGN):
            return p.ok(f"node {node} holds no FleetLock slot")
        if phase is Phase.STALE:
            self.ops.cleanup(node, obs)
            return p.ok(f"node {node} holds no FleetLock slot")
        if phase is Phase.GRANTED and not obs.ready:
            # Rebooting, or back before its kubelet reported the new bootID: not "released without reboot".
            return p.Reply(p.NODE_NOT_READY, f"node {node} is not Ready; its new bootID is not known yet")
        if phase in (Phase.DRAINING, Phase.GRANTED):
            logger.warning("FleetLock released the slot of node %s without a reboot (bootID unchanged)", node)
            self.ops.event(
                node, "LockReleased", "Zincati reported steady state without a reboot", warning=True
            )
            self.ops.count("released_without_reboot")
            self.ops.abandon(node, obs)
            return p.ok(f"node {node} released without reboot")
        if phase is Phase.REBOOTED:
            released = self.ops.finish_reboot(node, obs, now=now)
            self.ops.count("rebooted")
            return p.ok(f"node {node} rebooted; " + ("released" if released else "release scheduled"))
        assert obs.release_after is not None  # RELEASING
        if now >= obs.release_after:
            self.ops.release(node)
            return p.ok(f"node {node} released")
        return p.ok(f"node {node} rebooted; release scheduled")

    # -- reconcile ---------------------------------------------------------------------------------------

    def reconcile_once(self) -> None:
        """One pass over the FleetLock nodes (never raises)."""
        for node in self.resolver.fleetlock_nodes():
            try:
                with self.node_lock(node):
                    self._reconcile_node(node, self._clock())
            except errors.NotFoundError:
                logger.debug("FleetLock node %s is gone", node)
            except Exception as exc:
                logger.warning("FleetLock reconcile of node %s failed: %s", node, exc)

    def _reconcile_node(self, node: str, now: datetime.datetime) -> None:
        obs = self.observe(node, now)
        step = reconcile(obs, draining_here=self.draining_here(node), timing=self.timing, now=now)
        if step is Step.RESUME_DRAIN:
            logger.info("Resuming the drain of node %s", node)
            self.start_drain(node)
        elif step is Step.RELEASE:
            self.ops.release(node)
        elif step is Step.CLEANUP:
            self.ops.cleanup(node, obs)
        elif step is Step.FINISH_REBOOT:
            logger.warning("Node %s rebooted and is Ready, but Zincati sent no steady-state: releasing", node)
            self.ops.event(
                node, "FleetLockNoSteadyState", "rebooted and Ready without a steady-state call", warning=True
            )
            self.ops.count("released_no_steady_state")
            self.ops.finish_reboot(node, obs, now=now)
        elif step is Step.ALERT_STUCK:
            key = (node, obs.reboot_boot_id or "")
            if key not in self._alerted:
                self._alerted.add(key)
                logger.warning(
                    "Node %s was granted its reboot at %s and has not rebooted: finalization stuck?",
                    node,
                    obs.reboot_triggered_at,
                )
                self.ops.event(node, "FleetLockStuck", "granted but the bootID has not changed", warning=True)
                self.ops.count("stuck_finalization")
