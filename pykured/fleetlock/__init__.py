"""FleetLock v1 for Zincati: pykured as the reboot manager of Fedora CoreOS nodes (docs/fleetlock.md).

Zincati's stock ``fleet_lock`` strategy asks ``POST {base}v1/pre-reboot`` before it finalizes an update and
``POST {base}v1/steady-state`` after boot. pykured answers from kured's own lock (one concurrency budget
with sentinel-driven nodes), drains completely before it grants, never reboots the node itself, and keeps
the cycle on the Node so restarts lose nothing.

Modules: ``protocol`` (wire format, pure), ``appid`` (Zincati's id, pure), ``nodes`` (id → Node),
``worker`` (background drains), ``service`` (the two operations and the reconcile loop: a driver of the
cycle, deciding with :func:`pykured.cycle.decide.decide` and acting with
:class:`~pykured.cycle.run.CycleRunner`), ``server`` (HTTP and the lifecycle the composition root uses).
"""

from __future__ import annotations

from pykured.cycle.state import FLEETLOCK_ID_ANNOTATION
from pykured.fleetlock.server import FleetLockServer

__all__ = ["FLEETLOCK_ID_ANNOTATION", "FleetLockServer"]
