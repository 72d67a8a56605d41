"""``tools/dev demo``: a local control plane, simulated nodes, and real pykured agents rolling their reboots.

Starts etcd + kube-apiserver (``pykured_dev.testenv``), creates N Ready nodes with a few pods each and one
pykured agent process per node (its own sentinel directory; a reboot command that "reboots" the simulated
node), touches every sentinel, shows each node's state as the fleet rolls through, and ends with a summary:
total time, the most nodes down at once, and whether every node rebooted once and came back uncordoned. Exit
code 0 only when all of that holds and the concurrency limit was never exceeded. Nothing touches this machine:
the agents run in safe mode with a shim nsenter. ``--rollout`` rolls the fleet through reboot requests
(``pykured rollout``, one request per node bound to its bootID) instead of sentinels.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import TextIO

from pykured_dev.testenv import Cluster
from pykured_dev.testenv.fleet import Fleet


def _node_state(node: dict[str, object], slot_reboots: int) -> str:
    spec = node.get("spec", {})
    status = node.get("status", {})
    assert isinstance(spec, dict) and isinstance(status, dict)
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions", []))
    if not ready:
        return "rebooting"
    if spec.get("unschedulable"):
        return "cordoned"
    return "done" if slot_reboots else "waiting"


def main(argv: list[str], *, out: TextIO | None = None) -> int:
    """Run the demo; returns 0 when every node rebooted once and the limit held."""
    parser = argparse.ArgumentParser(prog="tools/dev demo", description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--lock-backend", choices=["lease", "daemonset"], default="lease")
    parser.add_argument("--pods-per-node", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument(
        "--rollout", action="store_true", help="reboot through a rollout of reboot requests, not sentinels"
    )
    opts = parser.parse_args(argv)
    stream = out or sys.stdout
    tty = stream.isatty()
    workdir = Path(tempfile.mkdtemp(prefix="pykured-demo-"))
    began = time.monotonic()
    print(f"Starting a local control plane (etcd + kube-apiserver) in {workdir} ...", file=stream)
    cluster = Cluster().start()
    try:
        print(f"  ready in {cluster.started_in:.1f} s at {cluster.server}", file=stream)
        cluster.ensure_namespace("kube-system")
        cluster.create_daemonset("kube-system", "kured")
        nodes = [f"node-{i + 1}" for i in range(opts.nodes)]
        cluster.add_nodes(*nodes, labels={"pykured.dev/demo-pool": "workers"})
        workloads = cluster.new_namespace("demo")
        for node in nodes:
            for j in range(opts.pods_per_node):
                cluster.create_pod(workloads, f"{node}-app-{j}", node=node, labels={"app": "demo"}, grace=1)
        period = "5s" if opts.rollout else "30s"  # requests are seen on the next pass (no watch on Nodes)
        args = [
            f"--concurrency={opts.concurrency}",
            f"--lock-backend={opts.lock_backend}",
            f"--period={period}",
        ]
        with Fleet(cluster, workdir=workdir / "fleet", args=args) as fleet:
            for node in nodes:
                fleet.add(node)  # an agent that starts after its sentinel is touched finds it at its start
            settings = f"(--concurrency={opts.concurrency}, --lock-backend={opts.lock_backend})"
            rolled = time.monotonic()
            rollout_id = ""
            if opts.rollout:
                rollout_id = _start_rollout(cluster)
                print(f"Rollout {rollout_id}: a reboot request on {len(nodes)} nodes {settings}", file=stream)
            else:
                print(f"Touching the reboot sentinel of {len(nodes)} nodes {settings}", file=stream)
                for node in nodes:
                    fleet.touch(node)
            most_down, last_line = 0, ""
            deadline = time.monotonic() + opts.timeout
            while time.monotonic() < deadline:
                listing = cluster.kube().list_nodes()["items"]
                by_name = {n["metadata"]["name"]: n for n in listing}
                states = {n: _node_state(by_name[n], fleet.slots[n].reboots) for n in nodes}
                down = sum(1 for s in states.values() if s in ("cordoned", "rebooting"))
                most_down = max(most_down, down)
                line = "  ".join(f"{n}:{states[n]:<9}" for n in nodes)
                if line != last_line:
                    elapsed = time.monotonic() - rolled
                    prefix = "\r\033[K" if tty else ""
                    print(
                        f"{prefix}[{elapsed:6.1f}s] {line}", end="" if tty else "\n", file=stream, flush=True
                    )
                    last_line = line
                if all(states[n] == "done" for n in nodes):
                    break
                time.sleep(0.1)
            if tty:
                print(file=stream)
            total = time.monotonic() - rolled
            reboots = {n: fleet.slots[n].reboots for n in nodes}
            final = {n["metadata"]["name"]: n for n in cluster.kube().list_nodes()["items"]}
            cordoned = [n for n in nodes if final[n]["spec"].get("unschedulable")]
            ok_rollout = _rollout_done(cluster, rollout_id, len(nodes), stream) if rollout_id else True
        ok = all(r == 1 for r in reboots.values()) and not cordoned and most_down <= opts.concurrency
        ok = ok and ok_rollout
        print("", file=stream)
        print("Summary", file=stream)
        print(
            f"  nodes rolled:            {len(nodes)} in {total:.1f} s "
            f"(whole demo {time.monotonic() - began:.1f} s)",
            file=stream,
        )
        print(f"  most nodes down at once: {most_down} (limit {opts.concurrency})", file=stream)
        print(f"  reboots per node:        {reboots}", file=stream)
        print(f"  left cordoned:           {cordoned or 'none'}", file=stream)
        print(f"  result:                  {'OK' if ok else 'FAILED'}", file=stream)
        return 0 if ok else 1
    finally:
        cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def _start_rollout(cluster: Cluster) -> str:
    """``pykured rollout --selector pykured.dev/demo-pool=workers --reason "demo rollout"``, in process."""
    import datetime
    import secrets

    from pykured.fleet import requester
    from pykured.requests import record as rebootrequest

    kube = cluster.kube()
    now = datetime.datetime.now(datetime.UTC)
    rollout_id = rebootrequest.new_rollout_id(now, secrets.token_hex(2))
    views = requester.nodes(kube, selector="pykured.dev/demo-pool=workers")
    who = requester.whoami(kube)
    requester.request_reboot(
        kube, views, reason="demo rollout", requested_by=who, now=now, rollout_id=rollout_id
    )
    return rollout_id


def _rollout_done(cluster: Cluster, rollout_id: str, count: int, stream: TextIO) -> bool:
    """Print ``pykured rollout status``; whether all ``count`` nodes of the rollout have a new bootID."""
    from pykured.fleet import requester, rollout

    done = rollout.progress(requester.all_nodes(cluster.kube()), rollout_id)
    print(rollout.render(done), end="", file=stream)
    return done.complete and len(done.nodes) == count
