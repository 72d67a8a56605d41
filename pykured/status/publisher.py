"""Publishing what an agent says about itself: ``pykured.dev/status`` on its own Node, for ``pykured status``.

Concept: :mod:`pykured.status.agent` builds and encodes the record (pure); this adapter writes it with one
merge patch, only when its text changed, so an idle agent writes nothing. The same patch carries the roll's
own record (:mod:`pykured.roll.record`, ``pykured.dev/roll``: the status's ``lastReboot`` and
``waitingSince``), which the roll's order reads instead of the status.

Invariants:
* Never raises into the daemon: an API failure is logged at debug level and the next pass tries again.
* ``pykured.dev/status`` is written only when its text changes (no timestamps that move by themselves).
* The drain's latest blocker (:meth:`StatusPublisher.drain_blocked`) is published at once, from the drain's
  threads while the pass that drains is still running: the published status with only that field changed.
  One lock orders these writes with the pass's own.
* The drain's progress (:meth:`StatusPublisher.drain_progress`, paced by :mod:`pykured.status.drainwatch`)
  is published the same way, carried into every later write, and taken out when the drain ends. On a Node
  no agent publishes a status for (a FleetLock server drains a Zincati node), the record carries only the
  drain and is removed with it; only an unreadable Node (a failed GET) is never written over.
* One publisher per node in a process (:class:`StatusPublishers`): the daemon and a node-local FleetLock
  server write the same node's record through the same one.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import threading

from pykured.core import errors
from pykured.cycle.state import NodeState
from pykured.drain.progress import DrainProgress
from pykured.kube.api import KubeApi
from pykured.kube.client import MERGE_PATCH
from pykured.roll import record as rollrecord
from pykured.status import agent as agentstatus

logger = logging.getLogger(__name__)


class StatusPublisher:
    """Writes one agent's status on its Node when it changed."""

    def __init__(self, kube: KubeApi, *, node: str, version: str) -> None:
        self._kube = kube
        self.node = node
        self.version = version
        self._published: str | None = None
        self._status: agentstatus.AgentStatus | None = None
        self._drain_blocked_by = ""
        self._drain: DrainProgress | None = None
        self._lock = threading.Lock()

    @property
    def drain_blocked_by(self) -> str:
        """The drain blocker the status carries (kept from pass to pass until cleared)."""
        return self._drain_blocked_by

    def drain_blocked(self, text: str) -> bool:
        """The drain's latest blocker (``""``: it completed): published now; ``True`` if written.

        Before this agent's first pass published a status (a drain resumed after a restart), it is written
        over the status the Node carries; without one it is only kept for the pass's own publication."""
        with self._lock:
            self._drain_blocked_by = text
            if self._status is None:
                self._status = self._carried()[1]
            if self._status is None or self._status.drain_blocked_by == text:
                return False
            return self._write(dataclasses.replace(self._status, drain_blocked_by=text), self._published)

    def drain_progress(self, value: DrainProgress | None) -> bool:
        """The running drain's progress (``None``: it ended): published now; ``True`` if written.

        Over the status this agent published, else the one the Node carries, else (no agent publishes one
        for this node) a record of the drain alone; nothing when the Node cannot be read."""
        with self._lock:
            self._drain = value
            status = self._status
            if status is None:
                read, status = self._carried()
                if not read:
                    return False
            base = status if status is not None else agentstatus.AgentStatus()
            if base.drain == value and status is not None:
                return False
            return self._write(dataclasses.replace(base, drain=value), self._published)

    def publish(self, view: NodeState, status: agentstatus.AgentStatus, *, now: datetime.datetime) -> bool:
        """Write ``pykured.dev/status`` if it differs from what the Node carries; ``True`` if written.

        ``status`` is what this pass says; the publisher adds its version, the Node's bootID and the drain
        blocker, and :func:`~pykured.status.agent.build` what carries over from the published status. The
        drain blocker is carried over while the node needs a reboot and dropped when it needs none."""
        with self._lock:
            # What the Node carries, as this pass read it (the watched copy, which every write of this agent
            # updates): a status someone else overwrote or removed is written again at once, not when this
            # agent's own status next changes.
            current = view.annotations.get(agentstatus.STATUS_ANNOTATION)
            if not status.needs_reboot:
                self._drain_blocked_by = ""
            facts = dataclasses.replace(
                status,
                version=self.version,
                boot_id=view.boot_id,
                drain_blocked_by=self._drain_blocked_by,
                drain=self._drain,
            )
            return self._write(agentstatus.build(self._previous(current), facts, now=now), current)

    def _previous(self, text: str | None) -> agentstatus.AgentStatus | None:
        """The status the Node carries; one warning when it cannot be read (the fresh one replaces it)."""
        if not text:
            return None
        try:
            return agentstatus.parse(text)
        except ValueError as exc:
            logger.warning(
                "The status on node %s cannot be read (%s): publishing a fresh one", self.node, exc
            )
            return None

    def _carried(self) -> tuple[bool, agentstatus.AgentStatus | None]:
        """Whether the Node could be read (one GET), and the status it carries (None: none, or unreadable)."""
        try:
            obj = self._kube.get_node(self.node)
        except errors.KubeError:
            return False, None
        text = ((obj.get("metadata") or {}).get("annotations") or {}).get(agentstatus.STATUS_ANNOTATION)
        self._published = text
        return True, agentstatus.decode(text)

    def _write(self, status: agentstatus.AgentStatus, current: str | None) -> bool:
        """Patch the status unless the Node already carries this text (the caller holds the lock)."""
        self._status = status
        text: str | None = agentstatus.encode(status)
        annotations: dict[str, str | None] = {agentstatus.STATUS_ANNOTATION: text}
        if not status.from_agent:  # a drain's record alone: no roll record; gone with the drain
            text = annotations[agentstatus.STATUS_ANNOTATION] = text if status.drain is not None else None
        else:
            place = rollrecord.Place(last_reboot=status.last_reboot, waiting_since=status.waiting_since)
            annotations[rollrecord.ROLL_ANNOTATION] = rollrecord.encode(place)
        if text == current:
            return False
        patch = {"metadata": {"annotations": annotations}}
        try:
            self._kube.patch_node(self.node, patch, patch_type=MERGE_PATCH)
        except errors.KubeError as exc:
            logger.debug("could not publish the status of node %s: %s", self.node, exc)
            return False
        self._published = text
        return True


class StatusPublishers:
    """The one :class:`StatusPublisher` per node of this process (the daemon's and FleetLock's drains of a
    node write through the same one)."""

    def __init__(self, kube: KubeApi, *, version: str) -> None:
        self._kube = kube
        self.version = version
        self._by_node: dict[str, StatusPublisher] = {}
        self._lock = threading.Lock()

    def for_node(self, node: str) -> StatusPublisher:
        with self._lock:
            found = self._by_node.get(node)
            if found is None:
                found = self._by_node[node] = StatusPublisher(self._kube, node=node, version=self.version)
            return found
