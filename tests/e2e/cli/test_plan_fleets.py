"""``pykured plan`` against real fleets on the test API server, one per state that holds a roll.

Each fleet is real: Nodes, the agents' status as the agents publish it (the daemon's own passes, in process,
on a fixed clock), kured's DaemonSet-annotation lock, the policy ConfigMap (freeze, halt, blackouts) as
``pykured freeze`` and the halt write it, a per-node pause, pods, a PodDisruptionBudget and a real
Prometheus whose rules fire the alerts. ``pykured plan`` and ``pykured plan -o json`` are run
against each with the same fixed ``now`` and compared with goldens (``tests/golden/plan/``; node names and
namespaces normalised). Regenerate them with ``PYKURED_UPDATE_GOLDEN=1``.
"""

from __future__ import annotations

import contextlib
import datetime
import io
import json
import os
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from pykured.agent.daemon import Daemon, Senses, Settings
from pykured.blockers import Blocker
from pykured.blockers.freeze import FreezeBlocker
from pykured.blockers.pause import PauseBlocker
from pykured.blockers.pods import PodBlocker
from pykured.blockers.prometheus import PrometheusAlertBlocker
from pykured.cli.plan import plan_main
from pykured.core.errors import NotFoundError
from pykured.core.model import Reason
from pykured.cycle.book import NodeBook
from pykured.cycle.decide import CyclePolicy
from pykured.cycle.steps import Hands
from pykured.drain import Drainer
from pykured.fleet import freeze as policycmd
from pykured.gocompat.goflags import Duration
from pykured.host.sentinel import FileSentinel
from pykured.kube.events import EventRecorder
from pykured.lock.annotation import AnnotationLock
from pykured.notify import Notifier
from pykured.policy.freeze import FreezeRecord
from pykured.policy.maintenance import MaintenancePolicy, Window
from pykured.policy.source import PolicySource, PolicyWindow
from pykured.policy.weekly import TimeWindow
from pykured.policy.writer import add_halt
from pykured.status import agent as agentstatus
from pykured_dev.eventually import eventually
from pykured_dev.testenv.prometheus import Prometheus
from tests.fakes import RecordingRebooter
from tests.testenv import TestEnv

