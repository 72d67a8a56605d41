"""The quarantine: a node whose drain would not finish, left cordoned and not rebooted, out of the roll.

``--drain-escalation=…,quarantine`` ends a drain that outlived ``--drain-timeout`` (and every escalation
step before it) this way: the node stays cordoned, is not rebooted, and releases the lock so the roll goes
on; its Node carries ``pykured.dev/quarantined``, a :class:`QuarantineRecord` as JSON (why, the pods that
would not leave, when, and whether pykured's cordon is the one that holds the node). While the record is on
the Node the node takes no lock again (:class:`pykured.blockers.quarantine.QuarantineBlocker`: ``Reboot
blocked: quarantined …``, on every path: the agent and FleetLock). ``pykured unquarantine NODE`` removes the
record and uncordons the node if pykured cordoned it.

Fail safe: the record is read within bounds (:mod:`pykured.core.boundedjson`) and totally; any value under
the key that does not parse (garbled, too large, wrong types, empty) is a quarantine that says so
(:attr:`QuarantineRecord.unreadable`): someone meant to keep the node out, and a garbled record never lets
it back in. Such a record never uncordons the node (whose cordon it was cannot be known).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from pykured.core import boundedjson
from pykured.core.printable import bounded_names, cut, one_line
from pykured.core.times import format_rfc3339, parse_rfc3339
from pykured.kube.node import PYKURED_PREFIX

if TYPE_CHECKING:
    from pykured.kube.api import KubeApi

QUARANTINED_ANNOTATION: Final = PYKURED_PREFIX + "quarantined"
MERGE_PATCH: Final = "application/merge-patch+json"
MAX_REASON: Final = 300
"""The reason is cut to this many characters (an annotation, not a log)."""
MAX_PODS: Final = 20
"""At most this many pod names are kept; the rest are counted (``more``)."""
MAX_POD_NAME: Final = 320
"""A pod's ``namespace/name`` is at most 63 + 1 + 253 characters; a longer one is cut."""
MAX_RECORD: Final = 16 * 1024
"""A record pykured writes is well under this; a longer value reads as unreadable."""
EPOCH: Final = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


@dataclasses.dataclass(frozen=True, slots=True)
class QuarantineRecord:
    """Why and since when a node is quarantined, and the pods that would not leave it."""

    reason: str
    at: datetime.datetime
    pods: tuple[str, ...] = ()
    """``namespace/name`` of the pods still on the node (at most :data:`MAX_PODS`)."""
    more: int = 0
    """How many more pods would not leave than :attr:`pods` names."""
    cordoned: bool = False
    """pykured cordoned the node (it was schedulable before the cycle): ``unquarantine`` uncordons it."""
    unreadable: str = ""
    """Why the record on the Node could not be read ("" when it could)."""

    @classmethod
    def make(
        cls, *, reason: str, at: datetime.datetime, pods: Sequence[str], cordoned: bool
    ) -> QuarantineRecord:
        """A new record, bounded: the reason and every pod name cut, at most :data:`MAX_PODS` names."""
        kept = tuple(cut(p, MAX_POD_NAME) for p in pods[:MAX_PODS])
        return cls(cut(reason, MAX_REASON), at, kept, max(0, len(pods) - len(kept)), cordoned)

    @classmethod
    def garbled(cls, why: str) -> QuarantineRecord:
        """A record that cannot be read: a quarantine all the same (fail safe)."""
        return cls(reason="", at=EPOCH, unreadable=why)

    def to_json(self) -> str:
        body: dict[str, Any] = {"reason": self.reason, "at": format_rfc3339(self.at), "pods": list(self.pods)}
        if self.more:
            body["more"] = self.more
        body["cordoned"] = self.cordoned
        return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> QuarantineRecord:
        """Total: a record, or :meth:`garbled` saying what is wrong with it."""
        try:
            data = boundedjson.loads(text, max_chars=MAX_RECORD)
        except boundedjson.UnreadableJSON as exc:
            return cls.garbled(str(exc))
        problem = _problem(data)
        if problem:
            return cls.garbled(problem)
        return cls(
            cut(data["reason"], MAX_REASON),
            parse_rfc3339(data["at"]) or EPOCH,
            tuple(cut(p, MAX_POD_NAME) for p in data.get("pods", [])),
            data.get("more", 0),
            data.get("cordoned", False),
        )

    def describe(self) -> str:
        """``quarantined at …: why (pods that would not leave: …)``, one line."""
        if self.unreadable:
            return (
                f"quarantined: the quarantine record cannot be read ({self.unreadable}); it holds until "
                "pykured unquarantine"
            )
        names = bounded_names(self.pods, limit=5, uncounted=self.more)
        stuck = f" (pods that would not leave: {names})" if self.pods or self.more else ""
        return one_line(f"quarantined at {format_rfc3339(self.at)}: {self.reason}{stuck}")


def _problem(data: Any) -> str:
    """What is wrong with a decoded record ("" when nothing is)."""
    if not isinstance(data, dict):
        return "not a JSON object"
    at, pods, more = data.get("at"), data.get("pods", []), data.get("more", 0)
    problems = (
        (not isinstance(data.get("reason"), str), "reason must be a string"),
        (not isinstance(at, str) or parse_rfc3339(at) is None, "at must be an RFC 3339 time"),
        (
            not isinstance(pods, list) or len(pods) > MAX_PODS or not all(isinstance(p, str) for p in pods),
            f"pods must be a list of at most {MAX_PODS} names",
        ),
        (not isinstance(more, int) or isinstance(more, bool) or more < 0, "more must be a count"),
        (not isinstance(data.get("cordoned", False), bool), "cordoned must be true or false"),
    )
    return next((why for bad, why in problems if bad), "")


def quarantine_record(annotations: Mapping[str, str]) -> QuarantineRecord | None:
    """The quarantine on a Node (None: none). Any value under the key is a quarantine: a garbled one too."""
    if QUARANTINED_ANNOTATION not in annotations:
        return None
    text = annotations[QUARANTINED_ANNOTATION]
    if not isinstance(text, str) or not text.strip():
        return QuarantineRecord.garbled("empty")
    return QuarantineRecord.from_json(text)


def set_quarantine(kube: KubeApi, node: str, record: QuarantineRecord | None) -> None:
    """Write (or, with None, remove) the quarantine on ``node`` (raises
    :class:`~pykured.core.errors.KubeError`)."""
    value = record.to_json() if record is not None else None
    kube.patch_node(
        node, {"metadata": {"annotations": {QUARANTINED_ANNOTATION: value}}}, patch_type=MERGE_PATCH
    )
