"""Benchmark: drain a node running 100 pods (grace period 1 s) on the real test control plane.

Starts etcd + kube-apiserver + the simulated kubelet, binds 100 ReplicaSet-owned pods to one node, waits
until they run, then times ``Drainer.cordon()`` + ``Drainer.drain()``. With ``--kubectl`` it also times
``kubectl drain --force --ignore-daemonsets --delete-emptydir-data`` (kured's drain settings) on a second
node with the same pods, for comparison.

    .venv/bin/python benchmarks/drain_100_pods.py [--pods 100] [--kubectl]
"""

from __future__ import annotations

import argparse
import logging
import time
from typing import Any

from pykured.drain import Drainer

RS_REF = {
    "apiVersion": "apps/v1",
    "kind": "ReplicaSet",
    "name": "bench-rs",
    "uid": "00000000-0000-0000-0000-0000000000cc",
    "controller": True,
}


def _start() -> Any:
    from pykured_dev.testenv import Cluster

    return Cluster().start()


def _fill(env: Any, namespace: str, node: str, count: int) -> None:
    env.add_nodes(node)
    for i in range(count):
        env.create_pod(namespace, f"{node}-p{i}", node=node, owner=RS_REF, grace=1)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pods = env.kube().list_pods(field_selector=f"spec.nodeName={node}")["items"]
        if sum(p.get("status", {}).get("phase") == "Running" for p in pods) == count:
            return
        time.sleep(0.2)
    raise SystemExit(f"pods on {node} did not all start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=100)
    parser.add_argument("--parallel", type=int, default=32, help="Drainer max_parallel")
    parser.add_argument("--kubectl", action="store_true", help="also time kubectl drain on the same workload")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    env = _start()
    try:
        namespace = env.new_namespace("bench")
        node = env.unique("node")
        _fill(env, namespace, node, args.pods)
        drainer = Drainer(env.kube(), node=node, timeout=120.0, max_parallel=args.parallel)
        started = time.monotonic()
        drainer.cordon()
        result = drainer.drain()
        elapsed = time.monotonic() - started
        print(f"pykured drain: {len(result.evicted)} pods evicted in {elapsed:.2f} s (wall)")
        if args.kubectl:
            other = env.unique("node")
            _fill(env, namespace, other, args.pods)
            started = time.monotonic()
            env.kubectl(
                "drain", other, "--force", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=120s"
            )
            print(f"kubectl drain: {args.pods} pods in {time.monotonic() - started:.2f} s (wall)")
    finally:
        env.stop()


if __name__ == "__main__":
    main()
