"""Node Problem Detector's own condition reboots a node: the real NPD (``tools/kured-build npd``), standalone
against the test API server for a simulated node (``--apiserver-override``, ``--hostname-override``,
``--enable-k8s-exporter``), with a custom plugin monitor whose script reports a problem once the test says
so; its exporter writes the condition, and the node's agent reboots the node for it."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from pykured.conditions import record as rules
from pykured_dev.testenv.procs import _die_with_parent
from pykured_dev.testenv.reference import artifact
from tests.fleets import MakeFleet, fleet_factory
from tests.npd import monitor
from tests.testenv import TestEnv

pytestmark = [pytest.mark.k8s, pytest.mark.slow]


@pytest.fixture
def make_fleet(k8s: TestEnv, tmp_path: Path) -> Iterator[MakeFleet]:
    with fleet_factory(k8s, tmp_path, period="5s") as make:
        yield make


def test_npds_own_condition_reboots_the_node(k8s: TestEnv, make_fleet: MakeFleet, tmp_path: Path) -> None:
    npd = artifact("npd")
    fleet, _, (node,) = make_fleet(1, args=("--reboot-condition=RebootRequired",))
    slot = fleet.slots[node]
    problem = tmp_path / "problem"
    argv = [
        str(npd),
        f"--hostname-override={node}",
        f"--apiserver-override={k8s.server}?inClusterConfig=false&auth={k8s.admin_kubeconfig}",
        "--enable-k8s-exporter=true",
        f"--config.custom-plugin-monitor={monitor(tmp_path, problem)}",
        "--port=0",
        "--prometheus-port=0",
        "--k8s-exporter-heartbeat-period=5s",
    ]
    with open(tmp_path / "npd.log", "ab") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
    try:

        def npd_condition() -> dict[str, str] | None:
            conditions = k8s.kube().get_node(node).get("status", {}).get("conditions") or []
            return next((c for c in conditions if c.get("type") == "RebootRequired"), None)

        # NPD starts with the condition False (its default), then reports the problem
        assert fleet.wait_for(lambda: (npd_condition() or {}).get("status") == "False", timeout=120), (
            tmp_path / "npd.log"
        ).read_text()
        problem.touch()
        assert fleet.wait_for(lambda: slot.reboots == 1, timeout=180), (
            fleet.log_text(node) + (tmp_path / "npd.log").read_text()
        )
        found = npd_condition()
        assert found is not None and found["reason"] == "KernelUpdateStaged"
        count = rules.read_count(
            k8s.kube().get_node(node)["metadata"]["annotations"].get(rules.COUNT_ANNOTATION)
        )
        assert [e.condition for e in count.entries] == ["RebootRequired"]
        assert "Reboot required by node condition on node" in fleet.log_text(node)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
