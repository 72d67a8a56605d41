"""The fleet breaker: how many nodes show a configured condition at once, and the halt when too many do.

An agent whose own Node holds a condition that asks for a reboot looks at the fleet before its node takes a
slot: when more nodes than ``--reboot-condition-fleet-max`` allows show a configured condition
(:func:`pykured.conditions.record.fleet_tripped`), the cause is the cluster's (a bad kernel rolled out, a
storage backend down) and rebooting does not cure it: the agent halts the fleet
(:class:`pykured.halting.fleet.FleetHalt`: added only where no freeze or halt is, so exactly one agent
does) and its node does not reboot.

The agent reads the fleet with what its RBAC grants, ``watch`` on nodes (no ``list``): one watch of every
Node that begins with the current state (``sendInitialEvents``) and is closed once the state is in (the
bookmark marked ``k8s.io/initial-events-end``; an API server without it ends the watch at its short timeout,
after the state it sends first). Only an agent whose node holds a condition reads it, at most once per
:data:`FRESH_SECONDS`: an idle fleet makes no such read. Nor does a frozen or halted fleet (``frozen``): no
node may start a reboot then, and the halt the breaker would add is added only where none is, so the read
could change nothing. In an incident the first halt thus ends the reads (every agent would otherwise read
every Node again at the halt's own news); the condition is held back until the freeze is lifted, and the
first pass after that reads the fleet again.

Fail safe: a fleet that cannot be read (no RBAC for the watch, an API error) is a reason not to reboot for a
condition now, never a reason to: the need waits for a fleet that can be read.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import time
from collections.abc import Callable, Sequence

from pykured.conditions.record import ConditionSpec, fleet_tripped, shows
from pykured.core import errors
from pykured.halting.fleet import FleetHalt
from pykured.kube.api import KubeApi
from pykured.kube.node import NodeView
from pykured.lock.budget import Budget
from pykured.policy.freeze import FreezeRecord

logger = logging.getLogger(__name__)

FRESH_SECONDS = 30.0
"""A look at the fleet stands for this long."""
WATCH_SECONDS = 10
"""The watch's timeout: the state comes first, then the end marker; an older API server ends it here."""
MAX_NODES = 100_000
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
FROZEN = "the fleet is frozen or halted: the fleet breaker looks at the fleet once that is lifted"


@dataclasses.dataclass(frozen=True, slots=True)
class FleetLook:
    """How many nodes show a configured condition, of how many, or why the fleet could not be read."""

    showing: int = 0
    nodes: int = 0
    unreadable: str = ""


def read_fleet(kube: KubeApi, specs: Sequence[ConditionSpec]) -> FleetLook:
    """One watch of every Node from the current state (never raises)."""
    seen: dict[str, bool] = {}
    query = {"sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan"}
    try:
        events = kube.watch("/api/v1/nodes", query=query, timeout_seconds=WATCH_SECONDS)
        try:
            for event in events:
                kind, obj = event.get("type"), event.get("object") or {}
                if not isinstance(obj, dict):
                    continue
                if kind == "ERROR":
                    return FleetLook(
                        unreadable=f"the watch of the nodes failed: {str(obj.get('message'))[:200]}"
                    )
                if kind == "BOOKMARK":
                    annotations = (obj.get("metadata") or {}).get("annotations") or {}
                    if isinstance(annotations, dict) and annotations.get(INITIAL_EVENTS_END) == "true":
                        break
                    continue
                view = NodeView.from_obj(obj)
                if kind == "DELETED":
                    seen.pop(view.name, None)
                elif kind in ("ADDED", "MODIFIED") and view.name:
                    seen[view.name] = shows(specs, view.conditions)
                if len(seen) > MAX_NODES:
                    return FleetLook(unreadable=f"more than {MAX_NODES} nodes")
        finally:
            close = getattr(events, "close", None)
            if close is not None:
                close()
    except errors.KubeError as exc:
        return FleetLook(unreadable=f"cannot watch the nodes: {exc}")
    if not seen:
        return FleetLook(unreadable="no node seen")
    return FleetLook(showing=sum(seen.values()), nodes=len(seen))


class FleetBreaker:
    """``--reboot-condition-fleet-max``: looks at the fleet (at most every :data:`FRESH_SECONDS`) and halts it
    when too many nodes show a configured condition."""

    def __init__(
        self,
        kube: KubeApi,
        *,
        specs: Sequence[ConditionSpec],
        budget: Budget,
        halt: FleetHalt | None,
        frozen: Callable[[datetime.datetime], bool] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``halt``: how the fleet is halted (None: no policy ConfigMap; the nodes then only hold back).
        ``frozen``: whether the policy ConfigMap holds a freeze or a halt in force now (None: there is no
        ConfigMap)."""
        self._kube = kube
        self._specs = tuple(specs)
        self.budget = budget
        self._halt = halt
        self._frozen = frozen
        self._clock = clock
        self._look: tuple[float, FleetLook] | None = None
        self._said = ""

    def holds(self, *, node: str, now: datetime.datetime) -> str:
        """Why this node's condition must not reboot it now ("" when it may): the fleet cannot be read, or
        too many nodes show a configured condition (then the fleet is halted, once), or the fleet is frozen or
        halted (then it is not read)."""
        if self._frozen is not None and self._frozen(now):
            self._look = None  # the first look after the freeze is a new one
            self._say(f"not rebooting for a node condition: {FROZEN}")
            return FROZEN
        look = self._fresh()
        if look.unreadable:
            self._say(f"not rebooting for a node condition: the fleet cannot be read ({look.unreadable})")
            return f"the fleet cannot be read: {look.unreadable}"
        if not fleet_tripped(showing=look.showing, nodes=look.nodes, budget=self.budget):
            self._said = ""
            return ""
        reason = (
            f"{look.showing} of {look.nodes} nodes show a node condition at once "
            f"(--reboot-condition-fleet-max={self.budget}): a cause rebooting does not cure"
        )
        self._say(f"not rebooting for a node condition: {reason}")
        if self._halt is not None:
            record = FreezeRecord(reason=reason, by=self._halt.by, at=now, halted=node)
            message = f"{reason}: no new reboot starts until `pykured unfreeze`"
            try:
                self._halt.halt(record, node=node, message=message, now=now)
            except (errors.KubeError, ValueError) as exc:
                logger.warning("Could not halt the fleet (will try again): %s", exc)
        return reason

    def _fresh(self) -> FleetLook:
        now = self._clock()
        if self._look is None or now - self._look[0] >= FRESH_SECONDS:
            self._look = (now, read_fleet(self._kube, self._specs))
        return self._look[1]

    def _say(self, text: str) -> None:
        if text != self._said:
            logger.warning(text)
            self._said = text
