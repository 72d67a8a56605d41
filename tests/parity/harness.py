"""One node's reboot through each driver, on the real API server, with the agent built by ``wiring.build``.

A :class:`Run` builds the agent from kured-style flags exactly as ``pykured`` does (``config.startup.parse``
then ``wiring.build``), makes its node need a reboot the driver's way, and drives it pass by pass:

* ``sentinel``: the daemon and a sentinel file; its reboot command is recorded, not run;
* ``request``: the daemon and a boot-bound reboot request on the Node;
* ``zincati-marker``: the daemon with ``--reboot-method=zincati`` (the hand-off writes a marker file);
* ``fleetlock-central`` / ``fleetlock-node-local``: the FleetLock server, asked as Zincati asks it.

The node "reboots" through the simulated kubelet (a new bootID). Notifications go to a real HTTP receiver
on 127.0.0.1; what a scenario checks is read back from the API server (Node, lock, Events) and the agent's
metrics registry, so the same assertion serves every driver.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import http.client
import json
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from pykured.agent import wiring
from pykured.agent.daemon import Daemon
from pykured.config.startup import parse
from pykured.cycle import state
from pykured.fleetlock.appid import app_specific_id
from pykured.kube.client import Kube
from pykured.requests import record as rebootrequest
from pykured_dev.eventually import eventually
from tests.e2e.fleetlock.conftest import give_address
from tests.fakes import RecordingRebooter
from tests.receivers import Receiver, serve_receiver
from tests.testenv import TestEnv

DAEMON_DRIVERS = ("sentinel", "request", "zincati-marker")
FLEETLOCK_DRIVERS = ("fleetlock-central", "fleetlock-node-local")
DRIVERS = (*DAEMON_DRIVERS, *FLEETLOCK_DRIVERS)

CYCLE_KEYS = (*state.STATE_ANNOTATIONS, state.FLEETLOCK_ID_ANNOTATION)


def machine_id(node: str) -> str:
    """The simulated kubelet's ``status.nodeInfo.machineID`` for ``node``."""
    return uuid.uuid5(uuid.NAMESPACE_DNS, node).hex


