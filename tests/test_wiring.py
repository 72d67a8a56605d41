"""The agent's wiring in process (the agent as the DaemonSet runs it, FleetLock beside the daemon:
``tests/e2e/test_wiring.py``)."""

from __future__ import annotations

from pykured.cycle.state import FLEETLOCK_ID_ANNOTATION as FLEETLOCK_ANNOTATION
from pykured.fleetlock import FLEETLOCK_ID_ANNOTATION


def test_daemon_and_fleetlock_agree_on_the_hands_off_annotation() -> None:
    assert FLEETLOCK_ANNOTATION == FLEETLOCK_ID_ANNOTATION


HANDED_OFF = "FleetLock (Zincati) runs this node's reboot cycle"
