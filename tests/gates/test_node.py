"""The gates as an observer of the cycle: a hold at each point, the phase begun, the PDBs noted at the drain's
start, the marks removed when the cycle ends."""

from __future__ import annotations

import datetime

from pykured.core.model import Verdict
from pykured.gates.node import CycleGates
from tests.fakes import FakeKube

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
HOOK = "example.com/ok"


def test_gates_with_nothing_configured_have_nothing_to_say() -> None:
    kube = FakeKube()
    kube.add_node("n")
    gates = CycleGates(kube, node="n")
    assert gates.hold("n", "before-drain", NOW) is None and gates.hold("n", "before-release", NOW) is None
    gates.forgetting("n")
    assert kube.nodes["n"]["metadata"]["labels"] == {}


def test_the_before_reboot_hooks_hold_the_drain_until_they_answer() -> None:
    kube = FakeKube()
    kube.add_node("n")
    gates = CycleGates(kube, node="n", before_annotations=[HOOK])
    held = gates.hold("n", "before-drain", NOW)
    assert held is not None and held.verdict is Verdict.WAIT and held.start == "before"
    released = gates.hold("n", "before-release", NOW)  # no after-reboot hook, no settle gate: it passes
    assert released is not None and released.verdict is Verdict.OPEN
    gates.begin("n", "before", NOW)
    assert kube.nodes["n"]["metadata"]["labels"]["pykured.dev/before-reboot"] == "true"
    waiting = gates.hold("n", "before-drain", NOW)
    assert waiting is not None and waiting.verdict is Verdict.WAIT and not waiting.start
    kube.patch_node("n", {"metadata": {"annotations": {HOOK: "true"}}})
    opened = gates.hold("n", "before-drain", NOW)
    assert opened is not None and opened.verdict is Verdict.OPEN
    gates.forgetting("n")
    assert "pykured.dev/before-reboot" not in kube.nodes["n"]["metadata"]["labels"]