@dataclasses.dataclass
class Run:
    """One node, one agent, one driver."""

    k8s: TestEnv
    driver: str
    node: str
    namespace: str
    kube: Kube
    agent: wiring.Agent
    tmp: Path
    receiver: Receiver
    rebooter: RecordingRebooter
    replies: list[tuple[int, str]] = dataclasses.field(default_factory=list)
    argv: list[str] = dataclasses.field(default_factory=list)

    # -- what the driver is ---------------------------------------------------------------------------------

    @property
    def fleetlock(self) -> bool:
        return self.driver in FLEETLOCK_DRIVERS

    @property
    def daemon(self) -> Daemon:
        assert self.agent.daemon is not None
        return self.agent.daemon

    @property
    def sentinel(self) -> Path:
        return self.tmp / "reboot-required"

    @property
    def marker(self) -> Path:
        return self.tmp / "allowfinalize.json"

    # -- driving --------------------------------------------------------------------------------------------

    def need(self) -> None:
        """Make the node need a reboot, the driver's way (FleetLock: Zincati asks in :meth:`step`)."""
        if self.driver in ("sentinel", "zincati-marker"):
            self.sentinel.touch()
        elif self.driver == "request":
            self.ask()

    def ask(self, reason: str = "parity") -> None:
        """Write a reboot request for the node's current boot (any daemon driver may get one)."""
        req = rebootrequest.make_request(
            boot_id=self.k8s.boot_id(self.node), reason=reason, requested_by="parity",
            now=datetime.datetime.now(datetime.UTC),
        )  # fmt: skip
        text = rebootrequest.format_request(req)
        self.kube.patch_node(
            self.node, {"metadata": {"annotations": {rebootrequest.REQUEST_ANNOTATION: text}}}
        )

    def unneed(self) -> None:
        """The need goes away before the reboot, the driver's way (FleetLock: Zincati's steady-state)."""
        if self.driver in ("sentinel", "zincati-marker"):
            self.sentinel.unlink(missing_ok=True)
        elif self.driver == "request":
            self.kube.patch_node(
                self.node, {"metadata": {"annotations": {rebootrequest.REQUEST_ANNOTATION: None}}}
            )
        else:
            self.zincati("steady-state")

    def zincati(self, api: str) -> tuple[int, str]:
        """One call as Zincati makes it; returns (status, kind)."""
        assert self.agent.fleetlock is not None
        ident = app_specific_id(machine_id(self.node))
        body = json.dumps({"client_params": {"id": ident, "group": "default"}}, indent=2).encode()
        conn = http.client.HTTPConnection("127.0.0.1", self.agent.fleetlock.port, timeout=60)
        try:
            conn.request("POST", f"/v1/{api}", body, {"fleet-lock-protocol": "true"})
            response = conn.getresponse()
            reply = response.status, str(json.loads(response.read())["kind"])
        finally:
            conn.close()
        self.replies.append(reply)
        return reply

    def step(self) -> None:
        """One pass: the daemon's, or Zincati's pre-reboot."""
        if self.fleetlock:
            self.zincati("pre-reboot")
        else:
            self.daemon.run_once()

    def triggered(self) -> bool:
        """The reboot was triggered: the command ran, the marker was written, or Zincati got its 200."""
        if self.fleetlock:
            return bool(self.replies) and self.replies[-1][0] == 200
        if self.driver == "zincati-marker":
            return self.marker.exists()
        return self.rebooter.calls > 0

    def drive(self, passes: int = 12) -> bool:
        """Step until the reboot is triggered (True) or ``passes`` ran out (False)."""
        for _ in range(passes):
            self.step()
            if self.triggered():
                return True
        return False

    def reboot(self) -> None:
        """The node reboots: a new bootID; the sentinel and the marker are gone with the old boot."""
        self.k8s.reboot_node(self.node)
        self.sentinel.unlink(missing_ok=True)
        self.marker.unlink(missing_ok=True)
        eventually(lambda: self.state().ready)

    def settle(self, passes: int = 20) -> None:
        """After the reboot: run the cycle to its end (FleetLock: steady-state, then reconcile passes)."""
        steady = False
        for _ in range(passes):
            if self.fleetlock:
                if not steady:
                    steady = self.zincati("steady-state")[0] == 200
                if steady:
                    assert self.agent.fleetlock is not None
                    self.agent.fleetlock.service.reconcile_once()
            else:
                self.daemon.run_once()
            if not self.holders() and not self.memory():
                return
            time.sleep(0.05)

    # -- what the API server and the agent say --------------------------------------------------------------

    def obj(self) -> dict[str, Any]:
        return self.kube.get_node(self.node)

    def state(self) -> state.NodeState:
        return state.NodeState.from_obj(self.obj())

    def annotations(self) -> dict[str, str]:
        return dict(self.obj()["metadata"].get("annotations") or {})

    def labels(self) -> dict[str, str]:
        return dict(self.obj()["metadata"].get("labels") or {})

    def memory(self) -> dict[str, str]:
        return {k: v for k, v in self.annotations().items() if k in CYCLE_KEYS}

    def cordoned(self) -> bool:
        return bool(self.obj()["spec"].get("unschedulable"))

    def taints(self) -> list[str]:
        return [f"{t['key']}:{t['effect']}" for t in self.obj()["spec"].get("taints") or []]

    def holders(self) -> list[str]:
        lock = self.agent_lock()
        return [e.node_id for e in lock.holders(now_ns=time.time_ns())]

    def agent_lock(self) -> Any:
        if self.agent.daemon is not None:
            return self.agent.daemon.hands.lock
        assert self.agent.fleetlock is not None
        return self.agent.fleetlock.service.lock

    def events(self) -> list[str]:
        query = {"fieldSelector": f"involvedObject.name={self.node}"}
        items = self.kube.get("/api/v1/namespaces/default/events", query=query)["items"]
        return [str(e["reason"]) for e in sorted(items, key=lambda e: e["metadata"]["creationTimestamp"])]

    def metric(self, name: str, **labels: str) -> float:
        return self.agent.metrics.registry.get_sample_value(name, labels) or 0.0

    def reboots(self) -> float:
        """Reboots triggered, whatever their kind (a command; a hand-off: the marker, FleetLock's grant)."""
        return self.metric("pykured_reboots_total", outcome="triggered") + self.metric(
            "pykured_reboots_total", outcome="handoff"
        )


