"""Running the real kured 1.23.0 beside pykured: one campaign of concurrent scenarios on the test apiserver.

kured's first loop ticks 30–90 s after it starts and its main loop 0.5–1.5 periods later, and a kured node
releases the lock only when its *new* agent's first loop ticks (another 30–90 s after the reboot). So every
scenario of this package starts at once (:class:`Campaign`, one per test session), each with its own
namespace, DaemonSet, lock and nodes on the same API server, and each test waits for its own. Everything
the tests check comes from the API server's history (:mod:`pykured_dev.testenv.history`), the nsenter
shim's record, the notification receiver and the query logs of the two real Prometheus servers (one per
side, :data:`PROMETHEUS_RULES`), never from an agent's log (kept for debugging only).
"""

from __future__ import annotations

import contextlib
import dataclasses
import http.server
import json
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pykured import __version__
from pykured.core.errors import ForbiddenError
from pykured.kube.client import Kube
from pykured_dev.eventually import eventually
from pykured_dev.testenv.fleet import Fleet
from pykured_dev.testenv.history import Change, History, Roll, lock_holders
from pykured_dev.testenv.pods import (
    KURED_IMAGE,
    PYKURED_IMAGE,
    PodTemplate,
    kured_daemonset,
    kured_image,
    pykured_image,
)
from pykured_dev.testenv.prometheus import Prometheus
from pykured_dev.testenv.reference import Reference, reference
from tests.e2e.test_rbac_profiles import (
    POLICY_KINDS,
    apply_docs,
    narrowed,
    pod_bound_token,
    render,
    token_kubeconfig,
    unique_names,
)
from tests.testenv import TestEnv

KURED = f"{KURED_IMAGE}:1.23.0"
PYKURED = f"{PYKURED_IMAGE}:{__version__}"
LOCK = "weave.works/kured-node-lock"
TAINT = "weave.works/kured-node-reboot"
PERIOD = "10s"
REBOOT_COMMAND = "/usr/local/sbin/simulated-reboot --now"
"""Never run: the sandbox's nsenter records it and asks the simulated host to reboot."""

KURED_FIRST_LOOP = 90.0
"""kured's first loop: 30–90 s after start (delaytick with one minute)."""
KURED_MAIN_TICK = KURED_FIRST_LOOP + 15.0
"""kured's first chance to take the lock: the first loop, then 0.5–1.5 × ``--period`` (10 s)."""
KURED_TICK = 15.0
"""The longest gap between two of kured's main-loop ticks: 1.5 × ``--period`` (10 s)."""
PYKURED_RETURN = 60.0
"""A pykured node's simulated reboot and its new agent's first pass, on a machine busy with other work."""
SCENARIO_TIMEOUT = 480.0
"""A scenario's longest run: its waits, each sized by kured's loop and a pykured node's return, end within
it."""

SIDES = ("kured", "pykured")
PROMETHEUS_RULES = {
    "groups": [
        {
            "name": "campaign",
            "rules": [
                # firing, but its name is not one --alert-filter-match-only keeps: no block
                {"alert": "CampaignUnrelated", "expr": "vector(1)"},
                # matches the filter, but pending for an hour: --alert-firing-only leaves it out
                {"alert": "Watchdog", "expr": "vector(1)", "for": "1h"},
            ],
        }
    ]
}
"""The alerts each side's Prometheus holds: neither blocks under the chart values' filters."""

SCENARIOS: dict[str, Callable[[Campaign], Any]] = {}
ScenarioFn = TypeVar("ScenarioFn", bound=Callable[..., Any])
"""Every scenario a test module defined, by name (:func:`scenario`)."""


def scenario(name: str) -> Callable[[ScenarioFn], ScenarioFn]:
    """Register a scenario function under ``name`` (tests name it in ``@pytest.mark.kured_scenario``)."""

    def register(fn: ScenarioFn) -> ScenarioFn:
        SCENARIOS[name] = fn
        return fn

    return register


