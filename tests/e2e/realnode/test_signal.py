"""The signal profile (``kustomize/overlays/signal``) on real nodes: it reboots a node through PID 1's signal,
and neither of its containers reaches the container runtime's socket.

Each probe runs *in* a container as the runtime runs it (``ctr tasks exec``: the container's user,
capabilities and mounts, as ``kubectl exec`` would), and tries ``connect()`` on the node's containerd socket:
through the host's ``/var/run`` the agent mounts for its sentinel, and through ``/proc/1/root`` from the
relay, which shares the host's PID namespace. The same probe in a container of kured's signal shape (root,
``CAP_KILL``, the host's ``/var/run``) connects: the probe can tell.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import uuid
from typing import Any

import pytest

from pykured_dev.testenv.realnode import Node, RealNodes
from tests.e2e.realnode import support as s

pytestmark = [
    pytest.mark.k8s,
    pytest.mark.slow,
    pytest.mark.realnode,
    pytest.mark.timeout(1500),  # with INOTIFY_WAIT: the first test starts the fleet
]

RUNTIME_SOCKET = "containerd/containerd.sock"
PROBE = """
import os, socket, sys
print("uid", os.getuid())
print([l for l in open("/proc/self/status") if l.startswith("CapEff")][0].strip())
for path in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path)
        print(path, "connected")
    except OSError as e:
        print(path, type(e).__name__)
"""


def probe(node: Node, container_id: str, *paths: str) -> str:
    """Run the probe in the container, as its runtime runs any process there; its output."""
    ctr = shutil.which("ctr")
    assert ctr
    # the stdio FIFOs in a directory both this machine and the node's mount namespace see at the same path
    with tempfile.TemporaryDirectory(prefix="probe-") as fifos:
        return _probe(ctr, node, container_id, fifos, *paths)


def _probe(ctr: str, node: Node, container_id: str, fifos: str, *paths: str) -> str:
    done = subprocess.run(
        [
            ctr,
            "-a",
            str(node.run_dir / RUNTIME_SOCKET),
            "-n",
            "k8s.io",
            "tasks",
            "exec",
            "--fifo-dir",
            fifos,
            "--exec-id",
            f"probe-{uuid.uuid4().hex[:8]}",
            container_id,
            "/usr/bin/python3.11",
            "-c",
            PROBE,
            *paths,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def container_ids(pod: dict[str, Any]) -> dict[str, str]:
    statuses = pod["status"]["containerStatuses"]
    return {c["name"]: c["containerID"].partition("://")[2] for c in statuses}


def test_the_signal_profile_reboots_a_real_node_and_reaches_no_runtime_socket(realnodes: RealNodes) -> None:
    fleet = realnodes
    s.reset(fleet)
    image = fleet.pykured_image
    s.apply(fleet, s.kustomize_base(image, overlay="kustomize/overlays/signal"))
    s.wait_for("the agents on every node", lambda: s.ds_rolled_out(fleet, image), fleet)
    node = fleet.nodes[0]
    ids = container_ids(s.agent_pods(fleet)[node.name])
    sentinel_socket = f"/sentinel/{RUNTIME_SOCKET}"
    through_pid1 = f"/proc/1/root/run/{RUNTIME_SOCKET}"

    agent = probe(node, ids["kured"], sentinel_socket)
    assert "uid 65532" in agent and "CapEff:\t0000000000000000" in agent, agent
    assert f"{sentinel_socket} PermissionError" in agent, agent  # the socket is there, and refuses this user
    relay = probe(node, ids["signal-relay"], sentinel_socket, through_pid1)
    assert "uid 0" in relay and "CapEff:\t0000000000000020" in relay, relay  # CAP_KILL alone
    assert f"{sentinel_socket} FileNotFoundError" in relay, relay  # nothing of the host mounted
    assert f"{through_pid1} PermissionError" in relay, relay  # PID 1's root is not this container's to see

    # the same probe in kured's signal shape: one root container with CAP_KILL and the host's /var/run
    ns = fleet.cluster.unique("probe")
    kube = fleet.cluster.kube()
    kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    kube.create(
        f"/api/v1/namespaces/{ns}/pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "kured-shape"},
            "spec": {
                "nodeName": node.name,
                "hostPID": True,
                "automountServiceAccountToken": False,
                "terminationGracePeriodSeconds": 1,
                "containers": [
                    {
                        "name": "kured",
                        "image": image,
                        "imagePullPolicy": "Never",
                        "command": ["/usr/bin/python3.11", "-c", "import time; time.sleep(3600)"],
                        "securityContext": {
                            "privileged": False,
                            "readOnlyRootFilesystem": True,
                            "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"], "add": ["KILL"]},
                        },
                        "volumeMounts": [{"name": "sentinel", "mountPath": "/sentinel", "readOnly": True}],
                    }
                ],
                "volumes": [{"name": "sentinel", "hostPath": {"path": "/var/run", "type": "Directory"}}],
            },
        },
    )

    def control_running() -> bool:
        pod = kube.get(f"/api/v1/namespaces/{ns}/pods/kured-shape")
        return bool(pod.get("status", {}).get("phase") == "Running")

    s.wait_for("the control pod", control_running, fleet)
    control = kube.get(f"/api/v1/namespaces/{ns}/pods/kured-shape")
    assert f"{sentinel_socket} connected" in probe(node, container_ids(control)["kured"], sentinel_socket)
    kube.request("DELETE", f"/api/v1/namespaces/{ns}")

    # and the profile reboots the node: the agent asks, the relay signals the node's PID 1
    before = s.boot_ids(fleet)
    own = node.reboots
    (node.run_dir / "reboot-required").touch()
    s.wait_for("the node rebooted and settled", lambda: s.settled(fleet, before, [node.name]), fleet)
    assert node.reboots == own + 1
    assert "signal" in (node.log_dir / "reboots.log").read_text().splitlines()[-1]
    assert all(before[n.name] == s.boot_ids(fleet)[n.name] for n in fleet.nodes[1:])  # only that node
