"""The agent as the DaemonSet runs it: ``python -m pykured`` with FleetLock serving Zincati beside the daemon.

Requests are sent exactly as Zincati sends them (POST, ``fleet-lock-protocol: true``, no Content-Type,
pretty-printed JSON); the node's own sentinel-driven loop must keep its hands off the FleetLock cycle.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from pykured.fleetlock import FLEETLOCK_ID_ANNOTATION
from pykured.fleetlock.appid import app_specific_id
from pykured_dev.eventually import eventually
from pykured_dev.testenv.fleet import Fleet
from pykured_dev.testenv.procs import free_port
from tests.testenv import TestEnv


def zincati(port: int, op: str, ident: str) -> tuple[int, dict[str, Any]]:
    body = json.dumps({"client_params": {"id": ident, "group": "default"}}, indent=2).encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/{op}", data=body, method="POST", headers={"fleet-lock-protocol": "true"}
    )
    request.remove_header("Content-type")
    try:
        with urllib.request.urlopen(request, timeout=40) as answer:
            return answer.status, json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


@pytest.mark.k8s
@pytest.mark.slow
def test_zincati_cycle_through_the_node_local_agent(k8s: TestEnv, tmp_path: Path) -> None:
    ns = k8s.new_namespace("ds")
    k8s.create_daemonset(ns, "kured")
    node = k8s.add_nodes(k8s.unique("fcos"))[0]
    k8s.create_pod(k8s.new_namespace(), "app", node=node, grace=1)
    machine_id = k8s.kube().get_node(node)["status"]["nodeInfo"]["machineID"]
    (tmp_path / "machine-id").write_text(machine_id + "\n")
    ident = app_specific_id(machine_id)
    port = free_port()
    fleet = Fleet(
        k8s,
        workdir=tmp_path / "fleet",
        method="command",
        spawn="exec",  # the process as the DaemonSet starts it, from the interpreter up
        args=[
            f"--ds-namespace={ns}",
            "--period=10s",
            "--reboot-retry-delay=2s",
            "--lock-backend=lease",
            "--log-level=debug",  # the sentinel-driven loop's decisions are logged at debug level
            f"--fleetlock-listen=127.0.0.1:{port}",
            f"--machine-id-file={tmp_path / 'machine-id'}",
        ],
    )
    with fleet:
        fleet.add(node)
        assert fleet.wait_for(lambda: _listening(port), timeout=60), fleet.log_text(node)
        assert zincati(port, "steady-state", ident)[0] == 200
        assert zincati(port, "pre-reboot", "0" * 32)[0] // 100 == 4, "a wrong id is refused"
        answers: list[int] = []

        def granted() -> bool:
            answers.append(zincati(port, "pre-reboot", ident)[0])
            return answers[-1] == 200

        assert eventually(granted, timeout=60), answers
        assert set(answers) <= {200, 423, 503}, answers
        obj = k8s.kube().get_node(node)
        assert obj["spec"]["unschedulable"] is True
        # The sentinel-driven loop's next pass sees the hand-off and leaves the cycle to FleetLock: it must
        # not "retry" a reboot (its retry delay is 2 s) while Zincati finalizes.
        fleet.wait_for(lambda: HANDED_OFF in fleet.log_text(node), timeout=90)
        assert fleet.requests(node) == 0
        fleet.reboot(node)  # Zincati finalizes and reboots the host
        assert fleet.wait_for(lambda: _listening(port), timeout=60)
        assert zincati(port, "steady-state", ident)[0] == 200
        obj = k8s.kube().get_node(node)
        assert not obj["spec"].get("unschedulable")
        assert FLEETLOCK_ID_ANNOTATION not in obj["metadata"].get("annotations", {})
        lease = k8s.kube().get_lease(ns, "kured-lock-0")
        assert not lease["spec"].get("holderIdentity")


HANDED_OFF = "FleetLock (Zincati) runs this node's reboot cycle"


def _listening(port: int) -> bool:
    try:
        zincati(port, "steady-state", "probe")
    except OSError:
        return False
    return True


@pytest.mark.k8s
def test_lock_status_and_release_commands(k8s: TestEnv) -> None:
    import subprocess
    import sys

    ns = k8s.new_namespace("ds")
    k8s.create_daemonset(ns, "kured", annotations={"weave.works/kured-node-lock": '{"nodeID":"gone-node"}'})
    base = [sys.executable, "-m", "pykured", "lock"]
    opts = [f"--kubeconfig={k8s.admin_kubeconfig}", f"--ds-namespace={ns}"]
    status = subprocess.run([*base, "status", *opts], capture_output=True, text=True, timeout=60, check=False)
    assert "gone-node" in status.stdout, status.stdout + status.stderr
    release = subprocess.run(
        [*base, "release", "gone-node", *opts, "--lock-backend=daemonset"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert release.returncode == 0, release.stdout + release.stderr
    annotations = k8s.kube().get_daemonset(ns, "kured")["metadata"].get("annotations", {})
    assert "weave.works/kured-node-lock" not in annotations
