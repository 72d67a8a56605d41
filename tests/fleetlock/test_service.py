"""FleetLock as a driver of the one reboot cycle, in process on a fake API server.

The real API server and a Zincati-like client exercise FleetLock in test_cycle_k8s.py; these check that
FleetLock's requests run the daemon's steps through the shared runner: the same writes, Events,
notifications and metrics, ``--drain-delay`` and ``--reboot-delay`` applied, a failed drain handled as the
daemon handles it, and the answers Zincati gets for each decision.
"""

from __future__ import annotations

import datetime
import http.client
import json
import logging
import socket
import struct
import threading

import pytest

from pykured.core.errors import KubeError
from pykured.cycle import state
from pykured.cycle.book import NodeBook
from pykured.cycle.decide import CyclePolicy
from pykured.cycle.observers import CycleObservers
from pykured.cycle.steps import Behaviour, Hands
from pykured.cyclemetrics import CycleMetrics
from pykured.drain import Drainer
from pykured.fleetlock import protocol as p
from pykured.fleetlock.server import FleetLockServer
from pykured.fleetlock.service import FleetLockService, ZincatiGrant
from pykured.gocompat.goflags import Duration
from pykured.kube.events import EventRecorder
from pykured.lock.annotation import AnnotationLock
from pykured.metrics import Metrics
from pykured.policy.weekly import TimeWindow
from tests.fakes import FakeClock, FakeKube, RecordingNotifier

NODE = "z1"
T0 = datetime.datetime(2026, 6, 30, 12, 0, tzinfo=datetime.UTC)
ALWAYS = TimeWindow.parse(["su", "mo", "tu", "we", "th", "fr", "sa"], "0:00", "23:59:59", "UTC")


class OneNode:
    """The resolver of a one-node cluster: every id is NODE."""

    def resolve(self, ident: str) -> tuple[str | None, str]:
        return NODE, ""

    def fleetlock_nodes(self) -> list[str]:
        return [NODE]

    def admits(self, node: str, peer: str) -> bool:
        return node == NODE

    def start(self) -> None: ...

    def stop(self) -> None: ...


