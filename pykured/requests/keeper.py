"""The agent's side of reboot requests: the few writes on its own Node.

Concept: the daemon asks once per pass "does a request make this node need a reboot?" and this adapter
answers with the pure :func:`pykured.requests.record.classify`, then does the matching writes: it removes a
request that is satisfied (with an Event, a notification and the ``pykured.dev/reboot-request-satisfied``
record) or stale (with a log line). The boots the node is known to have left come from pykured's cycle
memory and from the function the daemon passes in (the boots the agent's published status names,
:func:`pykured.status.agent.reported_boot_ids`).

Invariants:
* Never raises into the daemon: an API failure is logged and the next pass tries again.
* A request is removed with a JSON Patch that ``test``s its text, so a newer request written meanwhile
  survives (HTTP 422 then means: someone changed it, look again next pass).
* Only a request naming the current boot is ever "pending"; everything else is removed, so a stale
  request cannot loop.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pykured.core import errors
from pykured.cycle.state import NodeState
from pykured.kube.api import KubeApi
from pykured.kube.client import JSON_PATCH
from pykured.kube.events import EventRecorder
from pykured.metrics import Metrics
from pykured.notify import Notifier
from pykured.requests import record as rebootrequest

logger = logging.getLogger(__name__)

REQUESTED = "RebootRequested"
SATISFIED = "RebootRequestSatisfied"
STALE = "RebootRequestStale"


ReportedBoots = Callable[[Mapping[str, str]], Iterable[str]]
"""The boots a Node's annotations say it has been on (its agent's published status), from the annotations."""


def _none_reported(annotations: Mapping[str, str]) -> Iterable[str]:
    return ()


def previous_boot_ids(view: NodeState, reported: Iterable[str] = ()) -> tuple[str, ...]:
    """Boots this node is known to have left: pykured's cycle memory and the ``reported`` ones (the agent's
    last status) that are not the current boot."""
    known = [view.reboot_boot_id or "", *reported]
    return tuple(b for b in dict.fromkeys(known) if b and b != view.boot_id)


def classify(
    view: NodeState, now: datetime.datetime, reported: Iterable[str] = ()
) -> rebootrequest.Classified:
    """The node's request, classified for its current boot (pure)."""
    return rebootrequest.classify(
        view.annotations, view.boot_id, previous_boot_ids=previous_boot_ids(view, reported), now=now
    )


class RequestKeeper:
    """Reads and settles one node's reboot request."""

    def __init__(
        self,
        kube: KubeApi,
        *,
        node: str,
        events: EventRecorder,
        notifier: Notifier,
        metrics: Metrics | None = None,
        reported_boots: ReportedBoots = _none_reported,
    ) -> None:
        """``reported_boots``: the boots the Node's annotations say it was on (none by default)."""
        self._kube = kube
        self.node = node
        self._events = events
        self._notifier = notifier
        self._metrics = metrics
        self._reported_boots = reported_boots
        self._mutex = threading.Lock()
        self._looked_at: float | None = None
        """When (monotonic) the loop's pass last classified its copy of the Node (:meth:`observe`)."""
        self._announced: str | None = None
        self.pending: rebootrequest.RebootRequest | None = None
        """The request naming the current boot, as of the last look."""

    # -- requests ------------------------------------------------------------------------------------------

    def observe(self, view: NodeState, now: datetime.datetime) -> rebootrequest.Classified:
        """Classify the request (a read: nothing is written; :meth:`tidy` does the writes)."""
        self._looked_at = time.monotonic()
        found = self._classify(view, now)
        self._remember(found)
        return found

    def tidy(
        self, view: NodeState, found: rebootrequest.Classified, now: datetime.datetime, *, in_cycle: bool
    ) -> None:
        """The writes a classification asks for: remove a stale or invalid request at once, a satisfied one
        unless ``in_cycle`` (the cycle's post-reboot step settles it, see :meth:`settle`)."""
        if found.state in (rebootrequest.RequestState.STALE, rebootrequest.RequestState.INVALID):
            logger.warning("Ignoring and removing the reboot request of node %s: %s", self.node, found.why)
            self._events.record(STALE, f"ignored and removed: {found.why}", warning=True)
            self._remove(found)
        elif found.state is rebootrequest.RequestState.SATISFIED and not in_cycle:
            self._satisfy(view, found, now)

    def settle(self, view: NodeState, now: datetime.datetime) -> None:
        """After a completed reboot: remove the request it satisfied, with an Event and a notification."""
        found = self._classify(view, now)
        if found.state is rebootrequest.RequestState.SATISFIED:
            self._satisfy(view, found, now)

    def see(self, node: Mapping[str, Any], now: datetime.datetime) -> bool:
        """Look at a fresh copy of the Node (from its watch, or a poll): ``True`` if a new request became
        pending."""
        before = self.pending
        found = self._classify(NodeState.from_obj(node), now)
        self._remember(found)
        return found.pending and (before is None or not before.same_intent(found.request or before))

    def poll(self, now: datetime.datetime, *, unless_within: float | None = None) -> bool:
        """Re-read the Node: ``True`` if a new request became pending (never raises). ``unless_within``: no
        read when the loop's pass looked at its copy of the Node within that many seconds."""
        looked = self._looked_at
        if unless_within is not None and looked is not None and time.monotonic() - looked < unless_within:
            return False
        try:
            node = self._kube.get_node(self.node)
        except errors.KubeError as exc:
            logger.debug("cannot read node %s for reboot requests: %s", self.node, exc)
            return False
        return self.see(node, now)

    def _classify(self, view: NodeState, now: datetime.datetime) -> rebootrequest.Classified:
        return classify(view, now, self._reported_boots(view.annotations))

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
