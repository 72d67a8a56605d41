"""A FleetLock rig on the real apiserver: a kured DaemonSet lock, simulated nodes, a Zincati-like client."""

from __future__ import annotations

import dataclasses
import datetime
import http.client
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pykured.cycle.book import NodeBook
from pykured.cycle.decide import CyclePolicy
from pykured.cycle.observers import CycleObservers
from pykured.cycle.steps import Behaviour, Hands
from pykured.cyclemetrics import CycleMetrics
from pykured.drain import Drainer
from pykured.fleetlock import FleetLockServer
from pykured.fleetlock.appid import app_specific_id
from pykured.fleetlock.service import ZincatiGrant
from pykured.gocompat.goflags import Duration
from pykured.kube.client import Kube
from pykured.kube.events import EventRecorder
from pykured.lock.annotation import AnnotationLock
from pykured.metrics import Metrics
from pykured.policy.weekly import TimeWindow
from pykured_dev.eventually import eventually
from tests.fakes import RecordingNotifier
from tests.testenv import TestEnv

ANNOTATION = "weave.works/kured-node-lock"
ALWAYS = TimeWindow.parse(["su", "mo", "tu", "we", "th", "fr", "sa"], "0:00", "23:59:59", "UTC")


def machine_id(node: str) -> str:
    """The simulated kubelet's ``status.nodeInfo.machineID`` for ``node``."""
    return uuid.uuid5(uuid.NAMESPACE_DNS, node).hex


def zincati_id(node: str) -> str:
    return app_specific_id(machine_id(node))


def give_address(kube: Kube, node: str, address: str = "127.0.0.1") -> None:
    """Add ``address`` to the Node's ``status.addresses`` (as an ExternalIP, which the simulated kubelet's
    strategic-merge status patches keep): central FleetLock answers a caller from that address for it."""
    patch = {"status": {"addresses": [{"type": "ExternalIP", "address": address}]}}
    kube.patch_node_status(node, patch)


def zincati(
    port: int, api: str, ident: str, group: str = "default", *, base: str = "/", source: str = "127.0.0.1"
) -> tuple[int, str]:
    """One call as Zincati makes it (pretty JSON, id then group, no Content-Type) from address ``source``
    (any 127.0.0.0/8 address); returns (status, kind)."""
    body = json.dumps({"client_params": {"id": ident, "group": group}}, indent=2).encode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60, source_address=(source, 0))
    try:
        conn.putrequest("POST", f"{base}v1/{api}", skip_accept_encoding=True)
        conn.putheader("fleet-lock-protocol", "true")
        conn.putheader("content-length", str(len(body)))
        conn.endheaders(body)
        response = conn.getresponse()
        return response.status, json.loads(response.read())["kind"]
    finally:
        conn.close()