class RecordingEvent(threading.Event):
    """A cancel event that records the waits made on it (the delays) instead of sleeping."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float | None] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout)
        return self.is_set()


class Rig:
    def __init__(self, policy: CyclePolicy | None = None, behaviour: Behaviour | None = None) -> None:
        self.kube = FakeKube()
        self.kube.add_node(NODE)
        self.kube.add_daemonset("kube-system", "kured")
        self.clock = FakeClock(T0)
        self.lock = AnnotationLock(
            self.kube,
            namespace="kube-system", ds_name="kured", annotation="weave.works/kured-node-lock", node_id="",
            concurrency=1, ttl=Duration(0), liveness_interval=None, sleep=lambda _s: None,
        )  # fmt: skip
        self.metrics = Metrics(process_collectors=False)
        self.notifier = RecordingNotifier()
        self.cancels: list[RecordingEvent] = []
        self.service = FleetLockService(
            hands=self.hands, lock=self.lock, policy=policy or CyclePolicy(),
            behaviour=behaviour or Behaviour(), resolver=OneNode(), window=ALWAYS, metrics=self.metrics,
            long_poll_s=5.0, drain_retry_s=300.0, clock=self.clock,
        )  # fmt: skip

    def hands(self, node: str, cancel: threading.Event) -> Hands:
        kube = self.kube
        return Hands(
            book=NodeBook(kube, node=node),
            drainer=Drainer(kube, node=node, cancel=cancel),
            lock=self.lock, rebooter=ZincatiGrant(),
            notifier=self.notifier,
            events=EventRecorder(kube, node=node),
            observers=CycleObservers([CycleMetrics(self.metrics)]),
        )  # fmt: skip

    def pre_reboot(self) -> p.Reply:
        return self.service.serve(NODE, "zid", required=True)

    def steady_state(self) -> p.Reply:
        return self.service.serve(NODE, "zid", required=False)

    def sample(self, name: str, **labels: str) -> float:
        return self.metrics.registry.get_sample_value(name, labels) or 0.0

    def holders(self) -> list[str]:
        return [e.node_id for e in self.lock.holders(now_ns=0)]


def test_a_whole_zincati_cycle_runs_the_daemons_steps() -> None:
    rig = Rig(policy=CyclePolicy(annotate_nodes=True))
    reply = rig.pre_reboot()
    assert reply.ok, reply
    memory = rig.kube.annotations(NODE)
    assert memory[state.REBOOT_BOOT_ID_ANNOTATION] == "boot-1"
    assert memory[state.FLEETLOCK_ID_ANNOTATION] == "zid"
    assert memory[state.IN_PROGRESS_ANNOTATION] == "2026-06-30T12:00:00Z"
    assert rig.kube.cordoned(NODE) and rig.holders() == [NODE]
    assert rig.kube.event_reasons() == ["LockAcquired", "Draining", "Rebooting"]
    assert rig.notifier.kinds == ["drain", "reboot"]
    assert rig.sample("pykured_reboots_total", outcome="handoff") == 1
    assert rig.sample("pykured_drain_duration_seconds_count") == 1
    assert rig.sample("pykured_fleetlock_requests_total", api="cycle", kind="granted") == 1
    assert rig.pre_reboot().ok  # granted stays granted

    rig.kube.reboot(NODE, "boot-2")
    assert rig.steady_state().ok
    assert not rig.kube.cordoned(NODE) and rig.holders() == []
    assert not [k for k in rig.kube.annotations(NODE) if k.startswith(state.PYKURED_PREFIX)]
    assert state.IN_PROGRESS_ANNOTATION not in rig.kube.annotations(NODE)
    assert rig.kube.event_reasons()[3:] == ["Uncordoned", "LockReleased"]
    assert rig.notifier.kinds == ["drain", "reboot", "uncordon"]
    assert rig.sample("pykured_reboots_total", outcome="completed") == 1
    assert rig.sample("pykured_fleetlock_requests_total", api="cycle", kind="rebooted") == 1


def test_the_drain_applies_the_drain_and_reboot_delays() -> None:
    cancel = RecordingEvent()
    rig = Rig(behaviour=Behaviour(drain_delay_s=7.0, reboot_delay_s=9.0, pre_labels={"k": "v"}))
    # the runner's steps wait on the node's cancel event: make it the recording one
    entry = rig.service._node(NODE)
    entry.runner.steps.cancel = cancel
    entry.cancel = cancel
    assert rig.pre_reboot().ok
    assert cancel.waits[:2] == [7.0, 9.0]
    assert rig.kube.nodes[NODE]["metadata"]["labels"] == {"k": "v"}


def test_a_failed_drain_releases_uncordons_and_answers_drain_failed_until_the_retry() -> None:
    rig = Rig()
    rig.kube.fail_next(lambda m, path, body: KubeError("boom") if m == "PATCH" and "spec" in body else None)
    reply = rig.pre_reboot()
    assert (reply.kind, reply.status) == (p.DRAIN_FAILED, 503), reply
    assert rig.holders() == [] and not rig.kube.cordoned(NODE)
    assert "DrainFailed" in rig.kube.event_reasons()
    assert rig.sample("pykured_fleetlock_requests_total", api="cycle", kind="drain_failed") == 1
    assert rig.pre_reboot().kind == p.DRAIN_FAILED  # kured's retry: not before one period
    rig.clock.advance(datetime.timedelta(seconds=301))
    assert rig.pre_reboot().ok


def test_a_failed_drain_with_force_reboot_grants() -> None:
    rig = Rig(policy=CyclePolicy(force_reboot=True))
    rig.kube.fail_next(lambda m, path, body: KubeError("boom") if m == "PATCH" and "spec" in body else None)
    assert rig.pre_reboot().ok
    assert rig.holders() == [NODE]


def test_steady_state_without_a_reboot_keeps_an_administrators_cordon() -> None:
    rig = Rig()
    rig.kube.patch_node(NODE, {"spec": {"unschedulable": True}})
    assert rig.pre_reboot().ok
    reply = rig.steady_state()
    assert reply.ok and "without reboot" in reply.value
    assert rig.kube.cordoned(NODE) and rig.holders() == []
    assert not [k for k in rig.kube.annotations(NODE) if k.startswith(state.PYKURED_PREFIX)]
    assert rig.sample("pykured_fleetlock_requests_total", api="cycle", kind="released_without_reboot") == 1


def test_the_release_delay_keeps_the_slot_until_a_reconcile_pass_after_it() -> None:
    rig = Rig(policy=CyclePolicy(release_delay=datetime.timedelta(minutes=5)))
    assert rig.pre_reboot().ok
    rig.kube.reboot(NODE, "boot-2")
    assert rig.steady_state().ok
    assert rig.holders() == [NODE]
    assert rig.kube.annotations(NODE)[state.RELEASE_AFTER_ANNOTATION] == "2026-06-30T12:05:00Z"
    rig.service.reconcile_once()
    assert rig.holders() == [NODE]
    rig.clock.advance(datetime.timedelta(minutes=6))
    rig.service.reconcile_once()
    assert rig.holders() == []


def serve_http(rig: Rig, **kw: object) -> FleetLockServer:
    return FleetLockServer(
        kube=rig.kube, lock=rig.lock, host="127.0.0.1", port=0, mode="central", group="default",
        node_id="", machine_id_file="", hands=rig.hands, policy=CyclePolicy(), behaviour=Behaviour(),
        blockers=(), window=ALWAYS, metrics=rig.metrics, long_poll_s=5.0, resolver=OneNode(), **kw,  # type: ignore[arg-type]
    ).start()  # fmt: skip


def zincati_call(port: int, path: str) -> tuple[int, str]:
    body = json.dumps({"client_params": {"id": "zid", "group": "default"}}, indent=2).encode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("POST", path, body, {"fleet-lock-protocol": "true"})
        response = conn.getresponse()
        return response.status, json.loads(response.read())["kind"]
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("base_path", "path", "status"),
    [
        ("/", "/default/v1/steady-state", 200),  # Zincati's base_url "http://host/${group}/", unconfigured
        ("/", "/v1/steady-state", 200),
        ("/fleet/${group}/", "/fleet/default/v1/steady-state", 200),
        ("/fleet/${group}/", "/fleet/other/v1/steady-state", 404),
        ("/fleet/${group}/", "/v1/steady-state", 404),
    ],
    ids=["any-prefix-group", "no-prefix", "templated-base", "templated-other-group", "templated-no-prefix"],
)
def test_zincatis_templated_base_url(base_path: str, path: str, status: int) -> None:
    rig = Rig()
    server = serve_http(rig, base_path=base_path)
    try:
        assert zincati_call(server.port, path)[0] == status
    finally:
        server.stop()


def test_a_client_that_closes_after_a_2xx_is_no_error(
    caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    rig = Rig()
    server = serve_http(rig)
    body = json.dumps({"client_params": {"id": "zid", "group": "default"}}).encode()
    request = (
        b"POST /v1/steady-state HTTP/1.1\r\nHost: x\r\nfleet-lock-protocol: true\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    try:
        with caplog.at_level(logging.DEBUG, logger="pykured.fleetlock.server"):
            for _ in range(5):  # as Zincati: send, read the status line only, reset the connection
                with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
                    sock.sendall(request)
                    assert sock.recv(12).startswith(b"HTTP/1.1 200")
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            assert zincati_call(server.port, "/v1/steady-state") == (200, "ok")  # still serving
    finally:
        server.stop()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    assert "Traceback" not in caplog.text + capfd.readouterr().err
