"""pykured's mark against the real Karpenter (its kwok provider, ``tools/karpenter-build``).

A node pykured cordoned and drained looks empty to Karpenter, which consolidates it. Two nodes Karpenter
launched, each in a NodePool that consolidates its empty nodes 5 s after their last pod event, each with a
pod on it and a pykured agent of its own: both agents take their slot, cordon, drain and ask for the reboot,
and the test holds both hosts there (a reboot command that has not rebooted yet), cordoned and empty. The
control agent runs with both autoscaler annotations off, the other with pykured's defaults. Karpenter deletes
the control's Node and NodeClaim in the middle of its reboot, and leaves the marked one, saying why
(``DisruptionBlocked``: the ``karpenter.sh/do-not-disrupt`` annotation); once that host reboots and its
cycle ends, the mark is gone and Karpenter removes the node. The marked node is drained first, so it was
empty at least as long as the control when Karpenter took the control.

What is asserted is what the API server saw: the Nodes, the NodeClaims, Karpenter's Events and every version
of the marked Node (a watch), never how long anything took.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pykured.core import errors
from pykured.cycle.state import AUTOSCALER_RECORD_ANNOTATION
from pykured.kube.client import Obj
from pykured_dev.eventually import eventually
from pykured_dev.testenv.fleet import Fleet
from pykured_dev.testenv.karpenter import Karpenter, find_karpenter
from tests.fleets import fleet_factory
from tests.testenv import TestEnv

BINARY = find_karpenter()
pytestmark = [
    pytest.mark.k8s,
    pytest.mark.slow,
    pytest.mark.timeout(900),
]
KARPENTER_MARK = "karpenter.sh/do-not-disrupt"
CLUSTER_AUTOSCALER_MARK = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
HELD = ("--reboot-retry-delay=1h",)
"""The agent waits for the reboot it asked for (no retry, no giving up) as long as the test holds the host."""
UNMARKED = ("--karpenter-annotation=", "--cluster-autoscaler-annotation=")
WAIT = 300.0
"""Generous: Karpenter's disruption loop runs every 10 s, on a 2-core machine others load too."""


@pytest.fixture
def karpenter() -> Iterator[tuple[TestEnv, Karpenter]]:
    """A control plane of the test's own with the real Karpenter running against it."""
    assert BINARY is not None, (
        "Karpenter's kwok provider is not built: run tools/karpenter-build (tools/dev setup does)"
    )
    env = TestEnv().start()
    try:
        with Karpenter(env, BINARY) as running:
            yield env, running
    finally:
        env.stop()


class NodeHistory:
    """Every version of one Node the API server sent a watch, in order, until it is deleted."""

    def __init__(self, env: TestEnv, node: str) -> None:
        self.versions: list[Obj] = []
        self.deleted = threading.Event()
        self._kube = env.kube()
        self._node = node
        listing = self._kube.request("GET", "/api/v1/nodes", query={"fieldSelector": f"metadata.name={node}"})
        self.versions.extend(listing["items"])
        self._rv = str(listing["metadata"]["resourceVersion"])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name=f"history-{node}", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.is_set() and not self.deleted.is_set():
            try:
                for event in self._kube.watch_nodes(
                    resource_version=self._rv,
                    field_selector=f"metadata.name={self._node}",
                    timeout_seconds=30,
                ):
                    obj = event.get("object", {})
                    if event.get("type") == "ERROR":
                        raise errors.KubeError(str(obj))
                    self._rv = str(obj.get("metadata", {}).get("resourceVersion", self._rv))
                    if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                        self.versions.append(obj)
                    if event.get("type") == "DELETED":
                        self.deleted.set()
                        return
            except errors.KubeError:
                self._stop.wait(0.5)  # a 410 would lose versions: the assertions below then fail

    def stop(self) -> None:
        self._stop.set()


def marked(obj: Obj) -> bool:
    return bool(obj["metadata"].get("annotations", {}).get(KARPENTER_MARK) == "true")


def deleting(obj: Obj) -> bool:
    return bool(obj["metadata"].get("deletionTimestamp"))


def node_obj(env: TestEnv, node: str) -> Obj | None:
    try:
        return env.kube().get_node(node)
    except errors.NotFoundError:
        return None


def events_of(env: TestEnv, kind: str, name: str) -> list[Obj]:
    found: list[Obj] = env.kube().get(
        "/api/v1/events", query={"fieldSelector": f"involvedObject.kind={kind},involvedObject.name={name}"}
    )["items"]
    return found


def said(env: TestEnv, kind: str, name: str, reason: str, words: str) -> bool:
    return any(e["reason"] == reason and words in e["message"] for e in events_of(env, kind, name))