pytestmark = pytest.mark.k8s
GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "plan"
NOW = datetime.datetime(2026, 11, 30, 21, 40, tzinfo=datetime.UTC)  # a Monday
HOUR = datetime.timedelta(hours=1)
ALWAYS = TimeWindow.parse(["su", "mo", "tu", "we", "th", "fr", "sa"], "0:00", "23:59:59", "UTC")
POLICY = "kured-policy"
LOCK = "weave.works/kured-node-lock"
RS_REF = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "r1", "controller": True}


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("PYKURED_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert text == path.read_text(), f"{name} differs:\n{text}"


class Stopped(Exception):
    """The agent was stopped: ends its background wait for the lock at its next poll."""


def firing_prometheus(workdir: Path, *alerts: str) -> Prometheus:
    """A real Prometheus whose rules fire ``alerts`` from their first evaluation (``vector(1)``, no ``for``),
    started and waited for until its ``ALERTS`` series show each one firing."""
    rules = workdir / "alerts.rules.json"
    rules.parent.mkdir(parents=True, exist_ok=True)
    group = {"name": "plan", "rules": [{"alert": a, "expr": "vector(1)"} for a in alerts]}
    rules.write_text(json.dumps({"groups": [group]}))
    prometheus = Prometheus(workdir, rule_files=[rules]).start()
    firing = 'ALERTS{alertstate="firing"}'
    if not eventually(lambda: len(prometheus.query(firing)) == len(alerts), timeout=90):
        prometheus.stop()
        raise AssertionError(f"the rules never fired: {prometheus.alerts()}")
    return prometheus


class AlertsNow:
    """The alert gate asked at the real time: the agents' passes run on the fixed ``NOW``, and a real
    Prometheus holds its ``ALERTS`` only from the moment it started."""

    def __init__(self, blocker: PrometheusAlertBlocker) -> None:
        self.blocker = blocker

    def check(self, *, now: datetime.datetime) -> Reason | None:
        return self.blocker.check(now=datetime.datetime.now(datetime.UTC))


class Site:
    """One fleet: a kured DaemonSet (its lock) and policy ConfigMap in a namespace, labelled Nodes, agents."""

    def __init__(self, k8s: TestEnv, tmp: Path) -> None:
        self.k8s = k8s
        self.kube = k8s.kube()
        self.tmp = tmp
        self.ns = k8s.new_namespace("ds")
        k8s.create_daemonset(self.ns, "kured")
        self.pool = k8s.unique("pool")
        self.prefix = k8s.unique("pl")
        self.names: list[str] = []
        self.spaces: dict[str, str] = {}
        """Other namespaces (pods) by what the goldens call them."""
        self.daemons: list[Daemon] = []
        self.threads: list[threading.Thread] = []
        self.closers: list[Callable[[], None]] = []

    def nodes(self, count: int) -> list[str]:
        self.names = [f"{self.prefix}-{i + 1}" for i in range(count)]
        self.k8s.add_nodes(*self.names, labels={"pool": self.pool})
        return self.names

    def namespace(self, label: str) -> str:
        self.spaces[label] = self.k8s.new_namespace(label)
        return self.spaces[label]

    def policy_source(self) -> PolicySource:
        """The agents' view of the policy ConfigMap, read once (as the watch's first list does)."""
        source = PolicySource(self.kube, namespace=self.ns, name=POLICY, zone=datetime.UTC)
        source.refresh()
        return source

    def agent(
        self,
        node: str,
        *,
        sentinel: bool = True,
        window: Window = ALWAYS,
        blockers: Sequence[Blocker] = (),
        source: PolicySource | None = None,
    ) -> Daemon:
        """``node``'s agent with its reboot sentinel (or none), on the fixed clock; not run yet."""
        path = self.tmp / f"sentinel-{node}"
        if sentinel:
            path.touch()
        stopping = threading.Event()

        def sleep(seconds: float) -> None:
            if stopping.wait(seconds):
                raise Stopped(node)

        hands = Hands(
            book=NodeBook(self.kube, node=node),
            drainer=Drainer(self.kube, node=node, cancel=stopping, retry_delay=0.2, max_retry_delay=0.5,
                            poll_interval=0.2),
            lock=AnnotationLock(self.kube, namespace=self.ns, ds_name="kured", annotation=LOCK, node_id=node,
                                concurrency=1, ttl=Duration(0), sleep=sleep),
            rebooter=RecordingRebooter(),
            notifier=Notifier(),
            events=EventRecorder(self.kube, node=node, enabled=False),
        )  # fmt: skip
        senses = Senses(
            kube=self.kube,
            sentinel=FileSentinel(str(path)),
            window=window,
            blockers=list(blockers),
            freeze_state=(lambda: source.honours) if source is not None else (lambda: "off"),
            policy_where=source.where if source is not None else "",
        )
        daemon = Daemon(hands, senses, settings=Settings(node=node, period=3600.0, policy=CyclePolicy()),
                        clock=lambda: NOW, stopping=stopping)  # fmt: skip
        self.daemons.append(daemon)
        return daemon

    def published(self, node: str) -> agentstatus.AgentStatus | None:
        annotations = self.kube.get_node(node)["metadata"].get("annotations") or {}
        return agentstatus.decode(annotations.get(agentstatus.STATUS_ANNOTATION))

    def in_background(self, daemon: Daemon) -> None:
        """``daemon``'s passes until it is stopped (one blocks: a drain held back), on their own thread."""

        def passes() -> None:
            while not daemon.stopping.is_set():
                daemon.run_once()

        thread = threading.Thread(target=passes, daemon=True)
        thread.start()
        self.threads.append(thread)

    def plan(self, *argv: str) -> str:
        out, err = io.StringIO(), io.StringIO()
        where = [
            "-l",
            f"pool={self.pool}",
            f"--ds-namespace={self.ns}",
            f"--kubeconfig={self.k8s.admin_kubeconfig}",
        ]
        assert plan_main([*where, *argv], out=out, err=err, now=lambda: NOW) == 0, err.getvalue()
        assert err.getvalue() == ""
        return self.normalise(out.getvalue())

    def normalise(self, text: str) -> str:
        for i, name in reversed(list(enumerate(self.names))):
            text = text.replace(name, f"node-{i + 1}")
        for label, space in self.spaces.items():
            text = text.replace(space, f"<{label}>")
        return text.replace(self.ns, "<ds>")

    def close(self) -> None:
        for daemon in self.daemons:
            daemon.stop()
        for thread in self.threads:
            thread.join(timeout=30)
        for close in self.closers:
            close()
        for (
            name
        ) in self.names:  # Nodes are cluster-wide: a paused one would show in the session's other tests
            with contextlib.suppress(NotFoundError):
                self.k8s.delete_node(name)


def realign(text: str) -> str:
    """Normalising names changes cell widths: re-align the table's rows on their two-space column gaps."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("NODE "))
    end = next(i for i, line in enumerate(lines) if line.startswith(("estimated end", "(no nodes)")))
    table = [re.split(r"\s{2,}", line) for line in lines[start:end]]
    widths = [max(len(row[i]) for row in table if i < len(row)) for i in range(max(map(len, table)))]
    rows = ["  ".join(c.ljust(widths[i]) for i, c in enumerate(row)).rstrip() for row in table]
    return "\n".join([*lines[:start], *rows, *lines[end:]]) + "\n"


@pytest.fixture
def site(k8s: TestEnv, tmp_path: Path) -> Iterator[Site]:
    made = Site(k8s, tmp_path)
    try:
        yield made
    finally:
        made.close()


# -- the fleets: each builds its state -----------------------------------------------------------------------


def no_blocks(site: Site) -> None:
    """Nothing to do: two idle agents, and a node without an agent."""
    a, b, _ = site.nodes(3)
    site.agent(a, sentinel=False).run_once()
    site.agent(b, sentinel=False).run_once()


def window_closed(site: Site) -> None:
    """The window (Tuesdays 02:00-04:00 UTC) is closed on Monday evening: node-1 waits for it."""
    a, b = site.nodes(2)
    tuesday = TimeWindow.parse(["tu"], "02:00", "04:00", "UTC")
    site.agent(a, window=tuesday).run_once()
    site.agent(b, sentinel=False, window=tuesday).run_once()


def blackout(site: Site) -> None:
    """A blackout from the policy ConfigMap is in force: the window is closed until it ends."""
    a, b = site.nodes(2)
    site.kube.request("POST", f"/api/v1/namespaces/{site.ns}/configmaps", body={
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": POLICY},
        "data": {"blackouts": "2026-11-30T18:00/2026-12-01T06:00 release week\n"},
    })  # fmt: skip
    source = site.policy_source()
    window = PolicyWindow(MaintenancePolicy.build(ALWAYS), source)
    site.agent(a, window=window, blockers=[FreezeBlocker(source)], source=source).run_once()
    site.agent(b, sentinel=False, window=window, source=source).run_once()


def frozen(site: Site) -> None:
    """``pykured freeze --reason INC-1``: nothing starts; node-2 needs a reboot too."""
    a, b, c = site.nodes(3)
    policycmd.freeze(site.kube, namespace=site.ns, name=POLICY, reason="INC-1", until=None, now=NOW - HOUR)
    source = site.policy_source()
    for node in (a, b):
        site.agent(node, blockers=[FreezeBlocker(source)], source=source).run_once()
    site.agent(c, sentinel=False, blockers=[FreezeBlocker(source)], source=source).run_once()


def halted(site: Site) -> None:
    """A node did not come back within --reboot-deadline: the fleet is halted (the halt, with its node)."""
    a, b, c = site.nodes(3)
    record = FreezeRecord(reason=f"node {c} did not come back within 1h0m0s", by=f"pykured on {b}",
                          at=NOW - HOUR, halted=c)  # fmt: skip
    assert add_halt(site.kube, namespace=site.ns, name=POLICY, record=record, now=NOW) is None
    source = site.policy_source()
    site.agent(a, blockers=[FreezeBlocker(source)], source=source).run_once()
    site.agent(b, sentinel=False, blockers=[FreezeBlocker(source)], source=source).run_once()


def paused(site: Site) -> None:
    """``pykured freeze node-1 --reason 'disk swap'``: node-1 waits, the fleet does not."""
    a, b = site.nodes(2)
    policycmd.pause_nodes(site.kube, [a], reason="disk swap", until=None, now=NOW - HOUR)
    site.agent(a, blockers=[PauseBlocker(site.kube, a)]).run_once()
    site.agent(b, sentinel=False, blockers=[PauseBlocker(site.kube, b)]).run_once()


def blocking_pods(site: Site) -> None:
    """``--blocking-pod-selector=app=backup``: a backup pod runs on node-1."""
    a, b = site.nodes(2)
    space = site.namespace("jobs")
    site.k8s.create_pod(space, "backup-0", node=a, labels={"app": "backup"})
    site.agent(a, blockers=[PodBlocker(site.kube, node=a, selectors=["app=backup"])]).run_once()
    site.agent(
        b, sentinel=False, blockers=[PodBlocker(site.kube, node=b, selectors=["app=backup"])]
    ).run_once()


def alerts(site: Site) -> None:
    """``--prometheus-url``: Prometheus reports two firing alerts; every node needing a reboot waits."""
    a, b, c = site.nodes(3)
    prometheus = firing_prometheus(
        site.tmp / "prometheus", "KubePodCrashLooping", "NodeFilesystemAlmostOutOfSpace"
    )
    site.closers.append(prometheus.stop)
    for node in (a, b):
        site.agent(node, blockers=[AlertsNow(PrometheusAlertBlocker(prometheus.url))]).run_once()
    site.agent(c, sentinel=False, blockers=[AlertsNow(PrometheusAlertBlocker(prometheus.url))]).run_once()
    assert any("ALERTS" in q for q in prometheus.queries()), "the agents asked Prometheus"


def pdb(site: Site) -> None:
    """node-1 holds the lock and drains, a PodDisruptionBudget refuses its pod's eviction; node-2 waits."""
    a, b = site.nodes(2)
    space = site.namespace("db")
    site.k8s.create_pod(space, "db-0", node=a, labels={"app": "db"}, owner=RS_REF)
    site.k8s.create_pdb(space, "db", {"app": "db"}, min_available=1)
    site.k8s.set_pdb_status(space, "db", disruptions_allowed=0)
    site.in_background(site.agent(a))  # takes the lock, cordons, drains: the eviction is refused (429)
    deadline = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=30)
    while not ((st := site.published(a)) is not None and st.drain_blocked_by):
        assert datetime.datetime.now(datetime.UTC) < deadline, "the drain's blocker was never published"
        threading.Event().wait(0.05)
    site.agent(b).run_once()  # the lock is node-1's: node-2 waits for it


