"""The built container image as one node's agent, beside ``python -m pykured`` agents, on the test cluster.

The image (``tools/image-build``, run by ``.ci/run`` and ``tools/dev test`` before pytest) runs under podman
the way kured's Helm chart 6.1.0 runs it: command ``/usr/bin/kured`` with the chart's default arguments, a
read-only root, the sentinel's host directory mounted read-only at ``/sentinel``, the ServiceAccount token
files at ``/var/run/secrets/kubernetes.io/serviceaccount`` (kured's RBAC) and ``KURED_NODE_ID``; and as
``kustomize/base`` runs it (its RBAC, ``--lock-backend=lease``). Only
``--reboot-command`` (the chart's ``configuration.rebootCommand``), ``--metrics-host``/``--metrics-port`` and
``--period`` differ, as chart values would.

Safety: the container has its OWN PID namespace (never the host's) and is not in safe mode, so its real
``/usr/bin/nsenter -m/proc/1/ns/mnt`` enters the mount namespace of the container's PID 1 — the agent itself —
and the reboot command there only touches a file on a mounted directory. Host networking (no firewall rules
are added) lets it reach the API server on 127.0.0.1; it binds its metrics port on 127.0.0.1 only. Each
container carries a label and a run-time limit, and every one this test started is removed at the end.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from pykured_dev.testenv.fleet import AgentSlot, Fleet
from tests.e2e.test_rbac_profiles import apply_profile_rbac, render
from tests.testenv import TestEnv

pytestmark = [pytest.mark.k8s, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
IMAGE_BUILD = str(ROOT / "tools" / "image-build")
LABEL = "dev.pykured.test=test_image"
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def podman(*args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """podman on tools/image-build's image store and settings."""
    return subprocess.run(
        [IMAGE_BUILD, "podman", *args], capture_output=True, text=True, check=check, timeout=timeout
    )


def test_the_build_left_no_working_container_in_the_store() -> None:
    """``tools/image-build`` (run before the tests) leaves none of buildah's build-stage containers behind in
    its store: each would stay a mounted overlay, two more with every build."""
    names = podman("ps", "--all", "--external", "--format={{.Names}}").stdout.split()
    left = [name for name in names if name.endswith("-working-container") or "-working-container-" in name]
    assert not left


def chart_args(*, namespace: str, reboot_command: str, metrics_port: int) -> list[str]:
    """kured's chart 6.1.0 default arguments (templates/daemonset.yaml with values.yaml), release ``kured``.

    With the chart values a test needs: the reboot command, the metrics address, a short period.
    """
    return [
        "--ds-name=kured",
        f"--ds-namespace={namespace}",
        "--metrics-host=127.0.0.1",
        f"--metrics-port={metrics_port}",
        "--period=10s",
        "--reboot-sentinel=/sentinel/reboot-required",
        f"--reboot-command={reboot_command}",
        "--log-format=text",
        "--concurrency=1",
    ]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# The image is distroless (no shell): the stand-in reboot command is a Python script.
REBOOT_SCRIPT = (
    "#!/usr/bin/python3.11\n"
    "with open('/node/requests.log', 'a') as log:\n"
    "    log.write('requested\\n')\n"
    "open('/node/reboot-requested', 'a').close()\n"
)


class ImageFleet(Fleet):
    """A :class:`Fleet` in which some nodes' agents are the container image."""

    def __init__(
        self,
        cluster: TestEnv,
        *,
        workdir: Path,
        args: Sequence[str],
        image: str,
        containers: dict[str, list[str]],
    ) -> None:
        super().__init__(cluster, workdir=workdir, args=args)
        self.image = image
        self.containers = containers
        """Node name → the ``podman run`` options of its container (mounts, environment)."""

    def container_name(self, node: str) -> str:
        return f"pykured-test-{os.getpid()}-{node}"

    def add(self, node: str, *, start: bool = True) -> AgentSlot:
        slot = super().add(node, start=False)
        if node in self.containers:
            script = slot.dir / "reboot-in-container.sh"
            script.write_text(REBOOT_SCRIPT)
            script.chmod(0o755)
        if start:
            self.start(node)
        return slot

    def argv(self, slot: AgentSlot) -> list[str]:
        if slot.node not in self.containers:
            return super().argv(slot)
        return [
            IMAGE_BUILD,
            "podman",
            "run",
            "--rm",
            f"--name={self.container_name(slot.node)}",
            f"--label={LABEL}",
            "--timeout=600",  # never outlives the test for long, whatever happens to it
            "--pid=private",  # never the host's: nsenter must only reach the container's PID 1
            "--network=host",  # the API server on 127.0.0.1; host networking adds no firewall rules
            "--read-only",
            "--read-only-tmpfs=false",
            "--cap-add=SYS_ADMIN",  # setns() into PID 1's mount namespace (the chart: privileged)
            "--entrypoint=/usr/bin/kured",
            f"--volume={slot.dir / 'run'}:/sentinel:ro",
            f"--volume={slot.dir}:/node",
            f"--env=KURED_NODE_ID={slot.node}",
            *self.containers[slot.node],
            self.image,
            *self.args_for_container,
        ]

    args_for_container: Sequence[str] = ()

    def kill(self, node: str) -> None:
        if node in self.containers:
            podman("rm", "--force", "--time=0", self.container_name(node), check=False)
        super().kill(node)


