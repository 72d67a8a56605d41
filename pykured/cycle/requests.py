"""The agent's side of reboot requests and of its published status: the few writes on its own Node.

Concept: the daemon asks two questions per pass and this adapter answers them with the pure modules —
"does a request make this node need a reboot?" (:func:`pykured.rebootrequest.classify`) and "what do I say
about myself?" (:mod:`pykured.agentstatus`) — and does the matching writes: it removes a request that is
satisfied (with an Event, a notification and the ``pykured.dev/reboot-request-satisfied`` record) or stale
(with a log line), and writes ``pykured.dev/status`` when it changed.

Invariants:
* Never raises into the daemon: an API failure is logged and the next pass tries again.
* A request is removed with a JSON Patch that ``test``s its text, so a newer request written meanwhile
  survives (HTTP 422 then means: someone changed it, look again next pass).
* Only a request naming the current boot is ever "pending"; everything else is removed, so a stale
  request cannot loop.
* ``pykured.dev/status`` is written only when its text changes (no timestamps that move by themselves).
"""

from __future__ import annotations

import datetime
import logging
import threading
from collections.abc import Mapping
from typing import Any

from pykured import agentstatus, errors, rebootrequest
from pykured.cycle.state import NodeState
from pykured.events import EventRecorder
from pykured.kube import JSON_PATCH, MERGE_PATCH, Kube
from pykured.metrics import Metrics
from pykured.notify import Notifier

logger = logging.getLogger(__name__)

REQUESTED = "RebootRequested"
SATISFIED = "RebootRequestSatisfied"
STALE = "RebootRequestStale"


def previous_boot_ids(view: NodeState) -> tuple[str, ...]:
    """Boots this node is known to have left: pykured's cycle memory and the agent's last status."""
    status = agentstatus.decode(view.annotations.get(agentstatus.STATUS_ANNOTATION))
    known = [view.reboot_boot_id or ""]
    if status is not None:
        known += [status.boot_id, status.last_boot_id]
    return tuple(b for b in dict.fromkeys(known) if b and b != view.boot_id)


def classify(view: NodeState, now: datetime.datetime) -> rebootrequest.Classified:
    """The node's request, classified for its current boot (pure)."""
    return rebootrequest.classify(
        view.annotations, view.boot_id, previous_boot_ids=previous_boot_ids(view), now=now
    )


