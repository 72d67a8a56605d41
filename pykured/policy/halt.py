"""Halting the fleet: a node that did not come back from its reboot in time stops every new reboot.

``--reboot-deadline D``: a node whose reboot began (``pykured.dev/reboot-triggered-at``) more than ``D`` ago
and which still holds its lock slot has not come back — it is still on the boot it was rebooted from, or not
Ready, or its after-reboot hooks and settle gates have not passed (a node releases its slot only after all
of them). Any agent that sees such a holder sets the freeze with the reason
``node X did not come back within D`` and the node's name in ``halted`` (:class:`FreezeRecord`); the freeze
stops every path that starts a reboot (each agent, FleetLock), and only ``pykured unfreeze`` lifts it.

The halting agent also marks the node (``pykured.dev/halted-for`` = the reboot's start), so once an operator
unfreezes, the same overdue reboot does not halt the fleet again (a new reboot of that node may).

Pure: the facts and ``now`` are passed in; :mod:`pykured.halting.deadline` reads them and writes the freeze.
"""

from __future__ import annotations

import dataclasses
import datetime

from pykured.gocompat.goflags import format_duration
from pykured.kube.node import PYKURED_PREFIX
from pykured.policy.freeze import FreezeRecord

HALTED_FOR_ANNOTATION = PYKURED_PREFIX + "halted-for"


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


def overdue(holder: Holder, *, deadline: datetime.timedelta, now: datetime.datetime) -> Overdue | None:
    """The holder, if its reboot began ``deadline`` or more ago (a holder has not finished its cycle)."""
    if deadline <= datetime.timedelta(0) or holder.reboot_began is None:
        return None
    if now - holder.reboot_began < deadline:
        return None
    if holder.halted_for and holder.halted_for == holder.began_text:
        return None  # this reboot halted the fleet once; an operator lifted the halt
    if holder.reboot_boot_id and holder.boot_id == holder.reboot_boot_id:
        what = "still on the boot it was rebooted from"
    elif not holder.ready:
        what = "not Ready"
    else:
        what = "its after-reboot hooks or settle gates have not passed"
    return Overdue(holder.node, holder.reboot_began, what)


def reason(node: str, deadline: datetime.timedelta) -> str:
    """The freeze reason of a halt (the wording operators and alerts match)."""
    return f"node {node} did not come back within {format_deadline(deadline)}"


def halt_record(
    found: Overdue, *, deadline: datetime.timedelta, by: str, now: datetime.datetime
) -> FreezeRecord:
    """The freeze a halt writes (no ``until``: only ``pykured unfreeze`` lifts it)."""
    return FreezeRecord(reason=reason(found.node, deadline), by=by, at=now, halted=found.node)
