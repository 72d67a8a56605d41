"""Benchmark: lock handoff latency and API load of waiting nodes, annotation lock vs Lease lock.

Starts the real test control plane (etcd + kube-apiserver, ``tests.testenv``), then per backend:

1. a holder takes the lock; ``--waiters`` nodes (threads, each with its own client) wait for it the way the
   daemon does (``acquire``, then ``wait_for_change(60)``) for ``--idle`` seconds: every API request of the
   waiters is counted (``Kube.request`` and ``Kube.watch`` wrapped) → requests per waiting node per minute;
2. the holder releases; each waiter, once it holds the lock, keeps it ``--hold`` seconds and releases it.
   Handoff latency = time from the start of a ``release()`` call to the next holder's ``acquire()`` returning
   (conservative: it includes the release's own requests). Requests per hand-over = every request of every
   waiter from the first release to the last, divided by the hand-overs (the whole fleet's cost of one:
   the release, the take, and whatever the other waiters asked meanwhile).

Backends run with their default settings (annotation: GET poll every 10 s, as kured's RBAC has no watch;
Lease: watch). ``--poll`` changes the annotation poll interval.

    .venv/bin/python -m benchmarks.lock_handoff [--waiters 10] [--idle 60] [--hold 0.2] [--poll 10]
                                                [--wait 60]
"""

from __future__ import annotations

import argparse
import itertools
import logging
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

from pykured.gocompat.goflags import Duration
from pykured.kube.client import Kube
from pykured.lock.annotation import AnnotationLock
from pykured.lock.base import Lock
from pykured.lock.lease import LeaseLock

ANNOTATION = "weave.works/kured-node-lock"


class Counter:
    def __init__(self) -> None:
        self.count = 0
        self.mutex = threading.Lock()

    def wrap(self, kube: Kube) -> Kube:
        real_request, real_watch = kube.request, kube.watch

        def request(*args: Any, **kwargs: Any) -> Any:
            with self.mutex:
                self.count += 1
            return real_request(*args, **kwargs)

        def watch(*args: Any, **kwargs: Any) -> Any:
            with self.mutex:
                self.count += 1
            return real_watch(*args, **kwargs)

        kube.request = request  # type: ignore[method-assign]
        kube.watch = watch  # type: ignore[method-assign]
        return kube


def run_backend(
    env: Any, make: Callable[[Kube, str, str], Lock], *, waiters: int, idle: float, hold: float, wait: float
) -> dict[str, float]:
    namespace = env.new_namespace("bench")
    env.create_daemonset(namespace, "kured")
    holder_name, *names = env.add_nodes(*(env.unique("node") for _ in range(waiters + 1)))
    holder = make(env.kube(), namespace, holder_name)
    assert holder.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    counter = Counter()
    events: list[tuple[float, str]] = []
    mutex = threading.Lock()

    def wait_turn(lock: Lock) -> None:
        while True:
            if lock.acquire(unschedulable=False, now_ns=time.time_ns()).acquired:
                with mutex:
                    events.append((time.monotonic(), "acquire"))
                time.sleep(hold)
                with mutex:
                    events.append((time.monotonic(), "release"))  # the call starts: a conservative handoff
                lock.release()
                return
            lock.wait_for_change(wait)

    admin = ("pykured-admin", ["system:masters"])
    threads = [
        threading.Thread(target=wait_turn, args=(make(counter.wrap(env.kube_as(*admin)), namespace, n),))
        for n in names
    ]
    for thread in threads:
        thread.start()
    time.sleep(min(5.0, idle / 4))  # everybody is waiting now
    start_count, start = counter.count, time.monotonic()
    time.sleep(idle)
    idle_requests, minutes = counter.count - start_count, (time.monotonic() - start) / 60
    with mutex:
        events.append((time.monotonic(), "release"))
    roll_start_count = counter.count
    holder.release()
    for thread in threads:
        thread.join()
    roll_requests = counter.count - roll_start_count
    events.sort()
    latencies = [
        (later[0] - earlier[0]) * 1000
        for earlier, later in itertools.pairwise(events)
        if earlier[1] == "release" and later[1] == "acquire"
    ]
    assert len(latencies) == waiters, events
    return {
        "requests_per_waiter_minute": idle_requests / waiters / minutes,
        "handoff_ms_median": statistics.median(latencies),
        "handoff_ms_p90": statistics.quantiles(latencies, n=10)[-1] if len(latencies) > 1 else latencies[0],
        "handoff_ms_max": max(latencies),
        "total_requests": counter.count,
        "requests_per_handover": roll_requests / waiters,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--waiters", type=int, default=10)
    parser.add_argument(
        "--idle", type=float, default=60.0, help="seconds of waiting measured for the API load"
    )
    parser.add_argument("--hold", type=float, default=0.2, help="seconds each node holds the lock")
    parser.add_argument("--poll", type=float, default=10.0, help="annotation lock poll interval (s)")
    parser.add_argument(
        "--wait",
        type=float,
        default=60.0,
        help="wait_for_change timeout (the daemon: 60 s on the annotation lock, --period on Leases)",
    )
    parser.add_argument("--backend", choices=["both", "annotation", "lease"], default="both")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    from tests.testenv import TestEnv

    def annotation(kube: Kube, namespace: str, node: str) -> Lock:
        return AnnotationLock(
            kube,
            namespace=namespace,
            ds_name="kured",
            annotation=ANNOTATION,
            node_id=node,
            concurrency=1,
            ttl=Duration(0),
            poll_interval=args.poll,
        )

    def lease(kube: Kube, namespace: str, node: str) -> Lock:
        return LeaseLock(
            kube, namespace=namespace, prefix="pykured-lock", node_id=node, concurrency=1, ttl=Duration(0)
        )

    env = TestEnv().start()
    try:
        print(
            f"{args.waiters} waiting nodes, {args.idle:.0f} s of waiting measured, hold {args.hold} s,"
            f" wait_for_change({args.wait:g})"
        )
        print(
            f"{'backend':<24} {'req/waiter/min':>14} {'handoff median':>15} {'p90':>9} {'max':>9}"
            f" {'req/hand-over':>14}"
        )
        backends = [(f"annotation (poll {args.poll:g} s)", annotation), ("lease (watch)", lease)]
        for label, make in backends:
            if args.backend != "both" and not label.startswith(args.backend):
                continue
            r = run_backend(env, make, waiters=args.waiters, idle=args.idle, hold=args.hold, wait=args.wait)
            print(
                f"{label:<24} {r['requests_per_waiter_minute']:>14.2f} {r['handoff_ms_median']:>12.0f} ms"
                f" {r['handoff_ms_p90']:>6.0f} ms {r['handoff_ms_max']:>6.0f} ms"
                f" {r['requests_per_handover']:>14.2f}",
                flush=True,
            )
    finally:
        env.stop()


if __name__ == "__main__":
    main()
