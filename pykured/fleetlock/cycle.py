"""A Zincati node's reboot cycle, read from the lock and the Node: its phase and what to do next. Pure.

Concept: FleetLock keeps no memory of its own. Whether a node is draining, granted, rebooted or waiting for
its release is derived on every request (and every reconcile pass) from the node's
:class:`~pykured.cycle.state.NodeState`: the lock entry and the same ``pykured.dev/*`` Node annotations the
sentinel-driven daemon uses, plus :data:`~pykured.cycle.state.FLEETLOCK_ID_ANNOTATION`,
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

from pykured.cycle.decide import rebooted
from pykured.cycle.state import NodeState


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


def phase_of(node: NodeState) -> Phase:
    """The phase the lock and the Node describe."""
    fleetlock = node.fleetlock_id is not None
    if not node.holding:
        return Phase.STALE if fleetlock else Phase.IDLE
    if not fleetlock:
        return Phase.FOREIGN
    if node.release_after is not None:
        return Phase.RELEASING
    if node.reboot_boot_id is None:
        return Phase.DRAINING
    if rebooted(node):
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


def reconcile(node: NodeState, *, draining_here: bool, timing: Timing, now: datetime.datetime) -> Step:
    """The reconcile step for one node (pure); ``draining_here``: a drain worker for it runs here."""
    phase = phase_of(node)
    if phase is Phase.STALE:
        return Step.NOTHING if draining_here else Step.CLEANUP
    if phase is Phase.RELEASING:
        assert node.release_after is not None
        return Step.RELEASE if now >= node.release_after else Step.NOTHING
    if phase is Phase.DRAINING:
        return Step.NOTHING if draining_here else Step.RESUME_DRAIN
    if phase is Phase.REBOOTED:
        since = node.ready_since
        if node.ready and since is not None and now - since >= timing.ready_grace:
            return Step.FINISH_REBOOT
        return Step.NOTHING
    granted_at = node.reboot_triggered_at
    if phase is Phase.GRANTED and granted_at is not None and now - granted_at >= timing.stuck_after:
        return Step.ALERT_STUCK
    return Step.NOTHING
