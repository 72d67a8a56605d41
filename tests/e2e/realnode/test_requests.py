"""A reboot request and the Zincati hand-off on real nodes (the pykured image from ``kustomize/``)."""

from __future__ import annotations

import subprocess
import sys

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

REQUEST = "pykured.dev/reboot-request"
MARKER = "zincati/admin/strategy/marker_file/allowfinalize.json"


def node_annotations(fleet: RealNodes, name: str) -> dict[str, str]:
    return dict(fleet.node_obj(name)["metadata"].get("annotations") or {})


def test_reboot_request_reboots_only_the_requested_real_node(realnodes: RealNodes) -> None:
    fleet = realnodes
    s.reset(fleet)
    s.apply(fleet, s.kustomize_base(fleet.pykured_image))
    s.wait_for("the agents on every node", lambda: s.ds_rolled_out(fleet, fleet.pykured_image), fleet)
    target = fleet.nodes[1]
    others = [n for n in fleet.nodes if n is not target]
    before = s.boot_ids(fleet)
    with History(fleet.cluster.kube()) as history:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pykured",
                "request-reboot",
                f"--kubeconfig={fleet.cluster.admin_kubeconfig}",
                target.name,
                "--reason",
                "kernel args",
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        s.wait_for(
            "the requested node rebooted and its request satisfied",
            lambda: (
                s.settled(fleet, before, [target.name])
                and REQUEST not in node_annotations(fleet, target.name)
            ),
            fleet,
        )
        roll = Roll.of(
            history.changes(),
            daemonset=f"{s.NS}/{s.DS}",
            annotation=s.KURED_ANNOTATION,
            nodes=[n.name for n in fleet.nodes],
        )
    assert roll.reboots() == {n.name: int(n is target) for n in fleet.nodes}, roll.boot_ids
    assert all(s.boot_ids(fleet)[n.name] == before[n.name] for n in others)
    assert roll.max_cordoned == 1


def test_zincati_marker_hand_off_on_a_real_node(realnodes: RealNodes) -> None:
    fleet = realnodes
    s.reset(fleet)
    s.apply(fleet, s.kustomize_base(fleet.pykured_image, "--period=5s", overlay="kustomize/overlays/zincati"))
    s.wait_for("the agents on every node", lambda: s.ds_rolled_out(fleet, fleet.pykured_image), fleet)
    target = fleet.nodes[2]
    before = s.boot_ids(fleet)
    own_reboots = {n.name: n.reboots for n in fleet.nodes}
    with History(fleet.cluster.kube()) as history:
        (target.var_lib / "pykured-staged-update").touch()  # rpm-ostree now reports a pending deployment
        s.wait_for(
            "Zincati's reboot into the update and the marker removed",
            lambda: s.settled(fleet, before, [target.name]) and not (target.var_lib / MARKER).exists(),
            fleet,
        )
        roll = Roll.of(
            history.changes(),
            daemonset=f"{s.NS}/{s.DS}",
            annotation=s.KURED_ANNOTATION,
            nodes=[n.name for n in fleet.nodes],
        )
    assert (target.var_lib / "pykured-finalized-update").exists(), "Zincati finalized the staged update"
    assert roll.reboots() == {n.name: int(n is target) for n in fleet.nodes}, roll.boot_ids
    assert {n.name: n.reboots - own_reboots[n.name] for n in fleet.nodes} == {
        n.name: int(n is target) for n in fleet.nodes
    }
    assert "finalize" in (target.log_dir / "reboots.log").read_text().splitlines()[-1]
    assert roll.max_cordoned == 1
    (target.var_lib / "pykured-finalized-update").unlink()
