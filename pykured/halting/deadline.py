"""The halt watch: every agent looks at the lock holders, and one that did not come back halts the fleet.

A node that does not come back from its reboot cannot say so itself, so each agent (and a central FleetLock
server) looks, every few seconds, at the lock holders and their Nodes' ``pykured.dev/*`` memory
(:func:`pykured.policy.halt.overdue`). The first to see a holder past ``--reboot-deadline`` halts the fleet
(:class:`pykured.halting.fleet.FleetHalt`: the halt added to the policy ConfigMap, conditionally, so exactly
one agent does; it logs it, posts a ``RebootHalted`` Event on that node and sends a notification). The halt
stops every new reboot on every path (the agents, FleetLock) until ``pykured unfreeze``, which remembers the
lifted reboot in the ConfigMap's ``halts-lifted``: that reboot does not halt the fleet again. The agent
writes nothing on the node it halted for. ``pykured_halted`` shows it.

Nothing happens while a freeze or halt is already in force, or while the policy ConfigMap cannot be read (the
agent said so at start-up: the halt needs ``update`` on it).
"""

from __future__ import annotations

import datetime
import logging
import threading
from collections.abc import Callable

from pykured.core import errors
from pykured.cycle.state import REBOOT_TRIGGERED_AT_ANNOTATION, NodeState
from pykured.halting.fleet import FleetHalt
from pykured.lock.base import Lock
from pykured.lock.record import UNKNOWN_HOLDER
from pykured.policy import halt as rules
from pykured.policy.document import PolicyMapError
from pykured.policy.source import PolicySource

logger = logging.getLogger(__name__)


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def check_interval(deadline: datetime.timedelta) -> float:
    """How often to look: a quarter of the deadline, between 1 s and 30 s."""
    return min(max(deadline.total_seconds() / 4, 1.0), 30.0)


class HaltWatch:
    """Sets the halt when a lock holder has not come back within the deadline."""

    def __init__(
        self,
        *,
        lock: Lock,
        source: PolicySource,
        deadline: datetime.timedelta,
        halt: FleetHalt,
        clock: Callable[[], datetime.datetime] = _utcnow,
    ) -> None:
        self._kube = halt.kube
        self._lock = lock
        self._source = source
        self.deadline = deadline
        self._halt = halt
        self._clock = clock
        self._last_error = ""

    def halted(self) -> bool:
        """The policy ConfigMap holds a halt (for ``pykured_halted``)."""
        doc = self._source.doc
        return doc is not None and doc.halt is not None

    def find(self, now: datetime.datetime, lifted: tuple[rules.LiftedHalt, ...] = ()) -> rules.Overdue | None:
        """The first lock holder past the deadline whose halt was not lifted (None: all in time)."""
        for entry in self._lock.holders(now_ns=0):  # expired entries too: a TTL does not bring a node back
            if entry.node_id in ("", UNKNOWN_HOLDER):
                continue
            try:
                view = NodeState.from_obj(self._kube.get_node(entry.node_id))
            except errors.NotFoundError:
                continue  # a deleted node frees its slot (pykured.lock.liveness)
            holder = rules.Holder(
                node=entry.node_id,
                reboot_began=view.reboot_triggered_at,
                boot_id=view.boot_id,
                reboot_boot_id=view.reboot_boot_id,
                ready=view.ready,
                halted_for=view.annotations.get(rules.HALTED_FOR_ANNOTATION, ""),
                began_text=view.annotations.get(REBOOT_TRIGGERED_AT_ANNOTATION, ""),
            )
            found = rules.overdue(holder, deadline=self.deadline, now=now, lifted=lifted)
            if found is not None:
                return found
        return None

    def check(self) -> rules.Overdue | None:
        """One look: sets the halt and says so when this agent is the one that halts; what it halted for."""
        doc = self._source.doc
        now = self._clock()
        if doc is None or self._source.forbidden is not None:
            return None
        if doc.in_force(now) is not None:
            return None
        found = self.find(now, doc.lifted)
        if found is None:
            return None
        record = rules.halt_record(found, deadline=self.deadline, by=self._halt.by, now=now)
        began_text = found.began.astimezone(datetime.UTC).isoformat(timespec="seconds")
        began = began_text.replace("+00:00", "Z")
        message = (
            f"{record.reason} (reboot began {began}; {found.what}): no new reboot starts until "
            "`pykured unfreeze`"
        )
        if not self._halt.halt(record, node=found.node, message=message, now=now):
            return None
        return found

    def run(self, stopping: threading.Event) -> None:
        """Look every :func:`check_interval` seconds until ``stopping``; errors are logged and retried."""
        interval = check_interval(self.deadline)
        while not stopping.wait(interval):
            try:
                self.check()
                self._last_error = ""
            except (errors.PykuredError, PolicyMapError) as exc:
                if str(exc) != self._last_error:
                    logger.warning("Checking for nodes that did not come back failed, retrying: %s", exc)
                self._last_error = str(exc)
            except Exception as exc:  # the watch never dies: it says so (with the traceback once) and goes on
                text = f"{type(exc).__name__}: {exc}"
                logger.error("Checking for nodes that did not come back failed unexpectedly, retrying: %s",
                             text, exc_info=exc if text != self._last_error else None)  # fmt: skip
                self._last_error = text
