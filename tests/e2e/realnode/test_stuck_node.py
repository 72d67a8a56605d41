"""A real node that does not come back from its reboot: the fleet stops, nothing else reboots.

It leaves its node down (the next scenario's reset boots it). The dead node keeps the lock; the other nodes
need a reboot too and wait for the lock, and keep waiting after kube-controller-manager has marked the dead
node ``Unknown``: none is cordoned or rebooted.
"""

from __future__ import annotations

import json

import pytest

from pykured_dev.testenv.history import History, Roll
from pykured_dev.testenv.realnode import RealNodes
from tests.e2e.realnode import support as s

pytestmark = [
    pytest.mark.k8s,
    pytest.mark.slow,
    pytest.mark.realnode,
    pytest.mark.timeout(1500),  # with INOTIFY_WAIT: the first test starts the fleet
]

STATUS = "pykured.dev/status"


def status(fleet: RealNodes, name: str) -> dict[str, object]:
    raw = (fleet.node_obj(name)["metadata"].get("annotations") or {}).get(STATUS)
    return dict(json.loads(raw)) if raw else {}


def ready_status(fleet: RealNodes, name: str) -> str:
    for cond in fleet.node_obj(name).get("status", {}).get("conditions", []):
        if cond.get("type") == "Ready":
            return str(cond.get("status"))
    return ""


def test_a_node_that_never_comes_back_stops_the_fleet(realnodes: RealNodes) -> None:
    fleet = realnodes
    s.reset(fleet)
    s.apply(fleet, s.kustomize_base(fleet.pykured_image))
    s.wait_for("the agents on every node", lambda: s.ds_rolled_out(fleet, fleet.pykured_image), fleet)
    dead, *others = fleet.nodes
    names = [n.name for n in fleet.nodes]
    before = s.boot_ids(fleet)
    with History(fleet.cluster.kube()) as history:
        dead.stay_down = True
        (dead.run_dir / "reboot-required").touch()
        s.wait_for("the first node to go down for its reboot", dead.powered_off.is_set, fleet)
        for node in others:
            (node.run_dir / "reboot-required").touch()
        s.wait_for(
            "the others waiting for the lock, and the dead node marked Unknown",
            lambda: (
                all(status(fleet, n.name).get("lockWait") for n in others)
                and ready_status(fleet, dead.name) == "Unknown"
            ),
            fleet,
        )
        assert s.lease_holders(fleet) == [dead.name]
        assert s.cordoned(fleet) == [dead.name]
        roll = Roll.of(
            history.changes(), daemonset=f"{s.NS}/{s.DS}", annotation=s.KURED_ANNOTATION, nodes=names
        )
    assert s.boot_ids(fleet) == before
    assert roll.max_cordoned == 1
    assert roll.reboots() == dict.fromkeys(names, 0)
    assert not dead.proc or not dead.proc.alive()