def remove_test_containers() -> None:
    names = podman("ps", "--all", f"--filter=label={LABEL}", "--format={{.Names}}", check=False).stdout
    for name in names.split():
        if name.startswith(f"pykured-test-{os.getpid()}-"):
            podman("rm", "--force", "--time=0", name, check=False)


@pytest.fixture
def image() -> Iterator[str]:
    """This checkout's image: ``localhost/pykured:ctx-<hash of the build context>``."""
    ref = subprocess.run([IMAGE_BUILD, "ref"], capture_output=True, text=True, check=False, timeout=60)
    assert ref.returncode == 0, f"{ref.stderr}run tools/image-build first (tools/dev test does)"
    yield ref.stdout.strip()
    remove_test_containers()


def metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        return str(answer.read().decode())


def kustomize_base_args(*, namespace: str, reboot_command: str, metrics_port: int) -> list[str]:
    """kustomize/base's container arguments (the Lease lock), with the same test values as the chart's."""
    return [
        *chart_args(namespace=namespace, reboot_command=reboot_command, metrics_port=metrics_port),
        "--lock-backend=lease",
    ]


@pytest.mark.parametrize("profile", ["chart", "kustomize-base"])
def test_image_agent_reboots_its_node_beside_python_agents(
    k8s: TestEnv, image: str, tmp_path: Path, profile: str
) -> None:
    ns = k8s.new_namespace("img")
    k8s.create_daemonset(ns, "kured")
    if profile == "chart":
        k8s.apply_rbac_kured(namespace=ns, ds_name="kured")  # the chart's RBAC is kured's
        make_args, lease = chart_args, False
    else:
        apply_profile_rbac(k8s, render(k8s, "kustomize/base"), ns)
        make_args, lease = kustomize_base_args, True
    sa = k8s.in_cluster_dir(ns, "kured")
    boxed, *plain = k8s.add_nodes(*[k8s.unique("node") for _ in range(3)])
    port = free_port()
    options = [
        f"--volume={sa['dir']}:{SA_DIR}:ro",
        f"--env=KUBERNETES_SERVICE_HOST={sa['KUBERNETES_SERVICE_HOST']}",
        f"--env=KUBERNETES_SERVICE_PORT={sa['KUBERNETES_SERVICE_PORT']}",
    ]
    fleet = ImageFleet(
        k8s,
        workdir=tmp_path / "fleet",
        args=[
            f"--ds-namespace={ns}",
            "--period=10s",
            "--concurrency=1",
            *(["--lock-backend=lease"] if lease else []),
        ],
        image=image,
        containers={boxed: options},
    )
    fleet.args_for_container = make_args(
        namespace=ns, reboot_command="/node/reboot-in-container.sh", metrics_port=port
    )
    with fleet:
        for node in (boxed, *plain):
            fleet.add(node)
        name = fleet.container_name(boxed)
        started = fleet.wait_for(
            lambda: podman("container", "exists", name, check=False).returncode == 0, timeout=60, interval=0.5
        )
        assert started, fleet.log_text(boxed)
        pid_mode = podman("inspect", "--format={{.HostConfig.PidMode}}", name)
        assert pid_mode.stdout.strip() == "private", pid_mode
        k8s.create_pod(k8s.new_namespace(), "app", node=boxed)

        # The container agent is up: its metrics answer on the chart's liveness path.
        assert fleet.wait_for(lambda: _serves(port), timeout=60), fleet.log_text(boxed)

        most_cordoned = 0

        def all_done() -> bool:
            nonlocal most_cordoned
            nodes = [k8s.kube().get_node(n) for n in (boxed, *plain)]
            most_cordoned = max(most_cordoned, sum(bool(n["spec"].get("unschedulable")) for n in nodes))
            return all(
                fleet.slots[n["metadata"]["name"]].reboots == 1 and not n["spec"].get("unschedulable")
                for n in nodes
            ) and not _lock_held(k8s, ns)

        for node in (boxed, *plain):
            fleet.touch(node)
        assert fleet.wait_for(all_done, timeout=100, interval=0.2), {
            n: fleet.log_text(n)[-3000:] for n in (boxed, *plain)
        }

    log = fleet.log_text(boxed)
    assert fleet.requests(boxed) == 1, log
    assert fleet.slots[boxed].starts == 2, "the container agent ran before and after its node's reboot"
    assert "Triggering reboot for node" in log and "Uncordoned node" in log, log
    assert "'/usr/bin/nsenter', '-m/proc/1/ns/mnt', '--', '/node/reboot-in-container.sh'" in log, log
    assert most_cordoned <= 1, "concurrency 1: never two nodes cordoned at once"
    assert "Traceback" not in log, log


def _serves(port: int) -> bool:
    with contextlib.suppress(OSError):
        return "kured_reboot_required" in metrics(port)
    return False


def _lock_held(k8s: TestEnv, ns: str) -> bool:
    """kured's annotation on the DaemonSet, or a Lease with a holder."""
    annotations = k8s.kube().get_daemonset(ns, "kured")["metadata"].get("annotations", {})
    leases = k8s.kube().list_leases(ns)["items"]
    return "weave.works/kured-node-lock" in annotations or any(
        lease["spec"].get("holderIdentity") for lease in leases
    )
