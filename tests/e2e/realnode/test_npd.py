"""Node Problem Detector's condition reboots a real node, once.

The real NPD (``tools/kured-build npd``) runs as the node's health agent the way its systemd unit runs it on
a host: a daemon of the node (its PID, mount, network and time namespaces, as the tier runs the kubelet), with
the kubelet's own credentials (``--apiserver-override=…&auth=<the kubelet's kubeconfig>``), a custom plugin
monitor whose script reports ``RebootRequired`` while a file exists in the node's ``/run``, and its k8s
exporter writing the condition to the Node. pykured is the image as a DaemonSet pod with
``--reboot-condition=RebootRequired=True``.

The reboot empties ``/run`` and ends NPD with every other process of the node. Until NPD runs again on the
new boot, the Node still shows the condition True from before the reboot: the agent on the new boot must not
reboot for it (its ``lastTransitionTime`` is before the node's boot, the kernel's ``btime``, which the node's
time namespace starts with each boot). NPD is then started again and reports the problem gone.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pykured.conditions import record as rules
from pykured.core.times import parse_rfc3339
from pykured.status.agent import STATUS_ANNOTATION
from pykured_dev.testenv.noderelay import SERVICE_IP, SERVICE_PORT
from pykured_dev.testenv.procs import Proc
from pykured_dev.testenv.realnode import Node, RealNodes
from pykured_dev.testenv.reference import artifact
from tests.e2e.realnode import support as s
from tests.npd import CONDITION, REASON, monitor

pytestmark = [
    pytest.mark.k8s,
    pytest.mark.slow,
    pytest.mark.realnode,
    pytest.mark.timeout(1500),  # with INOTIFY_WAIT: the first test starts the fleet
]

PROBLEM = "kernel-update-staged"
"""The file in the node's ``/run`` whose presence the plugin reports as a problem."""


def start_npd(node: Node, config: Path) -> Proc:
    """NPD as a host daemon of the node's current boot, with the kubelet's kubeconfig."""
    return node.start_daemon(
        f"npd-{len(node.boots)}",
        [
            str(artifact("npd")),
            f"--hostname-override={node.name}",
            f"--apiserver-override=https://{SERVICE_IP}:{SERVICE_PORT}"
            f"?inClusterConfig=false&auth={node.dir / 'etc' / 'kubeconfig.json'}",
            "--enable-k8s-exporter=true",
            f"--config.custom-plugin-monitor={config}",
            "--port=0",
            "--prometheus-port=0",
            "--k8s-exporter-heartbeat-period=5s",
        ],
    )


def condition(fleet: RealNodes, node: Node) -> dict[str, Any]:
    conditions = fleet.node_obj(node.name).get("status", {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == CONDITION), {})


def since(found: dict[str, Any]) -> float:
    """A condition's ``lastTransitionTime``, in seconds since the epoch."""
    when = parse_rfc3339(found["lastTransitionTime"])
    assert when is not None, found
    return when.timestamp()


def agent_status(fleet: RealNodes, node: Node) -> dict[str, Any]:
    raw = (fleet.node_obj(node.name)["metadata"].get("annotations") or {}).get(STATUS_ANNOTATION)
    return dict(json.loads(raw)) if raw else {}


def test_npds_condition_reboots_a_real_node_once(realnodes: RealNodes, tmp_path: Path) -> None:
    fleet = realnodes
    s.reset(fleet)
    image = fleet.pykured_image
    s.apply(fleet, s.kustomize_base(image, f"--reboot-condition={CONDITION}=True"))
    s.wait_for("the agents on every node", lambda: s.ds_rolled_out(fleet, image), fleet)
    target = fleet.nodes[2]
    config = monitor(tmp_path, Path("/run") / PROBLEM)  # the script runs in the node: its own /run
    before = s.boot_ids(fleet)
    own = {n.name: n.reboots for n in fleet.nodes}
    boots = len(target.boots)
    daemons = [start_npd(target, config)]
    try:

        def npd_log() -> str:
            return "\n".join(d.tail() for d in daemons)

        # NPD starts with the condition False (its default), then reports the problem
        s.wait_for(
            f"NPD's {CONDITION}=False on {target.name}\n{npd_log()}",
            lambda: condition(fleet, target).get("status") == "False",
            fleet,
        )
        (target.run_dir / PROBLEM).touch()
        s.wait_for(
            "the node rebooted for NPD's condition and settled",
            lambda: s.settled(fleet, before, [target.name]),
            fleet,
        )
        assert not daemons[0].alive(), "NPD ended with the node's boot"
        new_boot = target.boots[-1]
        s.wait_for(
            "the agent waiting, on the new boot",
            lambda: (
                agent_status(fleet, target).get("bootID") == new_boot
                and agent_status(fleet, target).get("step") == "wait"
            ),
            fleet,
        )
        # the condition from before the reboot is still on the Node, and asks for nothing on this boot
        stale = condition(fleet, target)
        rebooted_at = int((target.log_dir / "reboots.log").read_text().split()[-2])
        assert stale.get("status") == "True" and stale.get("reason") == REASON, stale
        assert since(stale) <= rebooted_at, stale
        status = agent_status(fleet, target)
        assert "condition" not in status and not status.get("sentinel"), status

        # NPD again on the new boot: the problem went with the old /run, and it says so
        daemons.append(start_npd(target, config))
        s.wait_for(
            f"NPD's {CONDITION}=False on the new boot\n{npd_log()}",
            lambda: condition(fleet, target).get("status") == "False",
            fleet,
        )
        assert since(condition(fleet, target)) >= rebooted_at
        assert s.boot_ids(fleet)[target.name] == new_boot and len(target.boots) == boots + 1
        assert {n.name: n.reboots - own[n.name] for n in fleet.nodes} == {
            n.name: int(n is target) for n in fleet.nodes
        }
        assert all(s.boot_ids(fleet)[n.name] == before[n.name] for n in fleet.nodes if n is not target)
        assert "reboot" in (target.log_dir / "reboots.log").read_text().splitlines()[-1]
        count = rules.read_count(
            fleet.node_obj(target.name)["metadata"]["annotations"].get(rules.COUNT_ANNOTATION)
        )
        assert [e.condition for e in count.entries] == [CONDITION]
    finally:
        for daemon in daemons:
            daemon.stop(timeout=10)
