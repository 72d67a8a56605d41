"""Helpers for the lock tests: the API server's history of the lock, races, fault injection, the locks' test
settings; and the in-process fixtures (``kube``: a FakeKube; ``lock_ns``, ``nodes``, ``now_ns``) of the lock
tests in this directory (the real API server's are in tests/e2e/lock/conftest.py)."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from pykured.core.errors import ForbiddenError, KubeError
from pykured.gocompat.goflags import Duration
from pykured.kube.api import KubeApi
from pykured.kube.client import Kube, Obj
from pykured.lock.annotation import AnnotationLock
from pykured.lock.base import Lock
from pykured.lock.lease import LOCK_LABEL, LeaseLock, lease_entry
from pykured.lock.record import LockEntry, LockValue, decode
from pykured_dev.testenv.procs import free_port
from tests.fakes import FakeKube
from tests.testenv import TestEnv

ANNOTATION = "weave.works/kured-node-lock"
KURED_GROUPS = ["system:serviceaccounts", "system:serviceaccounts:{ns}"]


class History:
    """Every version of the lock objects, recorded by a watch started before the race.

    ``counts`` holds, per resourceVersion, the number of holders the API server stored at that version.
    """

    def __init__(
        self, kube: Kube, path: str, query: dict[str, str], count: Callable[[str, Obj], int]
    ) -> None:
        self._kube = kube
        self._path = path
        self._query = query
        self._count = count
        listed = kube.get(path, query=query)
        self._rv = listed["metadata"]["resourceVersion"]
        self.counts: list[tuple[int, int]] = []
        self.holders_seen: set[str] = set()
        self._stop = threading.Event()
        self._progress = threading.Condition()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                for event in self._kube.watch(
                    self._path, query={**self._query, "resourceVersion": self._rv}, timeout_seconds=2
                ):
                    obj = event["object"]
                    with self._progress:
                        self._rv = obj["metadata"]["resourceVersion"]
                        if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                            self.counts.append((int(self._rv), self._count(event["type"], obj)))
                        self._progress.notify_all()
            except KubeError:  # pragma: no cover - reported by the assertions
                time.sleep(0.1)

    def _caught_up_with(self, listed: Obj) -> bool:
        """The watch has passed ``listed``: an event or bookmark at or after the list's resourceVersion, or
        (the watch cache's bookmarks only move when its resource changes) every listed object's version."""
        seen = int(self._rv)
        if seen >= int(listed["metadata"]["resourceVersion"]):
            return True
        return all(int(item["metadata"]["resourceVersion"]) <= seen for item in listed.get("items") or [])

    def stop(self, timeout: float = 30.0) -> History:
        """Stop once the watch has caught up with the API server, so every write made before this call is in
        ``counts``: it has seen an event or bookmark at or after a fresh list's resourceVersion, or at or
        after the version of every object that list returns."""
        listed = self._kube.get(self._path, query=self._query)
        with self._progress:
            caught_up = self._progress.wait_for(lambda: self._caught_up_with(listed), timeout=timeout)
        self._stop.set()
        self._thread.join(timeout=10)
        behind = listed["metadata"]["resourceVersion"]
        assert caught_up, f"the watch of {self._path} stayed at resourceVersion {self._rv}, behind {behind}"
        return self

    @property
    def max_holders(self) -> int:
        return max((n for _, n in self.counts), default=0)


def annotation_history(kube: Kube, namespace: str, ds_name: str) -> History:
    seen: set[str] = set()

    def count(kind: str, obj: Obj) -> int:
        raw = (obj["metadata"].get("annotations") or {}).get(ANNOTATION)
        entries = decode(raw).entries if raw and kind != "DELETED" else ()
        seen.update(e.node_id for e in entries)
        return len(entries)

    history = History(
        kube,
        f"/apis/apps/v1/namespaces/{namespace}/daemonsets",
        {"fieldSelector": f"metadata.name={ds_name}"},
        count,
    )
    history.holders_seen = seen
    return history


def lease_history(kube: Kube, namespace: str, prefix: str) -> History:
    holders: dict[str, str] = {}
    seen: set[str] = set()

    def count(kind: str, obj: Obj) -> int:
        entry = lease_entry(obj) if kind != "DELETED" else None
        holders[obj["metadata"]["name"]] = entry.node_id if entry else ""
        if entry:
            seen.add(entry.node_id)
        return sum(1 for h in holders.values() if h)

    history = History(
        kube,
        f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases",
        {"labelSelector": f"{LOCK_LABEL}={prefix}"},
        count,
    )
    history.holders_seen = seen
    return history


@dataclasses.dataclass
class RaceResult:
    winners: list[str] = dataclasses.field(default_factory=list)
    max_inside: int = 0
    errors: list[BaseException] = dataclasses.field(default_factory=list)
    waits: int = 0


def race(
    locks: Sequence[Lock], *, hold: float = 0.05, deadline: float = 90.0, wait: float = 2.0
) -> RaceResult:
    """Every lock contends until it held the lock once (briefly); counts how many were inside at once."""
    result = RaceResult()
    mutex = threading.Lock()
    inside = 0
    barrier = threading.Barrier(len(locks))
    end = time.monotonic() + deadline

    def contend(lock: Lock) -> None:
        nonlocal inside
        barrier.wait()
        try:
            while time.monotonic() < end:
                if lock.acquire(unschedulable=False, now_ns=time.time_ns()).acquired:
                    with mutex:
                        inside += 1
                        result.max_inside = max(result.max_inside, inside)
                    time.sleep(hold)
                    with mutex:
                        inside -= 1
                        result.winners.append(lock.node_id)
                    lock.release()
                    return
                with mutex:
                    result.waits += 1
                lock.wait_for_change(wait)
        except BaseException as exc:
            result.errors.append(exc)

    threads = [threading.Thread(target=contend, args=(lock,), daemon=True) for lock in locks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=deadline + 30)
    return result


def assert_one_turn_each(
    result: RaceResult, names: Sequence[str], concurrency: int, *histories: History
) -> None:
    """A race's verdict: no errors, every contender held the lock once, and never more than ``concurrency``
    holders at once, inside the race and in every stored version each history saw."""
    assert not result.errors, result.errors
    assert sorted(result.winners) == sorted(names), "every contender got the lock once"
    assert result.max_inside <= concurrency
    for history in histories:
        assert history.max_holders <= concurrency


class FaultyKube:
    """A client whose chosen methods fail: ``before`` the real call (nothing written) or ``after`` it
    (the write landed, the answer was lost: the ambiguous case)."""

    def __init__(self, kube: KubeApi) -> None:
        self._kube = kube
        self.faults: dict[str, list[tuple[str, KubeError]]] = {}
        self.calls: dict[str, int] = {}
        self.replaced: dict[str, Callable[..., Any]] = {}
        """Methods replaced outright (by name); calls to them are not counted."""

    def fail(self, method: str, when: str, exc: KubeError, times: int = 1) -> None:
        self.faults.setdefault(method, []).extend([(when, exc)] * times)

    def __getattr__(self, name: str) -> Any:
        if name in self.replaced:
            return self.replaced[name]
        real = getattr(self._kube, name)
        if not callable(real):
            return real

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] = self.calls.get(name, 0) + 1
            pending = self.faults.get(name)
            if pending:
                when, exc = pending.pop(0)
                if when == "before":
                    raise exc
                real(*args, **kwargs)
                raise exc
            return real(*args, **kwargs)

        return call


class OwnNodeOnly:
    """``kube`` as an agent's pod-bound token on ``node`` sees it under the admission policies' own-node rules
    (kustomize/base/admission.yaml): a Lease another node holds is not written, no other node is made a
    holder, and in kured's annotation only ``node``'s entry changes (the other entries, and while there are
    any the form and ``maxOwners``, stay). A refusal is the API server's 403 naming the policy. In process,
    for the locks' logic; the policies themselves are proven on the real API server
    (tests/e2e/test_lock_policies.py)."""

    LEASES = "pykured-agent-leases"
    DAEMONSET = "pykured-agent-daemonset"

    def __init__(self, kube: FakeKube, node: str) -> None:
        self._kube = kube
        self.node = node

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kube, name)

    def _refuse(self, what: str, policy: str, why: str) -> KubeError:
        return ForbiddenError(
            f"{what} is forbidden: ValidatingAdmissionPolicy '{policy}' with binding '{policy}' denied "
            f"request: {why} (HTTP 403)",
            status=403,
        )

    def _check_lease(self, namespace: str, obj: Obj, *, create: bool) -> None:
        name = obj["metadata"]["name"]
        old = None if create else self._kube.leases.get((namespace, name))
        old_holder = ((old or {}).get("spec") or {}).get("holderIdentity") or ""
        holder = (obj.get("spec") or {}).get("holderIdentity") or ""
        what = f'leases.coordination.k8s.io "{name}"'
        if old_holder not in ("", self.node):
            why = f"pykured agent on node {self.node} may not write Lease {name}, held by node {old_holder}"
            raise self._refuse(what, self.LEASES, why)
        if holder not in ("", self.node):
            why = f"pykured agent on node {self.node} may not make node {holder} the holder of Lease {name}"
            raise self._refuse(what, self.LEASES, why)

    def create_lease(self, namespace: str, obj: Obj) -> Obj:
        self._check_lease(namespace, obj, create=True)
        return self._kube.create_lease(namespace, obj)

    def replace_lease(self, namespace: str, name: str, obj: Obj) -> Obj:
        self._check_lease(namespace, obj, create=False)
        return self._kube.replace_lease(namespace, name, obj)

    def replace_daemonset(self, namespace: str, name: str, obj: Obj) -> Obj:
        def value(ds: Obj) -> LockValue | None:
            raw = ((ds.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION)
            return None if raw is None else decode(raw)

        def others(found: LockValue | None) -> tuple[tuple[str, ...], tuple[LockEntry, ...]]:
            if found is None:
                return (), ()
            shape = (found.form.value, str(found.max_owners)) if found.form.value == "multi" else ("single",)
            return shape, tuple(e for e in found.entries if e.node_id != self.node)

        old_shape, old_others = others(value(self._kube.daemonsets[(namespace, name)]))
        new_shape, new_others = others(value(obj))
        if old_others and (new_others != old_others or new_shape != old_shape):
            why = f"pykured agent on node {self.node} may change only its own entry in the lock annotation"
            raise self._refuse(f'daemonsets.apps "{name}"', self.DAEMONSET, why)
        return self._kube.replace_daemonset(namespace, name, obj)


def make_annotation_lock(
    kube: Any, namespace: str, node: str, *, concurrency: int = 1, **kw: Any
) -> AnnotationLock:
    options: dict[str, Any] = {
        "ttl": Duration(0),
        "conflict_delay": 0.2,
        "retry_interval": 0.2,
        "retry_timeout": 10.0,
        "poll_interval": 0.2,
        "watch": False,  # polled, as under kured's RBAC; the watched wait's tests ask for it
    }
    options.update(kw)
    return AnnotationLock(
        kube,
        namespace=namespace,
        ds_name="kured",
        annotation=ANNOTATION,
        node_id=node,
        concurrency=concurrency,
        **options,
    )


def dead_kube(k8s: TestEnv) -> Kube:
    """An admin client of ``k8s`` whose server address has nothing listening (2 s request timeout)."""
    config = json.loads(Path(k8s.admin_kubeconfig).read_text())
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{free_port()}"
    path = Path(k8s.workdir) / f"kubeconfig-dead-{free_port()}.json"
    path.write_text(json.dumps(config))
    return Kube.from_kubeconfig(str(path), timeout=2)


def make_lease_lock(kube: Any, namespace: str, node: str, *, concurrency: int = 1, **kw: Any) -> LeaseLock:
    options: dict[str, Any] = {
        "ttl": Duration(0),
        "retry_interval": 0.2,
        "retry_timeout": 10.0,
        "watch_timeout": 10,
        "stagger": 0.25,  # a freed slot is taken within 0.25 s and a round trip (the default spreads 1 s)
    }
    options.update(kw)
    return LeaseLock(
        kube, namespace=namespace, prefix="pykured-lock", node_id=node, concurrency=concurrency, **options
    )


T_NS = 1_795_000_000_000_000_000
"""The injected wall clock of the in-process lock tests (2026-11-18, nanoseconds)."""


@pytest.fixture
def kube() -> FakeKube:
    """An in-memory API server (evidence for the locks' logic only)."""
    return FakeKube()


@pytest.fixture
def lock_ns(kube: FakeKube) -> str:
    """A namespace of ``kube`` holding an empty ``kured`` DaemonSet."""
    kube.add_daemonset("kube-system", "kured")
    return "kube-system"


@pytest.fixture
def nodes(kube: FakeKube) -> Callable[[int], list[str]]:
    """``nodes(n)``: n more Ready Nodes of ``kube``."""
    made: list[str] = []

    def make(n: int) -> list[str]:
        names = [f"node-{len(made) + i}" for i in range(n)]
        for name in names:
            kube.add_node(name)
        made.extend(names)
        return names

    return make
