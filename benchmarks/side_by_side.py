"""kured 1.23.0 and pykured side by side on one control plane: memory, CPU, API requests, latency, a roll.

Both run as DaemonSet pods of kured's ``kured-ds.yaml`` shape on simulated nodes (the sandbox of
``pykured_dev.testenv.sandbox``: own mount, PID and network namespaces, in-cluster configuration, the real
kured binary from ``tools/kured-build``; pykured's image is the same template with pykured's console script).
Each node has its own namespace, ServiceAccount and DaemonSet, so the API server's audit log (Metadata level,
one line per request) attributes every request to one agent. Printed:

* idle resident memory per agent (VmRSS of the pod's processes) after the idle window;
* CPU seconds of start-up (first ``--settle`` seconds) and per idle hour (the idle window, scaled);
* API requests per node per hour when idle (default ``--period`` 1h, as the chart) and while waiting for a
  lock held by another node (``--waiting-period``, 1m by default so kured's polls show in minutes);
* sentinel → reboot command latency (``--waiting-period``; kured's is up to one period by design);
* a roll of ``--roll-nodes`` nodes at concurrency 1 (``--period=10s``), touch to last release.

    PYTHONPATH=. .venv/bin/python benchmarks/side_by_side.py [--idle 240] [--roll-nodes 6]

Needs root (namespaces). Takes about ``settle + idle`` seconds or kured's roll, whichever is longer.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pykured import __version__
from pykured_dev.testenv import Cluster
from pykured_dev.testenv.fleet import Fleet
from pykured_dev.testenv.history import History, Roll
from pykured_dev.testenv.pods import (
    KURED_IMAGE,
    PYKURED_IMAGE,
    PodTemplate,
    image_console_script,
    kured_daemonset,
    kured_image,
    pykured_image,
)
from pykured_dev.testenv.reference import reference

IMAGES = {"kured": f"{KURED_IMAGE}:1.23.0", "pykured": f"{PYKURED_IMAGE}:{__version__}"}
LOCK = "weave.works/kured-node-lock"
REBOOT = "--reboot-command=/usr/local/sbin/simulated-reboot"
POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
"""


class Bench:
    def __init__(self, cluster: Cluster, fleet: Fleet) -> None:
        self.cluster = cluster
        self.fleet = fleet
        self.started: dict[str, float] = {}
        self.user: dict[str, str] = {}

    def node(self, tag: str, side: str, args: list[str], *, lock_holder: bool = False) -> str:
        """A namespace of its own (so its own ServiceAccount), a DaemonSet, a node and its pod."""
        c = self.cluster
        ns = c.new_namespace(f"{tag}{side[0]}")
        c.apply_rbac_kured(ns, "kured")
        ds = c.kube().create(
            f"/apis/apps/v1/namespaces/{ns}/daemonsets",
            kured_daemonset(ns, "kured", image=IMAGES[side], args=[REBOOT, *args]),
        )
        (node,) = c.add_nodes(f"{ns}-n")
        if lock_holder:
            (other,) = c.add_nodes(f"{ns}-holder")
            value = {
                "nodeID": other,
                "metadata": {"unschedulable": False},
                "created": "2026-01-01T00:00:00Z",
                "TTL": 0,
            }
            ds["metadata"].setdefault("annotations", {})[LOCK] = json.dumps(value, separators=(",", ":"))
            c.kube().replace_daemonset(ns, "kured", ds)
        self.fleet.add_pod(node, PodTemplate.of(ds))
        self.started[node] = time.monotonic()
        self.user[node] = f"system:serviceaccount:{ns}:kured"
        return node

    def pids(self, node: str) -> list[int]:
        sandbox = self.fleet.slots[node].sandbox
        assert sandbox is not None
        return sandbox.agent_pids()

    def cpu_total(self, node: str) -> float:
        """CPU seconds of the pod's processes since they started (``utime + stime``, clock ticks)."""
        total = 0.0
        for pid in self.pids(node):
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return total

    def cpu(self, node: str) -> float:
        """CPU seconds of the pod's live threads (``schedstat``, nanoseconds: precise for idle deltas)."""
        total = 0
        for pid in self.pids(node):
            try:
                for task in os.listdir(f"/proc/{pid}/task"):
                    total += int(Path(f"/proc/{pid}/task/{task}/schedstat").read_text().split()[0])
            except OSError:
                continue
        return total / 1e9

    def rss_mib(self, node: str) -> float:
        total = 0
        for pid in self.pids(node):
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
            except OSError:
                continue
        return total / 1024