class RequestKeeper:
    """Reads and settles one node's reboot request; publishes the agent's status."""

    def __init__(
        self,
        kube: Kube,
        *,
        node: str,
        version: str,
        events: EventRecorder,
        notifier: Notifier,
        metrics: Metrics | None = None,
    ) -> None:
        self._kube = kube
        self.node = node
        self.version = version
        self._events = events
        self._notifier = notifier
        self._metrics = metrics
        self._mutex = threading.Lock()
        self._announced: str | None = None
        self._published: str | None = None
        self.pending: rebootrequest.RebootRequest | None = None
        """The request naming the current boot, as of the last look."""

    # -- requests ------------------------------------------------------------------------------------------

    def observe(self, view: NodeState, now: datetime.datetime, *, in_cycle: bool) -> rebootrequest.Classified:
        """Classify the request; remove a stale or invalid one at once, a satisfied one unless ``in_cycle``
        (the cycle's post-reboot step settles it, see :meth:`settle`)."""
        found = classify(view, now)
        self._remember(found)
        if found.state in (rebootrequest.RequestState.STALE, rebootrequest.RequestState.INVALID):
            logger.warning("Ignoring and removing the reboot request of node %s: %s", self.node, found.why)
            self._events.record(STALE, f"ignored and removed: {found.why}", warning=True)
            self._remove(found)
        elif found.state is rebootrequest.RequestState.SATISFIED and not in_cycle:
            self._satisfy(view, found, now)
        return found

    def settle(self, view: NodeState, now: datetime.datetime) -> None:
        """After a completed reboot: remove the request it satisfied, with an Event and a notification."""
        found = classify(view, now)
        if found.state is rebootrequest.RequestState.SATISFIED:
            self._satisfy(view, found, now)

    def see(self, node: Mapping[str, Any], now: datetime.datetime) -> bool:
        """Look at a fresh copy of the Node (from its watch, or a poll): ``True`` if a new request became
        pending."""
        before = self.pending
        found = classify(NodeState.from_obj(node), now)
        self._remember(found)
        return found.pending and (before is None or not before.same_intent(found.request or before))

    def poll(self, now: datetime.datetime) -> bool:
        """Re-read the Node: ``True`` if a new request became pending (never raises)."""
        try:
            node = self._kube.get_node(self.node)
        except errors.KubeError as exc:
            logger.debug("cannot read node %s for reboot requests: %s", self.node, exc)
            return False
        return self.see(node, now)

    def _remember(self, found: rebootrequest.Classified) -> None:
        with self._mutex:
            self.pending = found.request if found.pending else None
            key = rebootrequest.format_request(found.request) if found.pending and found.request else None
            if key != self._announced:
                if found.pending and found.request is not None:
                    req = found.request
                    logger.info(
                        "Reboot requested for node %s: %s (by %s, bootID %s%s)",
                        self.node,
                        req.reason,
                        req.requested_by or "unknown",
                        req.boot_id,
                        f", rollout {req.rollout}" if req.rollout else "",
                    )
                    self._events.record(REQUESTED, f"reboot requested by {req.requested_by}: {req.reason}")
                self._announced = key
        if self._metrics:
            now_pending = self.pending
            reason = now_pending.reason if now_pending else None
            self._metrics.set_reboot_request(reason, now_pending.rollout if now_pending else "")

    def _remove(self, found: rebootrequest.Classified) -> bool:
        if found.raw is None:
            return False
        return self._patch(rebootrequest.remove_patch(found.raw), "remove the reboot request")

    def _satisfy(self, view: NodeState, found: rebootrequest.Classified, now: datetime.datetime) -> None:
        req = found.request
        if req is None or found.raw is None:
            return
        record = rebootrequest.satisfied_record(req, new_boot_id=view.boot_id, now=now)
        if not self._patch(rebootrequest.satisfy_patch(found.raw, record), "settle the reboot request"):
            return
        logger.info(
            "Reboot request of node %s satisfied: %s (bootID %s -> %s)",
            self.node,
            req.reason,
            req.boot_id,
            view.boot_id,
        )
        self._events.record(
            SATISFIED, f"rebooted as requested: {req.reason} (bootID {req.boot_id} -> {view.boot_id})"
        )
        self._notifier.send(f"Node {self.node} rebooted as requested: {req.reason}")

    def _patch(self, patch: list[dict[str, object]], what: str) -> bool:
        try:
            self._kube.patch_node(self.node, patch, patch_type=JSON_PATCH)
        except errors.KubeError as exc:
            level = logging.INFO if exc.status == 422 else logging.WARNING
            logger.log(level, "Could not %s on node %s (will look again): %s", what, self.node, exc)
            return False
        return True

    # -- status --------------------------------------------------------------------------------------------

    def publish(
        self,
        view: NodeState,
        *,
        step: str,
        reason: str,
        sentinel: bool,
        blocked: str = "",
        blocked_by: str = "",
        window_opens: datetime.datetime | None = None,
        lock_wait: bool = False,
        resume_rolls: bool = False,
        freeze: str = "",
        policy: str = "",
        last_cycle_s: int | None = None,
        now: datetime.datetime,
    ) -> bool:
        """Write ``pykured.dev/status`` if it differs from what the Node carries; ``True`` if written."""
        current = self._published
        if current is None:
            current = view.annotations.get(agentstatus.STATUS_ANNOTATION)
        status = agentstatus.build(
            agentstatus.decode(current),
            version=self.version,
            boot_id=view.boot_id,
            step=step,
            reason=reason,
            sentinel=sentinel,
            request=self.pending.reason if self.pending else None,
            blocked=blocked,
            blocked_by=blocked_by,
            window_opens=window_opens,
            lock_wait=lock_wait,
            resume_rolls=resume_rolls,
            freeze=freeze,
            policy=policy,
            last_cycle_s=last_cycle_s,
            now=now,
        )
        text = agentstatus.encode(status)
        if text == current:
            return False
        patch = {"metadata": {"annotations": {agentstatus.STATUS_ANNOTATION: text}}}
        try:
            self._kube.patch_node(self.node, patch, patch_type=MERGE_PATCH)
        except errors.KubeError as exc:
            logger.debug("could not publish the status of node %s: %s", self.node, exc)
            return False
        self._published = text
        return True
