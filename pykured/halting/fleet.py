"""Halting the fleet: the one procedure every halt runs, whatever halts it.

Concept: a halt is a freeze record with the node it halted for (``halted``), added under the policy
ConfigMap's ``halt`` key: it stops every new reboot on every path (the agents, FleetLock) until
``pykured unfreeze``. Two things halt the fleet, a lock holder past
``--reboot-deadline`` (:mod:`pykured.halting.deadline`) and ``--max-failed-drains``
(:mod:`pykured.halting.streak`); both build their freeze record and their message, and
:meth:`FleetHalt.halt` does the rest.

Invariants:
* The halt is added conditionally (:func:`pykured.policy.writer.add_halt`): of several agents halting at
  once exactly one sets it, and only that one logs ``Halting the fleet: …``, posts ``RebootHalted`` on the
  node and sends the notification; a fleet already frozen or halted is left as it is. Nothing else of the
  ConfigMap is written, and nothing on the node.
* Raises what the write raises (:class:`~pykured.core.errors.KubeError`,
  :class:`~pykured.policy.document.PolicyMapError`): each caller decides (retry the watch, or count the
  drain as missed).
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
from collections.abc import Callable

from pykured.kube.api import KubeApi
from pykured.kube.events import EventRecorder
from pykured.notify import Notifier
from pykured.policy import writer
from pykured.policy.freeze import FreezeRecord

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, slots=True)
class FleetHalt:
    """How an agent (or the FleetLock server) halts the fleet: the halt added, then said once."""

    kube: KubeApi
    namespace: str
    configmap: str
    """The policy ConfigMap the halt is added to."""
    me: str
    """The node of the agent that halts ("": the FleetLock server)."""
    notifier: Notifier
    events_for: Callable[[str], EventRecorder]

    @property
    def by(self) -> str:
        """Who halts, as the freeze records it."""
        return f"pykured on {self.me or 'the FleetLock server'}"

    def halt(
        self,
        record: FreezeRecord,
        *,
        node: str,
        message: str,
        now: datetime.datetime,
    ) -> bool:
        """Add ``record`` as the halt unless a freeze or halt is in force; when this write set it, log
        ``message``, post ``RebootHalted`` on ``node`` and notify. Did this call halt the fleet?"""
        where = {"namespace": self.namespace, "name": self.configmap}
        if writer.add_halt(self.kube, record=record, now=now, **where) is not None:
            return False  # already frozen or halted
        logger.error("Halting the fleet: %s", message)
        self.events_for(node).record("RebootHalted", message, warning=True, now=now)
        self.notifier.send(f"pykured halted the fleet: {message}", title="pykured: fleet halted")
        return True
