"""Halting the fleet: a node that did not come back from its reboot in time stops every new reboot.

``--reboot-deadline D``: a node whose reboot began (``pykured.dev/reboot-triggered-at``) more than ``D`` ago
and which still holds its lock slot has not come back — it is still on the boot it was rebooted from, or not
Ready, or its after-reboot hooks and settle gates have not passed (a node releases its slot only after all
of them). Any agent that sees such a holder adds the halt, a freeze record with the reason
``node X did not come back within D``, the node's name in ``halted`` and the reboot's start in ``began``
(:class:`FreezeRecord`) under the policy ConfigMap's ``halt`` key; the halt stops every path that starts a
reboot (each agent, FleetLock), and only ``pykured unfreeze`` lifts it.

``pykured unfreeze`` (an operator's credentials) moves the lifted halt's node and reboot start into
``halts-lifted`` (:class:`LiftedHalt`, the newest :data:`MAX_LIFTED`), which the agents read and never
write: the same overdue reboot does not halt the fleet again (a new reboot of that node may). No agent writes
another node for it. The ``pykured.dev/halted-for`` mark older agents put on the node is still honoured.

Pure: the facts and ``now`` are passed in; :mod:`pykured.halting.deadline` reads them and writes the halt.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
from collections.abc import Iterable

from pykured.core import boundedjson
from pykured.gocompat.goflags import format_duration
from pykured.kube.node import PYKURED_PREFIX
from pykured.policy.freeze import FreezeRecord

HALTED_FOR_ANNOTATION = PYKURED_PREFIX + "halted-for"
"""Read only: older agents marked the node a halt was set for with its reboot's start."""
MAX_LIFTED = 32
"""How many lifted halts ``halts-lifted`` keeps (the newest)."""
MAX_LIFTED_CHARS = 16 * 1024


def format_deadline(deadline: datetime.timedelta) -> str:
    """Go's spelling of a duration (``30m0s``), as the flag shows it."""
    return format_duration(round(deadline.total_seconds() * 1_000_000_000))


@dataclasses.dataclass(frozen=True, slots=True)
class Overdue:
    """A lock holder that did not come back in time."""

    node: str
    began: datetime.datetime
    what: str
    """What is missing: ``still on its old boot``, ``not Ready``, or ``after-reboot gates not passed``."""
    began_text: str = ""
    """The reboot's start as the node recorded it (what a lifted halt remembers)."""


@dataclasses.dataclass(frozen=True, slots=True)
class LiftedHalt:
    """A halt ``pykured unfreeze`` lifted: the node's reboot that began at ``began`` halts no more."""

    node: str
    began: str
    """``pykured.dev/reboot-triggered-at`` as the node recorded it."""


def parse_lifted(text: str | None) -> tuple[LiftedHalt, ...]:
    """``halts-lifted`` (a JSON list of ``{"node", "began"}``); never raises: what does not parse is none."""
    if not text or len(text) > MAX_LIFTED_CHARS:
        return ()
    try:
        data = boundedjson.loads(text)
    except boundedjson.UnreadableJSON:
        return ()
    if not isinstance(data, list):
        return ()
    found = []
    for item in data:
        if isinstance(item, dict):
            node, began = item.get("node"), item.get("began")
            if isinstance(node, str) and isinstance(began, str) and node and began:
                found.append(LiftedHalt(node, began))
    return tuple(found[-MAX_LIFTED:])


def lifted_json(lifted: Iterable[LiftedHalt]) -> str:
    """``halts-lifted``'s value: the newest :data:`MAX_LIFTED`, oldest first."""
    kept = list(lifted)[-MAX_LIFTED:]
    return json.dumps([{"node": x.node, "began": x.began} for x in kept], separators=(",", ":"))


def lifting(lifted: Iterable[LiftedHalt], halt: FreezeRecord | None) -> tuple[LiftedHalt, ...] | None:
    """``lifted`` with the halt being lifted added; None when it names no reboot (nothing to remember)."""
    if halt is None or not halt.halted or not halt.began:
        return None
    entry = LiftedHalt(halt.halted, halt.began)
    kept = [x for x in lifted if x != entry]
    return (*kept, entry)[-MAX_LIFTED:]


@dataclasses.dataclass(frozen=True, slots=True)
class Holder:
    """What the lock and the Node say about one lock holder."""

    node: str
    reboot_began: datetime.datetime | None
    """``pykured.dev/reboot-triggered-at`` (None: its reboot has not begun)."""
    boot_id: str
    reboot_boot_id: str | None
    ready: bool
    halted_for: str = ""
    """``pykured.dev/halted-for``: the reboot start a halt was already set for ("" if none)."""
    began_text: str = ""
    """``pykured.dev/reboot-triggered-at`` as stored (compared with ``halted_for``)."""


def overdue(
    holder: Holder,
    *,
    deadline: datetime.timedelta,
    now: datetime.datetime,
    lifted: Iterable[LiftedHalt] = (),
) -> Overdue | None:
    """The holder, if its reboot began ``deadline`` or more ago (a holder has not finished its cycle) and no
    lifted halt names that reboot."""
    if deadline <= datetime.timedelta(0) or holder.reboot_began is None:
        return None
    if now - holder.reboot_began < deadline:
        return None
    if holder.halted_for and holder.halted_for == holder.began_text:
        return None  # this reboot halted the fleet once (an older agent's mark); an operator lifted the halt
    if holder.began_text and LiftedHalt(holder.node, holder.began_text) in set(lifted):
        return None  # this reboot halted the fleet once; an operator lifted the halt
    if holder.reboot_boot_id and holder.boot_id == holder.reboot_boot_id:
        what = "still on the boot it was rebooted from"
    elif not holder.ready:
        what = "not Ready"
    else:
        what = "its after-reboot hooks or settle gates have not passed"
    return Overdue(holder.node, holder.reboot_began, what, holder.began_text)


def reason(node: str, deadline: datetime.timedelta) -> str:
    """The freeze reason of a halt (the wording operators and alerts match)."""
    return f"node {node} did not come back within {format_deadline(deadline)}"


def halt_record(
    found: Overdue, *, deadline: datetime.timedelta, by: str, now: datetime.datetime
) -> FreezeRecord:
    """The halt written (no ``until``: only ``pykured unfreeze`` lifts it; ``began`` names the reboot)."""
    return FreezeRecord(
        reason=reason(found.node, deadline), by=by, at=now, halted=found.node, began=found.began_text
    )