def launch(env: TestEnv, karpenter: Karpenter, pool: str) -> tuple[str, str]:
    """A node Karpenter launched in a NodePool of its own, with a pod on it; (NodeClaim, Node)."""
    karpenter.pool(pool)
    claim = karpenter.claim(pool)
    assert eventually(lambda: karpenter.node_of(claim) is not None, timeout=WAIT), karpenter.tail()
    node = karpenter.node_of(claim)
    assert node is not None
    ns = env.new_namespace(f"{pool}-work")
    env.create_pod(ns, "work", node=node)  # the simulated kubelet runs it once it serves the node
    env.add_nodes(node)  # Ready, with a bootID: what kwok's node stages (and a kubelet) post
    assert eventually(lambda: karpenter.condition(claim, "Initialized") == "True", timeout=WAIT), (
        karpenter.tail()
    )
    return claim, node


def held_mid_reboot(env: TestEnv, fleet: Fleet, node: str) -> bool:
    """The agent cordoned and drained ``node`` and asked for the reboot, which the test holds."""
    obj = node_obj(env, node)
    pods = env.kube().list_pods(field_selector=f"spec.nodeName={node}")["items"]
    return bool(obj and obj["spec"].get("unschedulable")) and not pods and fleet.requests(node) >= 1


def test_karpenter_leaves_a_node_pykured_is_rebooting_and_takes_it_once_the_cycle_ends(
    karpenter: tuple[TestEnv, Karpenter], tmp_path: Path
) -> None:
    env, kp = karpenter
    marked_claim, marked_node = launch(env, kp, "marked")
    control_claim, control_node = launch(env, kp, "control")
    history = NodeHistory(env, marked_node)
    with fleet_factory(env, tmp_path, period="2s") as make:
        ours, _, _ = make(0, args=HELD)
        control, _, _ = make(0, args=(*HELD, *UNMARKED))
        for fleet, node in ((ours, marked_node), (control, control_node)):
            fleet.paused.add(node)  # its reboot command runs; the host reboots when the test lets it
            fleet.add(node)
        try:
            ours.touch(marked_node)
            assert eventually(lambda: held_mid_reboot(env, ours, marked_node), timeout=WAIT), ours.log_text(
                marked_node
            )
            obj = node_obj(env, marked_node)
            assert obj is not None and marked(obj)
            assert obj["metadata"]["annotations"][CLUSTER_AUTOSCALER_MARK] == "true"

            control.touch(control_node)  # drained after the marked node: empty no longer than it
            assert eventually(lambda: held_mid_reboot(env, control, control_node), timeout=WAIT), (
                control.log_text(control_node)
            )
            obj = node_obj(env, control_node)
            assert obj is not None and not marked(obj)
            assert AUTOSCALER_RECORD_ANNOTATION not in obj["metadata"].get("annotations", {})

            # The control: cordoned, drained and waiting for its reboot, Karpenter consolidates it.
            assert eventually(
                lambda: node_obj(env, control_node) is None and kp.claim_obj(control_claim) is None,
                timeout=WAIT,
            ), kp.tail()
            assert said(env, "Node", control_node, "DisruptionTerminating", "Empty")
            assert said(env, "NodeClaim", control_claim, "DisruptionTerminating", "Empty")

            # The marked node, empty as long: Karpenter found it consolidatable and left it, saying why.
            assert eventually(
                lambda: said(env, "Node", marked_node, "DisruptionBlocked", KARPENTER_MARK), timeout=WAIT
            ), f"{kp.tail()}\n{ours.log_text(marked_node)[-3000:]}"
            assert kp.condition(marked_claim, "Consolidatable") == "True"
            claim = kp.claim_obj(marked_claim)
            obj = node_obj(env, marked_node)
            assert claim is not None and not deleting(claim)
            assert obj is not None and not deleting(obj) and marked(obj) and obj["spec"].get("unschedulable")
            assert held_mid_reboot(env, ours, marked_node) and ours.slots[marked_node].reboots == 0
            assert not said(env, "Node", marked_node, "DisruptionTerminating", "")

            # The host reboots, the cycle ends, the mark comes off: now Karpenter takes the node.
            ours.paused.discard(marked_node)
            assert eventually(history.deleted.is_set, timeout=WAIT), kp.tail()
            assert eventually(lambda: kp.claim_obj(marked_claim) is None, timeout=WAIT), kp.tail()
        finally:
            history.stop()
    assert ours.slots[marked_node].reboots == 1
    assert said(env, "Node", marked_node, "DisruptionTerminating", "Empty")
    assert said(env, "NodeClaim", marked_claim, "DisruptionTerminating", "Empty")
    versions = history.versions
    assert any(marked(v) for v in versions)
    assert not any(deleting(v) for v in versions if marked(v))  # never deleted while it carried the mark
    first_deleting = next(v for v in versions if deleting(v))
    assert not marked(first_deleting)
    assert AUTOSCALER_RECORD_ANNOTATION not in first_deleting["metadata"].get("annotations", {})
