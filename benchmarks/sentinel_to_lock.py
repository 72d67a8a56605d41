"""Sentinel-to-lock latency: from touching the reboot sentinel to the lock write on the API server.

A real pykured agent process runs on a simulated node of the local test control plane; each trial touches its
sentinel and measures until the API server holds the node's lock (a watch on the Leases, or a tight GET of the
DaemonSet annotation for ``--lock-backend daemonset``), then lets the simulated reboot finish before the next
trial. kured's equivalent is 30-90 s at start-up and up to ``--period`` (1 h) afterwards.

    PYTHONPATH=. .venv/bin/python benchmarks/sentinel_to_lock.py [--trials 50] [--lock-backend lease]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

from pykured_dev.testenv import Cluster
from pykured_dev.testenv.fleet import Fleet


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--lock-backend", choices=["lease", "daemonset"], default="lease")
    opts = parser.parse_args()
    cluster = Cluster().start()
    try:
        ns = cluster.new_namespace("bench")
        cluster.create_daemonset(ns, "kured")
        node = cluster.add_nodes("bench-node")[0]
        kube = cluster.kube()
        held = threading.Event()
        stop = threading.Event()

        def holder() -> str:
            if opts.lock_backend == "lease":
                try:
                    return str(kube.get_lease(ns, "kured-lock-0")["spec"].get("holderIdentity") or "")
                except Exception:
                    return ""
            value = (
                kube.get_daemonset(ns, "kured")["metadata"]
                .get("annotations", {})
                .get("weave.works/kured-node-lock", "")
            )
            return node if node in value else ""

        def observe() -> None:
            while not stop.is_set():
                if holder() == node:
                    held.set()
                time.sleep(0.002)

        threading.Thread(target=observe, daemon=True).start()
        samples: list[float] = []
        with Fleet(
            cluster,
            workdir=Path(tempfile.mkdtemp(prefix="bench-")),
            spawn="exec",  # each agent pays its own start-up, as in a pod
            args=[f"--ds-namespace={ns}", f"--lock-backend={opts.lock_backend}", "--period=1h"],
        ) as fleet:
            fleet.add(node)
            time.sleep(2.0)
            for trial in range(opts.trials):
                held.clear()
                before = fleet.slots[node].reboots
                start = time.monotonic()
                fleet.touch(node)
                if not held.wait(30):
                    raise SystemExit(f"trial {trial}: lock not taken within 30 s")
                samples.append(time.monotonic() - start)
                done = lambda b=before: fleet.slots[node].reboots > b and holder() != node  # noqa: E731
                fleet.wait_for(done, timeout=60)
                time.sleep(1.0)  # let the restarted agent settle into its idle wait
        stop.set()
        ms = [s * 1000 for s in samples]
        print(
            f"sentinel -> lock held on the API server ({opts.lock_backend}, {len(ms)} trials, 2 ms polling)"
        )
        print(
            f"  p50 {statistics.median(ms):.0f} ms   p99 {percentile(ms, 0.99):.0f} ms   "
            f"min {min(ms):.0f} ms   max {max(ms):.0f} ms"
        )
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
