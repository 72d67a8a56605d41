"""The freeze (``pykured freeze``) and the halt: no new reboot anywhere while the policy ConfigMap holds one.

Both are :class:`~pykured.policy.freeze.FreezeRecord` records in the ConfigMap that
:class:`~pykured.policy.source.PolicySource` watches (``--policy-configmap``): the operator's ``freeze`` while
it is active, an agent's ``halt`` while it is there at all (a garbled one too). Every new reboot is held
(``Reboot blocked: frozen by …`` / ``halted by …``); a reboot already under way finishes. Until the ConfigMap
was read once, no reboot may start (fail closed: ``policy ConfigMap <ns>/<name> not read yet``). The blocker
is the same for every node: built once, when the agent reads the ConfigMap.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING

from pykured.blockers.options import FleetInputs
from pykured.core.model import Reason

if TYPE_CHECKING:
    from pykured.policy.source import PolicySource


class FreezeBlocker:
    """Blocks every new reboot while the policy ConfigMap holds a halt or an active freeze (or is unread)."""

    def __init__(self, source: PolicySource) -> None:
        self.source = source

    def check(self, *, now: datetime.datetime) -> Reason | None:
        doc = self.source.doc
        if doc is None:
            return Reason("policy", f"policy ConfigMap {self.source.where} not read yet")
        held = doc.in_force(now)
        if held is not None:
            return Reason("freeze", held.describe())
        return None

    def frozen(self, now: datetime.datetime) -> bool:
        doc = self.source.doc
        return doc is not None and doc.in_force(now) is not None


def build(inputs: FleetInputs) -> FreezeBlocker | None:
    """The blocker when the agent reads a policy ConfigMap."""
    return FreezeBlocker(inputs.policy) if inputs.policy is not None else None
