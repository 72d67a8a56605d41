"""Zone pacing on the real API server: 3 zones x 3 nodes racing for the Lease lock, limit 1 per zone (the
pacing's logic on FakeKube: tests/lock/test_paced.py)."""

from __future__ import annotations

import threading
import time

import pytest

from pykured.core.errors import KubeError
from pykured.lock.lease import lease_entry
from pykured.lock.paced import GroupPacedLock, node_label_lookup
from tests.lock.conftest import make_lease_lock
from tests.testenv import TestEnv

pytestmark = pytest.mark.k8s
ZONE = "topology.kubernetes.io/zone"


def paced(k8s: TestEnv, ns: str, node: str, *, concurrency: int, limit: int = 1) -> GroupPacedLock:
    kube = k8s.kube()
    return GroupPacedLock(
        make_lease_lock(kube, ns, node, concurrency=concurrency),
        kube,
        namespace=ns,
        prefix="pykured-lock",
        label=ZONE,
        limit=limit,
        group_of=node_label_lookup(kube, ZONE),
    )


def test_three_zones_of_three_never_two_of_a_zone_at_once(k8s: TestEnv) -> None:
    ns = k8s.new_namespace("paced")
    zone_of: dict[str, str] = {}
    for zone in ("zone-a", "zone-b", "zone-c"):
        for node in k8s.add_nodes(*(k8s.unique(zone) for _ in range(3)), labels={ZONE: zone}):
            zone_of[node] = zone
    kube = k8s.kube()
    path = f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"
    query = {"labelSelector": "pykured.dev/lock=pykured-lock"}
    holders: dict[str, str] = {}
    ever_held: set[str] = set()
    per_zone_max: dict[str, int] = {}
    total_max = 0
    seen = threading.Condition()
    stop = threading.Event()
    rv = kube.get(path, query=query)["metadata"]["resourceVersion"]

    def watch() -> None:  # the API server's watch history of the cluster slots
        nonlocal rv, total_max
        while not stop.is_set():
            try:
                for event in kube.watch(path, query={**query, "resourceVersion": rv}, timeout_seconds=2):
                    obj = event["object"]
                    rv = obj["metadata"].get("resourceVersion", rv)
                    if event["type"] not in ("ADDED", "MODIFIED", "DELETED"):
                        continue
                    entry = lease_entry(obj) if event["type"] != "DELETED" else None
                    with seen:
                        holders[obj["metadata"]["name"]] = entry.node_id if entry else ""
                        live = [h for h in holders.values() if h]
                        ever_held.update(live)
                        total_max = max(total_max, len(live))
                        for zone in set(zone_of.values()):
                            count = sum(1 for h in live if zone_of.get(h) == zone)
                            per_zone_max[zone] = max(per_zone_max.get(zone, 0), count)
                        seen.notify_all()
            except KubeError:
                time.sleep(0.1)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    locks = [paced(k8s, ns, node, concurrency=3) for node in zone_of]
    done: list[str] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(locks))

    def contend(lock: GroupPacedLock) -> None:
        barrier.wait()
        try:
            end = time.monotonic() + 90
            while time.monotonic() < end:
                if lock.acquire(unschedulable=False, now_ns=time.time_ns()).acquired:
                    time.sleep(0.3)  # "down"
                    lock.release()
                    done.append(lock.node_id)
                    return
                lock.wait_for_change(1.0)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=contend, args=(lock,), daemon=True) for lock in locks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    with seen:  # the watch has seen every holder and every release
        caught_up = seen.wait_for(
            lambda: set(zone_of) <= set(holders.values()) | set(done) and not any(holders.values()),
            timeout=90,
        )
    stop.set()
    watcher.join(timeout=10)
    assert not errors
    assert sorted(done) == sorted(zone_of)
    assert caught_up, holders
    assert per_zone_max == {"zone-a": 1, "zone-b": 1, "zone-c": 1}
    assert 1 <= total_max <= 3