class Receiver:
    """A loopback HTTP server that records the notifications posted to it."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode("utf-8", "replace") if length else ""
                receiver.requests.append(
                    {
                        "method": self.command,
                        "path": self.path,
                        "content_type": self.headers.get("Content-Type", ""),
                        "body": body,
                    }
                )
                self.send_response(204)
                self.end_headers()

            do_GET = _answer
            do_POST = _answer

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        threading.Thread(target=self.server.serve_forever, name="receiver", daemon=True).start()

    def posts(self, prefix: str) -> list[dict[str, Any]]:
        """Notifications received under ``prefix``."""
        return [r for r in list(self.requests) if r["method"] == "POST" and r["path"].startswith(prefix)]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def start_prometheus(workdir: Path, side: str) -> Prometheus:
    """A real Prometheus for one side, under ``/prometheus-<side>`` (as behind a proxy), holding
    :data:`PROMETHEUS_RULES`; started and waited for until both alerts are in its ``ALERTS``."""
    rules = workdir / "campaign.rules.json"
    workdir.mkdir(parents=True, exist_ok=True)
    rules.write_text(json.dumps(PROMETHEUS_RULES))
    prometheus = Prometheus(workdir, rule_files=[rules], route_prefix=f"/prometheus-{side}").start()
    if not eventually(lambda: len(prometheus.query("ALERTS")) == 2, timeout=90):
        prometheus.stop()
        raise AssertionError(f"the campaign's alerts never showed: {prometheus.alerts()}")
    return prometheus


@dataclasses.dataclass
class Mixed:
    """One mixed-fleet scenario: its lock and nodes (``kind[node]`` is ``kured`` or ``pykured``)."""

    namespace: str
    limit: int
    kind: dict[str, str]
    ds: str = "kured"
    annotation: str = LOCK
    taint: str = TAINT
    started: float = dataclasses.field(default_factory=time.monotonic)
    roll: Roll | None = None
    notes: list[str] = dataclasses.field(default_factory=list)
    nsenter: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    """Each node's nsenter calls (the reboot commands its agents ran), kept by :meth:`Campaign.finish`."""
    logs: dict[str, str] = dataclasses.field(default_factory=dict)
    """Each node's agent log, kept by :meth:`Campaign.finish` (for what only a log can show: a refused
    write leaves no trace in the API server's history)."""

    @property
    def nodes(self) -> list[str]:
        return list(self.kind)

    def of(self, kind: str) -> list[str]:
        return [n for n, k in self.kind.items() if k == kind]


class Campaign:
    """All scenarios of a test session, run concurrently on one control plane (see the module docstring)."""

    def __init__(self, k8s: TestEnv, ref: Reference) -> None:
        self.k8s = k8s
        self.ref = ref
        self.workdir = Path(tempfile.mkdtemp(prefix="pykured-kured-"))
        self.receiver = Receiver()
        self.prometheus: dict[str, Prometheus] = {}
        for side in SIDES:
            self.prometheus[side] = start_prometheus(self.workdir / f"prometheus-{side}", side)
        self.history = History(k8s.kube()).start()
        self.fleet = Fleet(
            k8s,
            workdir=self.workdir / "fleet",
            images={KURED_IMAGE: kured_image(ref.kured), PYKURED_IMAGE: pykured_image()},
            forward=[self.receiver.port, *(p.port for p in self.prometheus.values())],
        ).__enter__()
        self._results: dict[str, Any] = {}
        self._errors: dict[str, str] = {}
        self._done: dict[str, threading.Event] = {}
        self.durations: dict[str, float] = {}

    def launch(self, name: str, scenario: Callable[[Campaign], Any]) -> None:
        """Run ``scenario(self)`` in its own thread."""
        done = self._done[name] = threading.Event()

        def run() -> None:
            began = time.monotonic()
            try:
                self._results[name] = scenario(self)
            except BaseException:
                self._errors[name] = traceback.format_exc()
            finally:
                self.durations[name] = time.monotonic() - began
                done.set()

        threading.Thread(target=run, name=f"scenario-{name}", daemon=True).start()

    def result(self, name: str, *, timeout: float = SCENARIO_TIMEOUT + 30) -> Any:
        """Wait for scenario ``name``; its result, or an AssertionError with its failure."""
        if name not in self._done:
            raise AssertionError(f"scenario {name} was not launched")
        if not self._done[name].wait(timeout):
            raise AssertionError(f"scenario {name} still running after {timeout:.0f} s")
        if name in self._errors:
            raise AssertionError(f"scenario {name} failed:\n{self._errors[name]}")
        return self._results[name]

    def close(self) -> None:
        self.fleet.close()
        self.history.stop()
        self.receiver.close()
        for prometheus in self.prometheus.values():
            prometheus.stop()

    # -- helpers for scenarios -------------------------------------------------------------------------------

    def wait(self, what: str, predicate: Callable[[list[Change]], bool], *, timeout: float) -> None:
        """Wait until ``predicate`` holds on the API server's history, or fail naming ``what``."""
        if not self.history.wait(predicate, timeout=timeout):
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for: {what}")

    def roll(self, mixed: Mixed, changes: list[Change] | None = None) -> Roll:
        """The scenario's roll as the API server recorded it (so far, or in ``changes``)."""
        return Roll.of(
            self.history.changes() if changes is None else changes,
            daemonset=f"{mixed.namespace}/{mixed.ds}",
            annotation=mixed.annotation,
            nodes=mixed.nodes,
            taint=mixed.taint,
        )

    def holders(self, mixed: Mixed) -> Callable[[list[Change]], list[str]]:
        """A function of the history: the scenario's current lock holders."""

        def current(changes: list[Change]) -> list[str]:
            key = f"{mixed.namespace}/{mixed.ds}"
            value = None
            for change in changes:
                if change.kind == "DaemonSet" and change.key == key:
                    value = ((change.obj["metadata"].get("annotations")) or {}).get(mixed.annotation)
            return lock_holders(value)

        return current

    def finished(self, mixed: Mixed) -> Callable[[list[Change]], bool]:
        """Every node rebooted, nobody holds the lock, no node is cordoned."""

        def done(changes: list[Change]) -> bool:
            roll = self.roll(mixed, changes)
            return all(n >= 1 for n in roll.reboots().values()) and not roll.holders and not roll.cordoned

        return done

    def mixed_fleet(
        self,
        tag: str,
        *,
        kinds: dict[str, str],
        limit: int,
        extra: Sequence[str] = (),
        policies: bool = False,
    ) -> Mixed:
        """A namespace with kured's RBAC and DaemonSet, nodes, and each node's pod (kured or pykured);
        ``policies``: under the admission policies of ``kustomize/base`` (for this namespace's
        ServiceAccount), each pod with the kubelet's kind of token (bound to it, naming its node)."""
        k8s = self.k8s
        namespace = k8s.new_namespace(tag)
        args = [
            f"--period={PERIOD}",
            f"--reboot-command={REBOOT_COMMAND}",
            f"--prefer-no-schedule-taint={TAINT}",
            f"--concurrency={limit}",
            *extra,
        ]
        k8s.apply_rbac_kured(namespace, "kured")
        ds = k8s.kube().create(
            f"/apis/apps/v1/namespaces/{namespace}/daemonsets",
            kured_daemonset(namespace, "kured", image=KURED, args=args),
        )
        template = PodTemplate.of(ds)
        kind = {f"{namespace}-{role}": k for role, k in kinds.items()}
        k8s.add_nodes(*kind)
        if policies:
            under_policies(k8s, namespace, list(kind))
        for node, agent in kind.items():
            image = template if agent == "kured" else template.with_image(PYKURED)
            self.fleet.add_pod(node, image, bound_token=policies)
        return Mixed(namespace=namespace, limit=limit, kind=kind)

    def finish(self, mixed: Mixed, *, timeout: float) -> Roll:
        """Wait until the roll is over, stop its agents and return the roll (as of their stop)."""
        self.wait(f"{mixed.namespace}: every node rebooted, lock free", self.finished(mixed), timeout=timeout)
        for node in mixed.nodes:
            mixed.logs[node] = self.fleet.log_text(node)
            mixed.nsenter[node] = self.fleet.remove(node)
        mixed.roll = self.roll(mixed)
        return mixed.roll


