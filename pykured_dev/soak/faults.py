"""The fault injector: each fault at a random moment, aimed mostly at nodes mid-drain or mid-reboot.

Kinds (``Faults.KINDS``):

* ``sigkill`` — the agent crashes (SIGKILL); its pod comes back at once.
* ``sigterm`` — the pod is deleted: SIGTERM, and the agent must exit within the default 30 s grace period
  (a longer exit is a violation, and it is then killed as the kubelet would); a new pod starts.
* ``apiserver-restart`` — kube-apiserver stops and starts again on the same address; etcd keeps its data.
* ``partition`` — one agent's proxy drops (connection reset) or stalls (a black hole) every connection for
  5–60 s.
* ``lock-conflict`` — a burst of foreign writes to the lock objects (Lease and DaemonSet annotations) so the
  agents' compare-and-swap writes meet 409 Conflicts.
* ``eviction-fails`` — a pod under a PodDisruptionBudget that allows no disruption lands on a node, so its
  drain keeps failing until the budget is deleted 10–60 s later.
* ``node-delete`` — a Node (preferably a lock holder) is deleted with its agent; an autoscaler brings a fresh
  Node of the same name back 5–20 s later.

A fault that lasts (a partition, a failing eviction, a deleted Node) ends with the run at the latest (after
5 s at least): the faults take the run's minutes, and the fleet's convergence is timed from there.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar, Protocol, TypeVar

from pykured.core import errors
from pykured.kube.client import MERGE_PATCH

if TYPE_CHECKING:
    import random

    from pykured_dev.soak.observer import Observer
    from pykured_dev.soak.proxy import FaultProxy
    from pykured_dev.testenv import Cluster
    from pykured_dev.testenv.fleet import Fleet


class Harness(Protocol):
    """What the faults need from the run (``pykured_dev.soak.scenario.Soak``)."""

    rng: random.Random
    cluster: Cluster
    names: list[str]
    deleted: set[str]
    ever_deleted: set[str]
    admin: dict[str, float]
    proxies: dict[str, FaultProxy]
    lock: threading.RLock

    def say(self, text: str) -> None: ...
    def uid(self, prefix: str) -> str: ...
    def create_web_pod(self, node: str) -> None: ...


GRACE_SECONDS = 30.0
T = TypeVar("T")


class Faults:
    """Injects faults into one soak run; see the module docstring."""

    KINDS: ClassVar[dict[str, int]] = {
        "sigkill": 3,
        "sigterm": 3,
        "apiserver-restart": 1,
        "partition": 3,
        "lock-conflict": 2,
        "eviction-fails": 2,
        "node-delete": 1,
    }
    """Each kind and its weight (an API server restart stops every agent's work for ~10–20 s here)."""

    def __init__(self, soak: Harness, observer: Observer, fleet: Fleet) -> None:
        self.soak = soak
        self.observer = observer
        self.fleet = fleet
        self.rng = soak.rng
        self.counts: collections.Counter[str] = collections.Counter()
        self.sigterm_exit_max = 0.0
        self.last_fault_end: float | None = None
        self._threads: list[threading.Thread] = []
        self._pdbs: list[str] = []
        self._apiserver = threading.Lock()
        self.ends_at: float | None = None
        """When the run stops injecting (``time.monotonic()``): a fault that lasts ends by then at the latest
        (5 s at least), so that the faults take the run's minutes and no more."""
        self._spawner = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="fault-spawner")
        """Child processes die with the thread that started them (``PR_SET_PDEATHSIG``), so every process
        a fault starts (agents, kube-apiserver) is started by this one long-lived thread."""

    # -- choosing ------------------------------------------------------------------------------------------

    def target(self) -> str | None:
        """A live node: half the time one mid-drain (holding, no reboot yet), a quarter mid-reboot."""
        names = [n for n in self.soak.names if n not in self.soak.deleted]
        holders = self.observer.holders()
        mid_drain, mid_reboot = [], []
        for name in names:
            state = self.observer.node(name)
            if state is None:
                continue
            if "pykured.dev/reboot-boot-id" in state.annotations or not state.ready:
                mid_reboot.append(name)
            elif name in holders:
                mid_drain.append(name)
        roll = self.rng.random()
        pool = mid_drain if roll < 0.5 else mid_reboot if roll < 0.75 else names
        pool = pool or names
        return self.rng.choice(pool) if pool else None

    def inject(self) -> None:
        """One fault of a random kind, in its own thread (faults overlap)."""
        kind = self.rng.choices(list(self.KINDS), weights=list(self.KINDS.values()))[0]
        node = self.target()
        if node is None:
            return
        if kind == "apiserver-restart" and self._apiserver.locked():
            return
        self.counts[kind] += 1
        self.soak.say(f"fault: {kind} on {node}")
        action = getattr(self, "_" + kind.replace("-", "_"))
        thread = threading.Thread(target=self._run, args=(action, node), name=f"fault-{kind}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def _run(self, action: object, node: str) -> None:
        try:
            action(node)  # type: ignore[operator]
        except Exception as exc:
            self.soak.say(f"fault on {node} failed: {type(exc).__name__}: {exc}")
        finally:
            self.last_fault_end = time.monotonic()

    def finish(self) -> None:
        """Wait for every running fault to end (partitions heal, deleted nodes come back)."""
        for thread in self._threads:
            thread.join(timeout=120)

    def close(self) -> None:
        """After the run: the spawner thread ends (its children are stopped by then)."""
        self._spawner.shutdown(wait=False)

    def _spawn(self, fn: Callable[..., T], *args: object) -> T:
        return self._spawner.submit(fn, *args).result()

    def failing_pdbs(self) -> list[str]:
        """The budgets that still block evictions."""
        return list(self._pdbs)

    # -- the faults ----------------------------------------------------------------------------------------

    def _sigkill(self, node: str) -> None:
        proc = self.fleet.signal(node, signal.SIGKILL)
        if proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
            self.rng_sleep(0.5, 3)
            self._spawn(self.fleet.replace, node, proc)

    def _sigterm(self, node: str) -> None:
        proc = self.fleet.signal(node, signal.SIGTERM)
        if proc is None:
            return
        began = time.monotonic()
        try:
            proc.wait(timeout=GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            self.observer.violation(
                f"the agent of {node} did not exit within {GRACE_SECONDS:.0f} s of SIGTERM"
            )
            proc.kill()
            proc.wait()
        took = time.monotonic() - began
        if proc.returncode == -signal.SIGKILL and took < GRACE_SECONDS:
            return  # its host rebooted meanwhile: the fleet already started a new agent
        self.sigterm_exit_max = max(self.sigterm_exit_max, took)
        self.rng_sleep(0.5, 3)
        self._spawn(self.fleet.replace, node, proc)

    def _apiserver_restart(self, node: str) -> None:
        with self._apiserver:
            down = self.rng.uniform(0, 5)
            took = self._spawn(lambda: self.soak.cluster.restart_apiserver(down_seconds=down))
            self.soak.say(f"kube-apiserver back after {took:.1f} s")

    def _partition(self, node: str) -> None:
        proxy = self.soak.proxies[node]
        if proxy.mode != "pass":
            return  # already cut off
        mode = self.rng.choice(("drop", "stall"))
        seconds = self.lasting(5, 60)
        self.soak.say(f"  {node} cut off ({mode}) for {seconds:.0f} s")
        proxy.set_mode(mode)
        try:
            time.sleep(seconds)
        finally:
            proxy.set_mode("pass")

    def _lock_conflict(self, node: str) -> None:
        kube = self.soak.cluster.kube()
        end = time.monotonic() + self.rng.uniform(2, 8)
        count = 0
        while time.monotonic() < end:
            count += 1
            stamp = {"metadata": {"annotations": {"soak.pykured.dev/foreign-writer": str(count)}}}
            with contextlib.suppress(errors.KubeError):
                kube.request(
                    "PATCH",
                    "/apis/apps/v1/namespaces/kube-system/daemonsets/kured",
                    body=stamp,
                    content_type=MERGE_PATCH,
                )
            try:
                leases = kube.list_leases("kube-system", label_selector="pykured.dev/lock").get("items", [])
            except errors.KubeError:
                leases = []
            for lease in leases:
                with contextlib.suppress(errors.KubeError):
                    kube.request(
                        "PATCH",
                        f"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{lease['metadata']['name']}",
                        body=stamp,
                        content_type=MERGE_PATCH,
                    )
            time.sleep(self.rng.uniform(0.02, 0.2))

    def _eviction_fails(self, node: str) -> None:
        cluster = self.soak.cluster
        name = self.soak.uid("stuck")
        labels = {"soak/stuck": name}
        self._pdbs.append(name)
        try:
            self.retry(cluster.create_pdb, "soak", name, labels, min_available=1)
            self.retry(cluster.set_pdb_status, "soak", name, disruptions_allowed=0, healthy=1)
            with contextlib.suppress(errors.NotFoundError):  # the node may be gone meanwhile
                self.retry(cluster.create_pod, "soak", name, node=node, labels=labels, grace=1)
            time.sleep(self.lasting(10, 60))
        finally:
            with contextlib.suppress(errors.KubeError):
                self.retry(
                    cluster.kube().request,
                    "DELETE",
                    f"/apis/policy/v1/namespaces/soak/poddisruptionbudgets/{name}",
                )
            self._pdbs.remove(name)

    def _node_delete(self, node: str) -> None:
        holders = [n for n in self.observer.holders() if n in self.soak.names and n not in self.soak.deleted]
        if holders:
            node = self.rng.choice(holders)
        soak, fleet, cluster = self.soak, self.fleet, self.soak.cluster
        with soak.lock:
            if node in soak.deleted:
                return
            soak.deleted.add(node)
            soak.ever_deleted.add(node)
        soak.say(f"  deleting node {node} (holder: {node in self.observer.holders()})")
        fleet.pause(node)
        self.observer.drop_needs(node)
        self.observer.admin_uncordon(node)
        soak.admin.pop(node, None)
        slot = fleet.slots[node]
        for path in (slot.sentinel, slot.request):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        with contextlib.suppress(errors.NotFoundError):
            self.retry(cluster.delete_node, node)
        time.sleep(self.lasting(5, 20))
        self.retry(cluster.kubelet.add_node, node)
        soak.create_web_pod(node)
        fleet.paused.discard(node)
        self._spawn(fleet.replace, node, None)
        with soak.lock:
            soak.deleted.discard(node)
        soak.say(f"  node {node} is back")

    def retry(self, fn: Callable[..., T], *args: object, **kwargs: object) -> T:
        """The harness's own API calls outlast an API server restart (60 s); 404 and 409 are answers."""
        deadline = time.monotonic() + 60
        while True:
            try:
                return fn(*args, **kwargs)
            except (errors.NotFoundError, errors.ConflictError):
                raise
            except errors.KubeError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.5)

    def lasting(self, low: float, high: float) -> float:
        """A fault's length: drawn between ``low`` and ``high`` seconds, cut at the end of the run."""
        seconds = self.rng.uniform(low, high)
        if self.ends_at is not None:
            seconds = min(seconds, max(self.ends_at - time.monotonic(), 5.0))
        return seconds

    def rng_sleep(self, low: float, high: float) -> None:
        time.sleep(self.rng.uniform(low, high))
