"""The agent's wiring in process (the agent as the DaemonSet runs it, FleetLock beside the daemon:
``tests/e2e/test_wiring.py``)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import cast

from pykured.agent import wiring
from pykured.alertmanager.silence import SilenceKeeper
from pykured.blockers.alertmanager import AlertmanagerAlertBlocker
from pykured.blockers.prometheus import PrometheusAlertBlocker
from pykured.blockers.registry import ORDER
from pykured.config.startup import parse
from pykured.cycle.state import FLEETLOCK_ID_ANNOTATION as FLEETLOCK_ANNOTATION
from pykured.cyclemetrics import CycleMetrics
from pykured.fleetlock import FLEETLOCK_ID_ANNOTATION
from pykured.fleetlock.service import ZincatiGrant
from pykured.gates.node import CycleGates
from pykured.halting.streak import DrainStreak
from pykured.kube.client import Kube
from pykured.kube.events import EventRecorder
from pykured.metrics import NullMetrics
from pykured.notify import Notifier
from pykured.taint import WaitingTaint
from tests.fakes import FakeKube


def test_daemon_and_fleetlock_agree_on_the_hands_off_annotation() -> None:
    assert FLEETLOCK_ANNOTATION == FLEETLOCK_ID_ANNOTATION


HANDED_OFF = "FleetLock (Zincati) runs this node's reboot cycle"


def test_alert_blockers_prometheus_then_alertmanager() -> None:
    """``--alertmanager-url`` alone, or after ``--prometheus-url`` (asked first, as kured asks it)."""
    base = ["--node-id=n", "--alert-filter-regexp=^Watchdog$"]
    assert wiring.build_prometheus_blockers(parse(base, {})) == []
    alone = wiring.build_prometheus_blockers(parse([*base, "--alertmanager-url=http://am:9093"], {}))
    assert [type(b) for b in alone] == [AlertmanagerAlertBlocker]
    both = wiring.build_prometheus_blockers(
        parse([*base, "--alertmanager-url=http://am:9093"], {"KURED_PROMETHEUS_URL": "http://prom:9090"})
    )
    assert [type(b) for b in both] == [PrometheusAlertBlocker, AlertmanagerAlertBlocker]


def test_the_agent_asks_its_blockers_in_the_declared_order(tmp_path: Path) -> None:
    """The daemon's blockers (``first_block`` asks them in this order) and FleetLock's, for any node, are the
    order :data:`pykured.blockers.registry.ORDER` declares."""
    argv = [
        "--node-id=n1",
        "--metrics-host=127.0.0.1",
        "--metrics-port=0",
        f"--reboot-sentinel={tmp_path / 'reboot-required'}",
        "--prometheus-url=http://prom:9090",
        "--alertmanager-url=http://am:9093",
        "--blocking-pod-selector=app=db",
        "--blocking-node-annotation=example.com/hold",
        "--fleetlock-listen=127.0.0.1:0",
    ]
    kube = FakeKube()
    kube.add_node("n1")
    agent = wiring.build(parse(argv, {}), kube=cast(Kube, kube))
    try:
        assert agent.daemon is not None and agent.fleetlock is not None
        daemon = [type(b).__module__ for b in agent.daemon.senses.blockers]
        zincati = [type(b).__module__ for b in agent.fleetlock.service.blockers_for("n2")]
    finally:
        agent.metrics.close()  # nothing else was started
    declared = [entry.module for entry in ORDER]
    assert daemon == zincati == declared


def observer_types(args: list[str], *, streak: DrainStreak | None = None) -> list[type]:
    cfg = parse(["--node-id=n", *args], {})
    kube = cast(Kube, FakeKube())  # the calls building the observers make (none)
    return [
        type(o)
        for o in wiring.build_observers(
            cfg, kube, "n", EventRecorder(kube, node="n"), NullMetrics(), streak=streak
        )
    ]


def test_each_configured_feature_observes_the_cycle_in_the_declared_order() -> None:
    kube = FakeKube()
    streak = DrainStreak(
        kube=kube, namespace="kube-system", configmap="kured-policy", me="n", limit=3, notifier=Notifier(),
        events_for=lambda name: EventRecorder(kube, node=name),
    )  # fmt: skip
    every = [
        "--prefer-no-schedule-taint=example.com/waiting", "--settle-nodes-ready",
        "--alertmanager-url=http://am:9093", '--silence-during-reboot=instance="{{ .Node }}"',
    ]  # fmt: skip
    assert observer_types(every, streak=streak) == [
        CycleMetrics, WaitingTaint, CycleGates, DrainStreak, SilenceKeeper
    ]  # fmt: skip
    assert observer_types(["--before-reboot-annotations=example.com/ok"]) == [CycleMetrics, CycleGates]


def test_no_feature_configured_registers_the_metrics_alone() -> None:
    assert observer_types([]) == [CycleMetrics]
    cfg = parse(["--node-id=n"], {})
    kube = cast(Kube, FakeKube())
    lock = wiring.build_lock(cfg, kube)
    hands = wiring.build_hands(
        cfg, kube, "n", threading.Event(), lock=lock, rebooter=ZincatiGrant(), notifier=Notifier(),
        metrics=NullMetrics(),
    )  # fmt: skip
    assert [type(o) for o in hands.observers] == [CycleMetrics]


BUILD = """
import json, sys
from typing import cast
from pykured.agent import wiring
from pykured.config.startup import parse
from pykured.kube.client import Kube
from tests.fakes import FakeKube

kube = FakeKube()
kube.add_node("n1")
agent = wiring.build(parse(sys.argv[1:], {}), kube=cast(Kube, kube))
agent.metrics.close()
print(json.dumps(sorted(sys.modules)))
"""
OPTIONAL = {
    "--alertmanager-url=http://am:9093": ["pykured.blockers.alertmanager", "pykured.alertmanager.api"],
    "--prometheus-url=http://prom:9090": ["pykured.blockers.prometheus"],
    '--silence-during-reboot=instance=~"{{.Node}}:.*"': ["pykured.alertmanager.silence"],
    "--maintenance-window=FREQ=WEEKLY;BYDAY=SA;BYHOUR=2;DURATION=4h": [
        "pykured.policy.recurrence",
        "dateutil",
    ],
    "--fleetlock-listen=127.0.0.1:0": ["pykured.fleetlock.server"],
    "--resume-rolls": ["pykured.roll.queue", "pykured.roll.turns"],
}


def imported_by_build(tmp_path: Path, *extra: str) -> set[str]:
    """The modules a fresh interpreter holds after building the agent from kured's defaults and ``extra``."""
    argv = ["--node-id=n1", "--metrics-host=127.0.0.1", "--metrics-port=0",
            f"--reboot-sentinel={tmp_path / 'reboot-required'}", "--lock-backend=lease", *extra]  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", BUILD, *argv], capture_output=True, text=True, check=True, timeout=120
    )
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_an_agent_imports_only_what_its_flags_use(tmp_path: Path) -> None:
    """Start-up cost: each optional feature's modules (its client, its parser) are imported only by an agent
    whose flags ask for it; with them, they are."""
    plain = imported_by_build(tmp_path)
    for flag, modules in OPTIONAL.items():
        assert not plain & set(modules), flag
    everything = imported_by_build(tmp_path, *OPTIONAL)
    for flag, modules in OPTIONAL.items():
        assert set(modules) <= everything, flag