def under_policies(k8s: TestEnv, namespace: str, nodes: list[str]) -> None:
    """The admission policies of ``kustomize/base`` for the ServiceAccount ``namespace/kured``, in effect: a
    pod-bound token of the first node is refused a write to the second node."""
    docs = [d for d in render(k8s, "kustomize/base") if d["kind"] in POLICY_KINDS]
    apply_docs(k8s, unique_names(narrowed(docs, namespace), namespace), POLICY_KINDS)
    # kured's RBAC, plus the marker the policies recognise the agents by (pykured's profiles carry it)
    rule = {
        "apiGroups": ["pykured.dev"],
        "resources": ["agents"],
        "resourceNames": ["kured"],
        "verbs": ["use"],
    }
    subject = {"kind": "ServiceAccount", "name": "kured", "namespace": namespace}
    k8s.grant_cluster_role(f"kured-marker-{namespace}", [rule], subject)
    probe = Kube.from_kubeconfig(
        token_kubeconfig(
            k8s,
            Path(tempfile.mkdtemp(prefix="pykured-probe-")) / "probe.json",
            pod_bound_token(k8s, namespace, "kured", nodes[0], ds="kured"),
        )
    )
    probes = iter(range(1_000_000))

    def refused() -> bool:
        try:
            probe.patch_node(
                nodes[1], {"metadata": {"annotations": {"pykured.dev/probe": str(next(probes))}}}
            )
        except ForbiddenError as exc:
            return "may not write Node" in str(exc)
        return False

    try:
        if not eventually(refused, timeout=60, every=0.5):
            raise AssertionError(f"{namespace}: the admission policies never took effect")
    finally:
        probe.close()


@contextlib.contextmanager
def campaign(k8s: TestEnv) -> Iterator[Campaign]:
    """A :class:`Campaign` for the duration of the ``with`` block."""
    made = Campaign(k8s, reference(("kured",)))
    try:
        yield made
    finally:
        made.close()


def check_roll(mixed: Mixed) -> Roll:
    """The invariants every mixed roll keeps, from the API server's history."""
    roll = mixed.roll
    assert roll is not None, "scenario did not finish"
    assert roll.max_holders <= mixed.limit, f"{roll.max_holders} lock holders at once (limit {mixed.limit})"
    assert roll.max_cordoned <= mixed.limit, (
        f"{roll.max_cordoned} nodes cordoned at once (limit {mixed.limit})"
    )
    assert roll.reboots() == dict.fromkeys(mixed.nodes, 1), f"reboots per node: {roll.reboots()}"
    assert not roll.cordoned, f"left cordoned: {roll.cordoned}"
    assert not roll.holders, f"lock still held by {roll.holders}"
    assert {node for _, node, _ in roll.acquired} == set(mixed.nodes), f"acquisitions: {roll.acquired}"
    return roll
