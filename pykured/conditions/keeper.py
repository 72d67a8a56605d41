"""The agent's side of reboots from Node conditions: is a condition a need this pass; the breakers' writes.

Concept: the daemon asks once per pass "does a condition make this node need a reboot?" (:meth:`observe`), as
it asks the reboot request's keeper; the answer joins the sentinel and the request as one need
(:class:`pykured.cycle.decide.Trigger` ``CONDITION``), which goes through the same decision, lock, window,
blockers, freeze, drain and status. The rules are pure (:mod:`pykured.conditions.record`); this adapter reads
the boot's time once, says what it finds (a log line, the ``RebootConditionHeld`` Event, a notification,
``pykured_reboot_condition``), and does the breakers' writes:

* before the drain of a cycle a condition asked for, the reboot is counted on the Node
  (:meth:`count`, ``pykured.dev/condition-reboots``; one entry per boot, so a step repeated after a
  restart counts once);
* a need beyond ``--reboot-condition-max`` within ``--reboot-condition-period`` quarantines the node
  (:mod:`pykured.policy.quarantine`: the record, the ``Quarantined`` Event, a notification; the quarantine
  blocker then holds every new reboot of the node until ``pykured unquarantine``), and is no need;
* a need while too many nodes show a configured condition halts the fleet
  (:class:`pykured.conditions.fleet.FleetBreaker`), and is no need.

Invariants:
* A breaker is asked only when the node is idle (no cycle of its own under way, not quarantined): a cycle
  already begun finishes as it would.
* Never raises into the daemon but for :meth:`count`, whose failure fails the step (no uncounted reboot).
* A condition list that cannot be read is no need, with one log line while it stays so.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
from collections.abc import Callable, Mapping
from typing import Any

from pykured.conditions import record as rules
from pykured.conditions.fleet import FleetBreaker
from pykured.core import errors
from pykured.cycle.state import NodeState
from pykured.cycle.steps import Hands
from pykured.kube.api import KubeApi
from pykured.kube.node import NodeView
from pykured.metrics import Metrics
from pykured.policy.quarantine import MERGE_PATCH, QuarantineRecord, quarantine_record

logger = logging.getLogger(__name__)

HELD = "RebootConditionHeld"
"""The Event of a condition that became a need."""


@dataclasses.dataclass(frozen=True, slots=True)
class ConditionSettings:
    """``--reboot-condition`` and the per-node breaker."""

    specs: tuple[rules.ConditionSpec, ...]
    max_reboots: int = 2
    period: datetime.timedelta = datetime.timedelta(hours=24)


@dataclasses.dataclass(frozen=True, slots=True)
class Found:
    """This pass's answer: the need (``None``: none), and when to look again for one still short of its
    ``FOR``."""

    need: rules.Held | None = None
    due: datetime.datetime | None = None
    held: rules.Held | None = None
    """The condition that is a need before the breakers are asked (what the status names)."""
    held_back: str = ""
    """Why a condition that is a need does not count this pass (a breaker; "" when none holds it)."""


class ConditionKeeper:
    """Reads one node's conditions for ``--reboot-condition`` and does the breakers' writes."""

    def __init__(
        self,
        kube: KubeApi,
        hands: Hands,
        *,
        node: str,
        settings: ConditionSettings,
        booted: Callable[[], datetime.datetime | None],
        metrics: Metrics,
        fleet: FleetBreaker | None = None,
    ) -> None:
        """``booted``: this machine's boot (:func:`pykured.host.boot.boot_time`), read once, at the first
        look."""
        self._kube = kube
        self._hands = hands
        self.node = node
        self.settings = settings
        self._booted_source = booted
        self._booted: tuple[datetime.datetime | None] | None = None
        self._metrics = metrics
        self._fleet = fleet
        self._said_unreadable = ""
        self._announced: tuple[str, str] | None = None
        self._seen: tuple[object, ...] | None = None
        self.pending: rules.Held | None = None
        """The condition that is this node's need, as of the last pass."""
        self.last = Found()
        """The last pass's answer (what the status publishes: the condition, and a breaker holding it)."""

    @property
    def booted(self) -> datetime.datetime | None:
        if self._booted is None:
            self._booted = (self._booted_source(),)
            logger.info("Reboot conditions: %s (since the boot at %s)",
                        ", ".join(str(s) for s in self.settings.specs), self._booted[0])  # fmt: skip
        return self._booted[0]

    def wants(self, node: NodeState, now: datetime.datetime) -> bool:
        """Does a condition make the node need a reboot now, before the breakers are asked (then the pass
        reads the lock)?"""
        held = rules.held(self.settings.specs, node.conditions, booted=self.booted)
        return rules.need(held, now) is not None

    def see(self, node: Mapping[str, Any]) -> bool:
        """A fresh copy of the Node (from its watch): did its configured conditions change (then the loop
        looks at once)?"""
        view = NodeView.from_obj(node)
        types = {spec.type for spec in self.settings.specs}
        key = (
            view.conditions_unreadable,
            *((c.type, c.status, c.since) for c in view.conditions if c.type in types),
        )
        changed = self._seen is not None and key != self._seen
        self._seen = key
        return changed

    def observe(self, node: NodeState, now: datetime.datetime) -> Found:
        """The condition that makes this node need a reboot now, if one does (the breakers asked)."""
        found = self.last = self._found(node, now)
        self.pending = found.need
        self._metrics.set_reboot_condition(found.need.spec.type if found.need else None)
        return found

    def _found(self, node: NodeState, now: datetime.datetime) -> Found:
        if node.conditions_unreadable:
            if node.conditions_unreadable != self._said_unreadable:
                logger.warning("The conditions of node %s cannot be read, none is a need: %s",
                               self.node, node.conditions_unreadable)  # fmt: skip
                self._said_unreadable = node.conditions_unreadable
            return Found()
        self._said_unreadable = ""
        held = rules.held(self.settings.specs, node.conditions, booted=self.booted)
        need, due = rules.need(held, now), rules.next_due(held, now)
        if need is None:
            self._announced = None
            return Found(due=due)
        idle = not (node.holding or node.has_memory or node.fleetlock_id is not None)
        if idle and quarantine_record(node.annotations) is None:
            why = self._held_back(node, need, now)
            if why:
                return Found(due=due, held=need, held_back=why)
        self._announce(need)
        return Found(need=need, due=due, held=need)

    def _held_back(self, node: NodeState, need: rules.Held, now: datetime.datetime) -> str:
        """Ask the breakers: the fleet's first (a cluster-wide cause), then the node's count."""
        if self._fleet is not None:
            why = self._fleet.holds(node=self.node, now=now)
            if why:
                return why
        count = rules.read_count(node.annotations.get(rules.COUNT_ANNOTATION))
        why = rules.tripped(
            count, now=now, period=self.settings.period, limit=self.settings.max_reboots, boot=node.boot_id
        )
        if why:
            self._quarantine(node, need, why, now)
        return why

    def _quarantine(self, node: NodeState, need: rules.Held, why: str, now: datetime.datetime) -> None:
        """The per-node breaker: the node is quarantined (not cordoned, not drained), and said so once."""
        record = QuarantineRecord.make(
            reason=f"node condition {need.spec.type} asked for a reboot again: {why}", at=now, pods=(),
            cordoned=False,
        )  # fmt: skip
        try:
            self._hands.book.quarantine(record)
        except errors.KubeError as exc:
            logger.warning("Could not quarantine node %s (will try again): %s", self.node, exc)
            return
        message = f"{record.describe()} (pykured unquarantine {self.node} ends it)"
        logger.error("Node %s quarantined: %s", self.node, message)
        self._hands.events.record("Quarantined", message, warning=True, now=now)
        self._hands.notifier.send(f"Node {self.node} quarantined: {message}")
        self._hands.observers.quarantined(self.node)

    def _announce(self, need: rules.Held) -> None:
        key = (need.spec.type, need.describe())
        if key == self._announced:
            return
        self._announced = key
        text = need.describe()
        logger.info("Reboot required by node condition on node %s: %s", self.node, text)
        self._hands.events.record(HELD, f"reboot required by node condition {text}")
        self._hands.notifier.send(f"Node {self.node} needs a reboot: node condition {text}")

    def count(self, node: NodeState, now: datetime.datetime) -> None:
        """Count the reboot a condition asked for on the Node before its drain (raises
        :class:`~pykured.core.errors.KubeError`: the step fails and is tried again, never uncounted)."""
        need = self.pending
        if need is None:
            return
        count = rules.read_count(node.annotations.get(rules.COUNT_ANNOTATION))
        if count.unreadable:
            count = rules.RebootCount()  # the breaker quarantined on it, or an operator let the node go
        updated = count.with_reboot(boot=node.boot_id, at=now, condition=need.spec.type)
        patch = {"metadata": {"annotations": {rules.COUNT_ANNOTATION: updated.to_json()}}}
        self._kube.patch_node(self.node, patch, patch_type=MERGE_PATCH)
