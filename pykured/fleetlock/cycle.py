"""A Zincati node's reboot cycle, read from the lock and the Node: its phase and what to do next. Pure.

Concept: FleetLock keeps no memory of its own. Whether a node is draining, granted, rebooted or waiting for
its release is derived on every request (and every reconcile pass) from the lock entry and the same
``pykured.dev/*`` Node annotations the sentinel-driven daemon uses, plus :data:`FLEETLOCK_ID_ANNOTATION`,
which marks the cycle as FleetLock's (the daemon must leave such a node alone). So a pykured restart at any
step resumes where the cluster says it is, and ``pykured lock status`` sees one truth::

    IDLE ─pre-reboot─▶ DRAINING ─drained─▶ GRANTED ─Zincati reboots─▶ REBOOTED ─steady-state─▶ RELEASING
         (gates, slot, cordon)   (reboot-boot-id = bootID)   (bootID differs)   (uncordon,   (release-after)
                                                                                   labels)     ─▶ IDLE

Invariants:
* A slot is released without a reboot only when Zincati asks (steady-state), never because pykured
  restarted: the bootID decides, not process memory.
* A cycle that is not FleetLock's (``FOREIGN``: the node's own sentinel-driven cycle) is never touched.
* ``reconcile`` releases a rebooted node's slot only after it has been Ready for ``ready_grace`` without a
  steady-state call, and only alerts (never releases) on a finalization that is stuck with the same bootID;
  the lock's TTL, if any, is the only thing that frees such a slot (kured semantics).
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
from typing import Final

from pykured import nodeinfo

FLEETLOCK_ID_ANNOTATION: Final = nodeinfo.FLEETLOCK_ID_ANNOTATION
"""On a Node while FleetLock runs its cycle: the Zincati id that asked (audit; "hands off" for the daemon)."""


class Phase(enum.Enum):
    """Where a node's FleetLock cycle is."""

    IDLE = "idle"
    """No slot and no FleetLock memory on the Node."""
    FOREIGN = "foreign"
    """The node holds a slot for its own sentinel-driven cycle: not FleetLock's business."""
    DRAINING = "draining"
    """FleetLock holds the slot; the drain has not completed yet."""
    GRANTED = "granted"
    """Drained and granted; the node still runs the boot it was granted in."""
    REBOOTED = "rebooted"
    """Granted, and the bootID changed: the update was finalized and the node came back."""
    RELEASING = "releasing"
    """Post-reboot work done; the slot is released once ``release-after`` passes."""
    STALE = "stale"
    """FleetLock memory on the Node but no slot (freed by hand, expired and taken, or a crash mid-way)."""


@dataclasses.dataclass(frozen=True, slots=True)
class CycleView:
    """What the lock and the Node say about one node."""

    holding: bool
    fleetlock: bool
    """The Node carries :data:`FLEETLOCK_ID_ANNOTATION`."""
    boot_id: str = ""
    reboot_boot_id: str | None = None
    granted_at: datetime.datetime | None = None
    release_after: datetime.datetime | None = None
    ready: bool = False
    ready_since: datetime.datetime | None = None
    draining_here: bool = False
    """A drain worker for this node runs in this process."""


def phase_of(view: CycleView) -> Phase:
    """The phase the lock and the Node describe."""
    if not view.holding:
        return Phase.STALE if view.fleetlock else Phase.IDLE
    if not view.fleetlock:
        return Phase.FOREIGN
    if view.release_after is not None:
        return Phase.RELEASING
    if view.reboot_boot_id is None:
        return Phase.DRAINING
    if view.boot_id and view.boot_id != view.reboot_boot_id:
        return Phase.REBOOTED
    return Phase.GRANTED


class Step(enum.Enum):
    """What a reconcile pass does for one node."""

    NOTHING = "nothing"
    RESUME_DRAIN = "resume-drain"
    """Draining, but no worker runs here (pykured restarted): drain again (idempotent)."""
    FINISH_REBOOT = "finish-reboot"
    """Rebooted and Ready for long enough, and no steady-state came: do the post-reboot work and release."""
    RELEASE = "release"
    """The release delay passed."""
    ALERT_STUCK = "alert-stuck"
    """Granted long ago and the bootID never changed: finalization is stuck (inhibitor, rpm-ostree#4861)."""
    CLEANUP = "cleanup"
    """FleetLock memory without a slot: uncordon if we cordoned, clear the memory."""


@dataclasses.dataclass(frozen=True, slots=True)
class Timing:
    """The reconcile thresholds."""

    ready_grace: datetime.timedelta = datetime.timedelta(minutes=10)
    """How long a rebooted node must be Ready before its slot is released without a steady-state call."""
    stuck_after: datetime.timedelta = datetime.timedelta(hours=1)
    """How long after the grant an unchanged bootID counts as a stuck finalization."""


DEFAULT_TIMING: Final = Timing()


def reconcile(view: CycleView, *, timing: Timing, now: datetime.datetime) -> Step:
    """The reconcile step for one node (pure)."""
    phase = phase_of(view)
    if phase is Phase.STALE:
        return Step.NOTHING if view.draining_here else Step.CLEANUP
    if phase is Phase.RELEASING:
        assert view.release_after is not None
        return Step.RELEASE if now >= view.release_after else Step.NOTHING
    if phase is Phase.DRAINING:
        return Step.NOTHING if view.draining_here else Step.RESUME_DRAIN
    if phase is Phase.REBOOTED:
        if view.ready and view.ready_since is not None and now - view.ready_since >= timing.ready_grace:
            return Step.FINISH_REBOOT
        return Step.NOTHING
    if phase is Phase.GRANTED and view.granted_at is not None and now - view.granted_at >= timing.stuck_after:
        return Step.ALERT_STUCK
    return Step.NOTHING


def ready_since(node: dict[str, object]) -> datetime.datetime | None:
    """``lastTransitionTime`` of the node's ``Ready=True`` condition (``None`` when not Ready or unknown)."""
    status = node.get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    if not isinstance(conditions, list):
        return None
    for condition in conditions:
        if isinstance(condition, dict) and condition.get("type") == "Ready":
            if condition.get("status") != "True":
                return None
            stamp = condition.get("lastTransitionTime")
            return _parse(stamp) if isinstance(stamp, str) else None
    return None


def _parse(text: str) -> datetime.datetime | None:
    try:
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=datetime.UTC)