def lock_held(site: Site) -> None:
    """node-2 took the lock and rebooted (it has not come back yet); node-1 waits for the lock."""
    a, b = site.nodes(2)
    second = site.agent(b)
    for _ in range(4):
        second.run_once()
        if second.hands.rebooter.calls:  # type: ignore[attr-defined]
            break
    assert second.hands.rebooter.calls == 1  # type: ignore[attr-defined]
    site.agent(a).run_once()


FLEETS: dict[str, Callable[[Site], None]] = {
    "no-blocks": no_blocks,
    "window": window_closed,
    "blackout": blackout,
    "freeze": frozen,
    "halted": halted,
    "paused": paused,
    "pods": blocking_pods,
    "alerts": alerts,
    "pdb": pdb,
    "lock": lock_held,
}

HELD = {
    "no-blocks": [],
    "window": ["window closed until 2026-12-01T02:00:00Z"],
    "blackout": ["blackout until 2026-12-01T06:00:00Z: release week"],
    "freeze": ["frozen: INC-1"],
    "halted": ["halted: node node-3 did not come back within 1h0m0s"],
    "paused": ["paused by pykured-admin at 2026-11-30T20:40:00Z: disk swap"],
    "pods": ["matching pods: [backup-0]"],
    "alerts": ["2 active alerts: [KubePodCrashLooping NodeFilesystemAlmostOutOfSpace]"],
    "pdb": [
        "holds the lock (rebooting)",
        "drain: eviction of pod <db>/db-0 refused: Cannot evict pod as it would violate the pod's disruption "
        "budget. (HTTP 429)",
    ],
    "lock": ["lock held by node-2"],
}


@pytest.mark.parametrize("state", list(FLEETS))
def test_plan_against_a_real_fleet(state: str, site: Site) -> None:
    FLEETS[state](site)
    table = realign(site.plan())
    check_golden(f"{state}.txt", table)
    data = json.loads(site.plan("-o", "json"))
    check_golden(f"{state}.json", json.dumps(data, indent=2, sort_keys=True) + "\n")
    first = data["nodes"][0]
    assert first["node"] == "node-1" and first["heldBy"] == HELD[state], first