def audit_counts(
    log: Path, users: dict[str, str], window: tuple[float, float]
) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """Requests per node (by its ServiceAccount) received within ``window`` (wall-clock seconds), and per
    node by verb and resource (a Node named: the agent's own, or another's, such as a lock holder's)."""
    by_user = {u: n for n, u in users.items()}
    seen: dict[str, set[str]] = {n: set() for n in users}
    kinds: dict[str, dict[str, int]] = {n: {} for n in users}
    for line in log.read_text().splitlines():
        event = json.loads(line)
        node = by_user.get(event.get("user", {}).get("username", ""))
        if node is None:
            continue
        at = datetime.datetime.fromisoformat(event["requestReceivedTimestamp"]).timestamp()
        if window[0] <= at <= window[1] and event["auditID"] not in seen[node]:
            seen[node].add(event["auditID"])
            ref = event.get("objectRef") or {}
            kind = f"{event.get('verb', '?')} {ref.get('resource', '?')}"
            if ref.get("resource") == "nodes" and ref.get("name"):
                kind += " (own)" if ref["name"] == node else " (other)"
            kinds[node][kind] = kinds[node].get(kind, 0) + 1
    return {n: len(ids) for n, ids in seen.items()}, kinds


def wait(predicate: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return predicate()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle", type=float, default=240.0, help="idle measuring window, seconds")
    parser.add_argument("--settle", type=float, default=180.0, help="start-up allowance before measuring")
    parser.add_argument("--waiting-period", default="1m")
    parser.add_argument("--per-side", type=int, default=2, help="idle and waiting agents per side")
    parser.add_argument("--latency-trials", type=int, default=3)
    parser.add_argument("--roll-nodes", type=int, default=6)
    opts = parser.parse_args()
    ref = reference()
    work = Path(tempfile.mkdtemp(prefix="pykured-side-by-side-"))
    policy = work / "audit-policy.yaml"
    policy.write_text(POLICY)
    audit = work / "audit.log"
    cluster = Cluster(
        apiserver_args=[
            f"--audit-policy-file={policy}",
            f"--audit-log-path={audit}",
            "--audit-log-mode=blocking",
        ]
    ).start()
    fleet = Fleet(
        cluster,
        workdir=work / "fleet",
        # pykured as its image starts it: no development install's import hook
        images={
            KURED_IMAGE: kured_image(ref.kured),
            PYKURED_IMAGE: pykured_image(image_console_script(work)),
        },
    ).__enter__()
    history = History(cluster.kube()).start()
    bench = Bench(cluster, fleet)
    sides = ("kured", "pykured")
    try:
        idle = {s: [bench.node("idle", s, []) for _ in range(opts.per_side)] for s in sides}
        waiting = {
            s: [
                bench.node("wait", s, [f"--period={opts.waiting_period}"], lock_holder=True)
                for _ in range(opts.per_side)
            ]
            for s in sides
        }
        latency = {
            s: [bench.node("lat", s, [f"--period={opts.waiting_period}"]) for _ in range(opts.latency_trials)]
            for s in sides
        }
        for nodes in waiting.values():
            for node in nodes:
                fleet.touch(node)
        began = time.monotonic()

        # a roll of N nodes per side, concurrency 1, in the background
        roll_result: dict[str, float] = {}

        def roll(side: str) -> None:
            ns = cluster.new_namespace(f"roll{side[0]}")
            cluster.apply_rbac_kured(ns, "kured")
            ds = cluster.kube().create(
                f"/apis/apps/v1/namespaces/{ns}/daemonsets",
                kured_daemonset(ns, "kured", image=IMAGES[side], args=[REBOOT, "--period=10s"]),
            )
            nodes = cluster.add_nodes(*(f"{ns}-{i}" for i in range(opts.roll_nodes)))
            for node in nodes:
                fleet.add_pod(node, PodTemplate.of(ds))
            start = time.monotonic()
            for node in nodes:
                fleet.touch(node)

            def done(changes: list[Any]) -> bool:
                r = Roll.of(changes, daemonset=f"{ns}/kured", annotation=LOCK, nodes=nodes)
                return all(v >= 1 for v in r.reboots().values()) and not r.holders and not r.cordoned

            ok = history.wait(done, timeout=1200)
            roll_result[side] = time.monotonic() - start if ok else float("nan")
            r = Roll.of(history.changes(), daemonset=f"{ns}/kured", annotation=LOCK, nodes=nodes)
            roll_result[side + " max holders"] = r.max_holders
            for node in nodes:
                fleet.remove(node)

        rollers = [threading.Thread(target=roll, args=(s,)) for s in sides]
        for t in rollers:
            t.start()

        # latency: touch each latency node once its agent is past kured's first loop (90 s)
        time.sleep(max(0.0, 100 - (time.monotonic() - began)))
        touched: dict[str, float] = {}
        for side in sides:
            for node in latency[side]:
                touched[node] = time.time()
                fleet.touch(node)

        time.sleep(max(0.0, opts.settle - (time.monotonic() - began)))
        startup_cpu = {n: bench.cpu_total(n) for s in sides for n in idle[s]}
        before = {n: bench.cpu(n) for s in sides for n in idle[s]}
        window = (time.time(), time.time() + opts.idle)
        time.sleep(opts.idle)
        idle_cpu = {n: bench.cpu(n) - before[n] for n in before}
        rss = {n: bench.rss_mib(n) for s in sides for n in idle[s]}
        requests, kinds = audit_counts(audit, bench.user, window)
        wait(lambda: all(fleet.requests(n) for s in sides for n in latency[s]), 120)
        lat = {
            n: (fleet.slots[n].dir / "sandbox" / "nsenter.log").stat().st_mtime - touched[n]
            for s in sides
            for n in latency[s]
            if fleet.requests(n)
        }
        for t in rollers:
            t.join()

        hour = 3600 / opts.idle
        print(f"side by side, {time.strftime('%Y-%m-%d %H:%M')} (machine load {os.getloadavg()[0]:.1f})")
        print(f"{'':34s} {'kured 1.23.0':>14s} {'pykured':>14s}")

        def row(label: str, values: dict[str, list[float]], fmt: str) -> None:
            cells = []
            for s in sides:
                v = values[s]
                cells.append(fmt.format(statistics.mean(v)) if v else "n/a")
            print(f"{label:34s} {cells[0]:>14s} {cells[1]:>14s}")

        row("idle RSS per agent (MiB)", {s: [rss[n] for n in idle[s]] for s in sides}, "{:.1f}")
        row(
            f"start-up CPU, first {opts.settle:.0f} s (s)",
            {s: [startup_cpu[n] for n in idle[s]] for s in sides},
            "{:.2f}",
        )
        row("idle CPU per hour (s)", {s: [idle_cpu[n] * hour for n in idle[s]] for s in sides}, "{:.2f}")
        row(
            "API requests/node/hour, idle",
            {s: [requests[n] * hour for n in idle[s]] for s in sides},
            "{:.0f}",
        )
        row(
            f"API requests/node/hour, waiting ({opts.waiting_period})",
            {s: [requests[n] * hour for n in waiting[s]] for s in sides},
            "{:.0f}",
        )
        row(
            f"sentinel -> reboot command (s, {opts.waiting_period})",
            {s: [lat[n] for n in latency[s] if n in lat] for s in sides},
            "{:.2f}",
        )
        row(
            f"roll of {opts.roll_nodes} nodes, concurrency 1 (s)",
            {s: [roll_result.get(s, float("nan"))] for s in sides},
            "{:.1f}",
        )
        for s in sides:
            for group, label in ((idle[s], "idle"), (waiting[s], "waiting")):
                total: dict[str, float] = {}
                for n in group:
                    for kind, count in kinds[n].items():
                        total[kind] = total.get(kind, 0.0) + count * hour / len(group)
                text = ", ".join(f"{k} {v:.0f}" for k, v in sorted(total.items(), key=lambda kv: -kv[1]))
                print(f"  {s} {label}, per node per hour: {text or 'none'}")
        holders = {s: roll_result.get(f"{s} max holders") for s in sides}
        print(f"(idle {opts.idle:.0f} s after {opts.settle:.0f} s; holders at once in the rolls: {holders})")
        for s in sides:
            print(f"  {s} latencies (s): {sorted(round(lat[n], 2) for n in latency[s] if n in lat)}")
    finally:
        history.stop()
        fleet.close()
        cluster.stop()


if __name__ == "__main__":
    main()
