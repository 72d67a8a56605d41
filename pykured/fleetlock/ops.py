"""FleetLock's side of a Zincati node's cycle, built from the shared steps of :mod:`pykured.cycle.steps`.

Concept: the daemon and FleetLock run one reboot cycle. This module only adds what is FleetLock's own:
the mark (the Zincati id on the Node), the grant (the hand-off: Zincati reboots after the 200), the release
of a slot together with the mark, and the ``cycle`` outcome counters. Every step it takes — begin, drain,
``--reboot-delay``, the hand-off, finish, uncordon, release, forget — is a :class:`~pykured.cycle.steps.Steps`
method, the very code the daemon runs.

Invariants:
* A node is uncordoned only when :func:`~pykured.cycle.decide.cordon_was_ours` says so: an administrator's
  cordon is never undone.
* The slot is released before FleetLock's memory is cleared from the Node, so a crash in between leaves a
  ``STALE`` node that the reconcile loop cleans up, never a slot nobody will free.
* Nothing here reboots anything: the "rebooter" is :class:`ZincatiGrant`, a hand-off that does nothing.
"""

from __future__ import annotations

import datetime
import logging
import threading
from collections.abc import Callable

from pykured.cycle.book import NodeBook
from pykured.cycle.decide import Policy, cordon_was_ours, lost_lock
from pykured.cycle.state import NodeState
from pykured.cycle.steps import Behaviour, Hands, Steps
from pykured.drain import Drainer
from pykured.kube.events import EventRecorder
from pykured.lock.base import Lock
from pykured.lock.record import LockEntry
from pykured.metrics import Metrics, NullMetrics
from pykured.notify import Notifier

logger = logging.getLogger(__name__)

RELEASED = "FleetLock released the reboot lock"
"""The message of the ``LockReleased`` Event FleetLock posts."""

DrainerFactory = Callable[[str, threading.Event], Drainer]
"""``(node, cancel) -> Drainer``: the cancel event stops a drain that is no longer wanted."""


class ZincatiGrant:
    """FleetLock's hand-off: the 200 answer to Zincati's pre-reboot is the grant, and Zincati reboots."""

    hands_off = True

    def reboot(self) -> None:
        """Nothing to do here: the answer to the request allows the reboot."""

    def withdraw(self) -> None:
        """Nothing to take back: Zincati asks again before its next reboot."""


class NodeOps:
    """FleetLock's cycle operations, over the adapters the composition root wires in."""

    def __init__(
        self,
        *,
        lock: Lock,
        drainer_factory: DrainerFactory,
        book_factory: Callable[[str], NodeBook],
        notifier: Notifier,
        events_factory: Callable[[str], EventRecorder],
        metrics: Metrics | None,
        policy: Policy,
        behaviour: Behaviour,
    ) -> None:
        self.lock = lock
        self.drainer_factory = drainer_factory
        self.book_factory = book_factory
        self.notifier = notifier
        self._events_factory = events_factory
        self._events: dict[str, EventRecorder] = {}
        self._events_guard = threading.Lock()
        self.metrics = metrics or NullMetrics()
        self.policy = policy
        self.behaviour = behaviour

    def steps(self, node: str, cancel: threading.Event | None = None) -> Steps:
        """The shared steps for ``node``; ``cancel`` stops its drain and delays."""
        stop = cancel or threading.Event()
        hands = Hands(
            book=self.book_factory(node), drainer=self.drainer_factory(node, stop), lock=self.lock,
            rebooter=ZincatiGrant(), notifier=self.notifier, events=self._recorder(node),
        )  # fmt: skip
        return Steps(node, hands, self.behaviour, cancel=stop)

    def view(self, node: str, entry: LockEntry | None) -> NodeState:
        """The node's state, with its lock entry."""
        return self.book_factory(node).view(entry)

    def _recorder(self, node: str) -> EventRecorder:
        with self._events_guard:
            recorder = self._events.get(node)
            if recorder is None:
                recorder = self._events[node] = self._events_factory(node)
            return recorder

    def event(self, node: str, reason: str, message: str, *, warning: bool = False) -> None:
        """Post an Event on the node (never raises)."""
        self._recorder(node).record(reason, message, warning=warning)

    def count(self, outcome: str) -> None:
        """``pykured_fleetlock_requests_total{api="cycle", kind=outcome}``: cycle outcomes, bounded."""
        self.metrics.fleetlock_request("cycle", outcome)

    def mark(self, node: str, ident: str | None) -> None:
        """Set (or, with ``None``, remove) FleetLock's mark on the Node."""
        self.book_factory(node).mark(ident)

    def grant(self, node: str, *, now: datetime.datetime) -> None:
        """Drained: record the bootID Zincati will reboot out of, then notify (the 200 follows)."""
        steps = self.steps(node)
        state = steps.h.book.view()
        if self.policy.annotate_nodes:
            steps.annotate(now)
        steps.reboot(
            state, now, event="drained; FleetLock granted Zincati's pre-reboot (Zincati reboots)",
            announce=f"FleetLock granted node {node} its reboot (bootID {state.boot_id})",
        )  # fmt: skip
        self.count("granted")

    def finish_reboot(self, node: str, state: NodeState, *, now: datetime.datetime) -> bool:
        """The node came back: uncordon, labels, notify; release now or set ``release-after``.

        Returns whether the slot was released.
        """
        logger.info("Node %s rebooted (bootID %s -> %s)", node, state.reboot_boot_id, state.boot_id)
        steps = self.steps(node)
        steps.finish(
            state, uncordon=cordon_was_ours(state),
            remove_in_progress=self.policy.annotate_nodes and state.in_progress,
        )  # fmt: skip
        if self.policy.release_delay > datetime.timedelta(0):
            steps.h.book.update_state(release_after=now + self.policy.release_delay)
            return False
        self.release(node, steps)
        return True

    def abandon(self, node: str, state: NodeState) -> None:
        """End a cycle without a reboot: uncordon if we cordoned, release, forget."""
        self.steps(node).end(state, ours=cordon_was_ours(state), release_event=RELEASED, fleetlock_id=None)

    def release(self, node: str, steps: Steps | None = None) -> None:
        """Free the node's slot, then forget the cycle and the mark."""
        steps = steps or self.steps(node)
        steps.release(event=RELEASED)
        steps.forget(fleetlock_id=None)

    def cleanup(self, node: str, state: NodeState) -> None:
        """FleetLock memory without a slot: uncordon unless the reboot was finished, then forget."""
        logger.info("Node %s no longer holds its FleetLock slot: cleaning up", node)
        steps = self.steps(node)
        plan = lost_lock(state)
        if plan.settle_cordon or plan.post_reboot:
            steps.uncordon(state, ours=plan.uncordon)
        steps.forget(fleetlock_id=None)
