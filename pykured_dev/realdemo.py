"""``tools/dev demo --real-nodes``: the pykured image as a real DaemonSet on real kubelets, rolling reboots.

Starts the control plane (with kube-scheduler and kube-controller-manager) and N real nodes (a kubelet and
containerd each, in namespaces of their own: ``pykured_dev.testenv.realnode``), installs ``kustomize/base``
with this checkout's image and a Deployment under a PodDisruptionBudget, touches every node's
``/var/run/reboot-required``, and shows each node's state as the agents drain it (real evictions) and reboot
it through the node's own PID 1, until every node is back on a new boot, uncordoned. Needs root, containerd,
runc, the CNI plugins and busybox-static (``tools/dev setup`` installs them) and the image
(``tools/image-build``). Nothing touches this machine's PID 1, network or kernel settings.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import TextIO

from pykured.core import errors
from pykured_dev.testenv import Cluster, install
from pykured_dev.testenv.realnode import RealNodeError, RealNodes


def _state(fleet: RealNodes, name: str, first_boot: str) -> str:
    node = fleet.node_obj(name)
    boot = node["status"].get("nodeInfo", {}).get("bootID", "")
    if not fleet.is_ready(name, boot=fleet[name].boots[-1]):
        return "rebooting"
    if node["spec"].get("unschedulable"):
        return "cordoned"
    return "done" if boot != first_boot else "waiting"


def main(argv: list[str], *, out: TextIO | None = None) -> int:
    """Run the real-node demo; 0 when every node rebooted once, one at a time, and came back uncordoned."""
    parser = argparse.ArgumentParser(prog="tools/dev demo --real-nodes", description=__doc__.splitlines()[0])
    parser.add_argument("--real-nodes", action="store_true", required=True)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=600.0)
    opts = parser.parse_args(argv)
    stream = out or sys.stdout
    began = time.monotonic()
    print("Starting a local control plane (etcd, kube-apiserver, controllers, scheduler) ...", file=stream)
    cluster = Cluster(service_account_admission=True).start()
    fleet = RealNodes(cluster, opts.nodes)
    try:
        print(f"Booting {opts.nodes} real nodes (kubelet + containerd each) ...", file=stream)
        try:
            fleet.start()
        except RealNodeError as exc:
            print(f"demo: {exc}", file=sys.stderr)
            return 1
        names = [n.name for n in fleet.nodes]
        print(f"  Ready in {time.monotonic() - began:.1f} s: {', '.join(names)}", file=stream)
        install.workload(fleet, "demo", replicas=2)
        install.apply(fleet, install.kustomize_base(fleet.pykured_image))
        print(f"Installed kustomize/base with {fleet.pykured_image}; waiting for the agents ...", file=stream)
        _wait(lambda: install.ds_rolled_out(fleet, fleet.pykured_image), opts.timeout)
        _wait(lambda: install.workload_available(fleet, "demo"), opts.timeout)
        first = {n: fleet.node_obj(n)["status"]["nodeInfo"]["bootID"] for n in names}
        print(f"Touching /var/run/reboot-required on {len(names)} nodes", file=stream)
        rolled = time.monotonic()
        for node in fleet.nodes:
            (node.run_dir / "reboot-required").touch()
        states, most_down = _watch(fleet, first, rolled, opts.timeout, stream)
        reboots = {n.name: n.reboots for n in fleet.nodes}
        ok = (
            all(v == "done" for v in states.values())
            and most_down <= 1
            and all(r == 1 for r in reboots.values())
        )
        print("", file=stream)
        print("Summary", file=stream)
        print(f"  nodes rolled:            {len(names)} in {time.monotonic() - rolled:.1f} s", file=stream)
        print(f"  most nodes down at once: {most_down} (limit 1)", file=stream)
        print(f"  reboots per node:        {reboots} (through each node's own PID 1)", file=stream)
        print(f"  result:                  {'OK' if ok else 'FAILED'}", file=stream)
        return 0 if ok else 1
    finally:
        fleet.stop()
        cluster.stop()


def _watch(
    fleet: RealNodes, first: dict[str, str], rolled: float, timeout: float, stream: TextIO
) -> tuple[dict[str, str], int]:
    """The live table, one line per change, until every node is done; the last states, the most down."""
    tty = stream.isatty()
    names = list(first)
    most_down, last_line = 0, ""
    deadline = time.monotonic() + timeout
    states: dict[str, str] = {}
    while time.monotonic() < deadline:
        try:
            states = {n: _state(fleet, n, first[n]) for n in names}
        except errors.KubeError:  # a transient API error: look again
            time.sleep(0.5)
            continue
        most_down = max(most_down, sum(1 for v in states.values() if v in ("cordoned", "rebooting")))
        line = "  ".join(f"{n}:{states[n]:<9}" for n in names)
        if line != last_line:
            prefix = "\r\033[K" if tty else ""
            elapsed = time.monotonic() - rolled
            print(f"{prefix}[{elapsed:6.1f}s] {line}", end="" if tty else "\n", file=stream, flush=True)
            last_line = line
        if all(v == "done" for v in states.values()):
            break
        time.sleep(0.3)
    if tty:
        print(file=stream)
    return states, most_down


def _wait(cond: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise SystemExit("demo: timed out")
        time.sleep(0.5)