def flags_for(driver: str, *, node: str, namespace: str, tmp: Path, backend: str, notify: str) -> list[str]:
    flags = [
        f"--node-id={node}", f"--ds-namespace={namespace}", "--ds-name=kured", "--period=1h",
        "--metrics-host=127.0.0.1", "--metrics-port=0", f"--reboot-sentinel={tmp / 'reboot-required'}",
        f"--lock-backend={backend}", "--reboot-command=/bin/true", f"--notify-url={notify}",
        "--drain-timeout=20s", "--drain-grace-period=1",
    ]  # fmt: skip
    if driver == "zincati-marker":
        flags += ["--reboot-method=zincati", f"--zincati-marker-file={tmp / 'allowfinalize.json'}"]
    if driver == "fleetlock-central":
        flags += ["--fleetlock-listen=127.0.0.1:0", "--fleetlock-mode=central"]
    if driver == "fleetlock-node-local":
        (tmp / "machine-id").write_text(machine_id(node) + "\n")
        flags += [
            "--fleetlock-listen=127.0.0.1:0", "--fleetlock-mode=node-local",
            f"--machine-id-file={tmp / 'machine-id'}",
        ]  # fmt: skip
    return flags


@dataclasses.dataclass
class Bench:
    """Builds runs for one test and stops them at its end."""

    k8s: TestEnv
    tmp: Path
    runs: list[Run] = dataclasses.field(default_factory=list)
    stops: list[Callable[[], None]] = dataclasses.field(default_factory=list)

    def run(
        self,
        driver: str,
        extra: Sequence[str] = (),
        *,
        backend: str = "daemonset",
        namespace: str | None = None,
        labels: dict[str, str] | None = None,
        before_start: Callable[[str, str], None] | None = None,
    ) -> Run:
        namespace = namespace or self.k8s.new_namespace("parity")
        self.k8s.ensure_namespace(namespace)
        with contextlib.suppress(Exception):  # a second run in the same namespace shares the DaemonSet
            self.k8s.create_daemonset(namespace, "kured")
        (node,) = self.k8s.add_nodes(self.k8s.unique("pn"), labels=labels)
        if driver == "fleetlock-central":  # Zincati's calls come from 127.0.0.1: make it the node's address
            give_address(self.k8s.kube(), node)
        tmp = self.tmp / node
        tmp.mkdir()
        receiver, stop = serve_receiver()
        self.stops.append(stop)
        argv = [
            *flags_for(driver, node=node, namespace=namespace, tmp=tmp, backend=backend, notify=receiver.url),
            *extra,
        ]
        if before_start is not None:
            before_start(namespace, node)
        kube = self.k8s.kube()
        rebooter = RecordingRebooter()
        agent = self._start(argv, driver, rebooter)
        found = Run(self.k8s, driver, node, namespace, kube, agent, tmp, receiver, rebooter, argv=argv)
        self.runs.append(found)
        return found

    def _start(self, argv: list[str], driver: str, rebooter: RecordingRebooter) -> wiring.Agent:
        agent = wiring.build(parse(argv, {}), kube=self.k8s.kube())
        if agent.daemon is not None and driver != "zincati-marker":
            agent.daemon.hands.rebooter = rebooter  # the hands the daemon's runner acts through
        if agent.policy is not None:
            agent.policy.start()
            eventually(lambda: agent.policy is not None and agent.policy.doc is not None)
        if agent.fleetlock is not None:
            agent.fleetlock.start()
        return agent

    def restart(self, run: Run) -> None:
        """The agent (or the FleetLock server) stops and a new one starts with the same flags: what it
        knows of the cycle is what the Node and the lock say."""
        run.agent.stop()
        run.agent.close()
        run.agent = self._start(run.argv, run.driver, run.rebooter)

    def close(self) -> None:
        for run in self.runs:
            run.agent.stop()
            run.agent.close()
        for stop in self.stops:
            stop()


def bench(k8s: TestEnv, tmp: Path) -> Iterator[Bench]:
    made = Bench(k8s, tmp)
    try:
        yield made
    finally:
        made.close()