@dataclasses.dataclass
class Rig:
    k8s: TestEnv
    kube: Kube
    namespace: str
    lock: AnnotationLock
    notifier: RecordingNotifier
    metrics: Metrics
    tmp: Path
    servers: list[FleetLockServer] = dataclasses.field(default_factory=list)
    drain_timeout: float = 30.0

    def server(self, *, mode: str = "central", node: str = "", **overrides: Any) -> FleetLockServer:
        """A started server (stopped at teardown)."""
        machine_file = self.tmp / f"machine-id-{node or 'none'}"
        if node:
            machine_file.write_text(machine_id(node) + "\n")
        kube = self.kube
        timeout = overrides.pop("drain_timeout", self.drain_timeout)

        def drainer(name: str, cancel: threading.Event) -> Drainer:
            return Drainer(
                kube, node=name, timeout=Duration.of_seconds(timeout), cancel=cancel, poll_interval=0.1,
                retry_delay=0.2, max_retry_delay=0.5,
            )  # fmt: skip

        policy = CyclePolicy(
            force_reboot=overrides.pop("force_reboot", False),
            release_delay=datetime.timedelta(seconds=overrides.pop("release_delay_s", 0.0)),
            ready_grace=overrides.pop("ready_grace", datetime.timedelta(minutes=10)),
            stuck_after=overrides.pop("stuck_after", datetime.timedelta(hours=1)),
        )

        def hands(name: str, cancel: threading.Event) -> Hands:
            return Hands(
                book=NodeBook(kube, node=name), drainer=drainer(name, cancel), lock=self.lock,
                rebooter=ZincatiGrant(),
                notifier=self.notifier,
                events=EventRecorder(kube, node=name),
                observers=CycleObservers([CycleMetrics(self.metrics)]),
            )  # fmt: skip

        kwargs: dict[str, Any] = dict(
            kube=kube, lock=self.lock, host="127.0.0.1", port=0, mode=mode, group="default", node_id=node,
            machine_id_file=str(machine_file), hands=hands, policy=policy, behaviour=Behaviour(), blockers=(),
            window=ALWAYS, metrics=self.metrics, long_poll_s=0.2, reconcile_interval_s=3600.0,
        )  # fmt: skip
        kwargs.update(overrides)
        server = FleetLockServer(**kwargs).start()
        self.servers.append(server)
        return server

    def set_concurrency(self, concurrency: int) -> None:
        self.lock = make_lock(self.kube, self.namespace, concurrency)

    def add_nodes(self, *names: str, address: str = "127.0.0.1") -> list[str]:
        """Ready Nodes whose addresses include ``address`` (the callers' in these tests)."""
        added = self.k8s.add_nodes(*names)
        for name in added:
            give_address(self.kube, name, address)
        return added

    def node(self, name: str) -> dict[str, Any]:
        return self.kube.get_node(name)

    def annotations(self, name: str) -> dict[str, str]:
        return self.node(name)["metadata"].get("annotations") or {}

    def cordoned(self, name: str) -> bool:
        return self.node(name)["spec"].get("unschedulable") is True

    def holders(self) -> list[str]:
        return [e.node_id for e in self.lock.holders(now_ns=time.time_ns())]

    def count(self, api: str, kind: str) -> float:
        value = self.metrics.registry.get_sample_value(
            "pykured_fleetlock_requests_total", {"api": api, "kind": kind}
        )
        return value or 0.0

    def wait_for(self, condition: Callable[[], bool], timeout: float = 30.0) -> bool:
        """Poll ``condition`` until it holds (True) or ``timeout`` passes (False)."""
        return eventually(condition, timeout=timeout)

    def until(
        self, call: Callable[[], tuple[int, str]], status: int = 200, timeout: float = 40.0
    ) -> list[str]:
        """Repeat ``call`` until it answers ``status``; returns the kinds seen on the way."""
        seen: list[str] = []
        got: list[int] = []

        def answered() -> bool:
            code, kind = call()
            got.append(code)
            seen.append(kind)
            return code == status

        assert eventually(answered, timeout=timeout, every=0.1), (
            f"still {got[-1]} after {timeout}s: {seen[-5:]}"
        )
        return seen


def make_lock(kube: Kube, namespace: str, concurrency: int) -> AnnotationLock:
    return AnnotationLock(
        kube, namespace=namespace, ds_name="kured", annotation=ANNOTATION, node_id="unused",
        concurrency=concurrency, ttl=Duration.of_seconds(0), conflict_delay=0.05, poll_interval=0.1,
    )  # fmt: skip


@pytest.fixture
def rig(k8s: TestEnv, tmp_path: Path) -> Iterator[Rig]:
    namespace = k8s.new_namespace("fl")
    k8s.create_daemonset(namespace, "kured")
    kube = k8s.kube()
    rig = Rig(
        k8s,
        kube,
        namespace,
        make_lock(kube, namespace, 1),
        RecordingNotifier(),
        Metrics(process_collectors=False),
        tmp_path,
    )
    try:
        yield rig
    finally:
        for server in rig.servers:
            server.stop()


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)
