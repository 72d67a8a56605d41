"""The one question every blocker answers: may this node take a slot now?

Mirrors kured's ``pkg/blockers``. A :class:`Blocker` answers ``check(now=...) -> Reason | None`` before a
node takes the lock: ``None`` lets it go, a :class:`~pykured.core.model.Reason` holds it back for this pass.
The drivers (the daemon, FleetLock) ask them in their declared order (:mod:`pykured.blockers.registry`) with
:func:`first_block`, which stops at the first block; the daemon logs ``Reboot blocked: <reason.message>``
and skips the iteration. Errors block too (fail safe).

Not a :class:`~pykured.gates.phase.CycleGate`: a gate is what the lock holder waits for inside its own
cycle, evaluated on the Node object it has just read and bounded by its phase's timeout; a blocker is asked
before any slot is taken, reads what it needs itself and never times out.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from pykured.core.model import Reason

if TYPE_CHECKING:
    from pykured.kube.api import KubeApi


class Blocker(Protocol):
    """One reason not to reboot; ``None`` means "not blocked"."""

    def check(self, *, now: datetime.datetime) -> Reason | None: ...


def first_block(blockers: Iterable[Blocker], *, now: datetime.datetime) -> Reason | None:
    """kured's ``RebootBlocked``: ask each blocker in order and stop at the first block."""
    for blocker in blockers:
        reason = blocker.check(now=now)
        if reason is not None:
            return reason
    return None


@dataclass(frozen=True)
class NodeMarks:
    """A Node's labels and annotations as a node's blocker reads them: string maps. A key whose value is not a
    string stays, with an empty value (a garbled mark still marks: fail safe); a key that is not a string,
    or a map that is not one, is dropped."""

    labels: dict[str, str]
    annotations: dict[str, str]


def _string_map(value: object) -> dict[str, str]:
    if not isinstance(value, dict):
        return {}
    return {k: v if isinstance(v, str) else "" for k, v in value.items() if isinstance(k, str)}


def read_node_marks(kube: KubeApi, node: str, read: Callable[[], dict[str, Any]] | None) -> NodeMarks:
    """What a node's blocker reads of its Node: by ``read`` (the agent's own: its watched copy, or the GET its
    pass has just made), else a GET. A garbled object reads as one without marks; a failed read raises
    :class:`~pykured.core.errors.KubeError` (the blocker then blocks: fail safe)."""
    obj = read() if read is not None else kube.get_node(node)
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    if not isinstance(metadata, dict):
        return NodeMarks({}, {})
    return NodeMarks(_string_map(metadata.get("labels")), _string_map(metadata.get("annotations")))
