"""PodBlocker against the real kube-apiserver; NodeMarkBlocker with real agents."""

from __future__ import annotations

import contextlib
import datetime
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pykured import blockers
from pykured.cli import agent as agentcli
from pykured.core.model import Reason
from pykured.status.agent import STATUS_ANNOTATION
from tests.fleets import MakeFleet, fleet_factory
from tests.testenv import TestEnv

NOW = datetime.datetime(2026, 1, 1, 0, 0, 0, 500000, tzinfo=datetime.UTC)


# -- PodBlocker: the query, without a cluster ---------------------------------------------------------------


def pods(*names: str, more: bool = False) -> dict[str, Any]:
    return {
        "items": [{"metadata": {"name": n}} for n in names],
        "metadata": {"continue": "t" if more else ""},
    }


# -- PodBlocker against the real apiserver ----------------------------------------------------------------


def _set_phase(k8s: TestEnv, namespace: str, name: str, phase: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/pods/{name}/status"
    k8s.kube().request(
        "PATCH", path, body={"status": {"phase": phase}}, content_type="application/merge-patch+json"
    )


@pytest.mark.k8s
@pytest.mark.parametrize(
    ("where", "phase", "labels", "selectors", "blocked"),
    [
        ("this", "Running", {"app": "blocker"}, ["app=blocker"], True),
        ("this", "Pending", {"app": "blocker"}, ["app=blocker"], True),
        ("other", "Running", {"app": "blocker"}, ["app=blocker"], False),
        ("this", "Succeeded", {"app": "blocker"}, ["app=blocker"], False),
        ("this", "Failed", {"app": "blocker"}, ["app=blocker"], False),
        ("this", "Running", {"app": "other"}, ["app=blocker"], False),
        ("this", "Running", {"app": "b"}, ["app=a", "app=b"], True),
        ("this", "Running", {"app": "a", "tier": "db"}, ["app=a,tier=db"], True),
        ("this", "Running", {"app": "a", "tier": "web"}, ["app=a,tier=db"], False),
    ],
    ids=[
        "running-here",
        "pending-here",
        "other-node",
        "succeeded",
        "failed",
        "label-mismatch",
        "or-of-selectors",
        "comma-and-match",
        "comma-and-mismatch",
    ],
)
def test_pod_blocker_on_the_apiserver(
    k8s: TestEnv,
    where: str,
    phase: str,
    labels: dict[str, str],
    selectors: list[str],
    blocked: bool,
) -> None:
    namespace = k8s.new_namespace()
    here, there = k8s.add_nodes(k8s.unique("node"), k8s.unique("node"))
    node = here if where == "this" else there
    k8s.create_pod(namespace, "blocker-pod", node=node, labels=labels, phase_running=phase == "Running")
    if phase not in ("Running", "Pending"):
        _set_phase(k8s, namespace, "blocker-pod", phase)
    reason = blockers.PodBlocker(k8s.kube(), node=here, selectors=selectors).check(now=NOW)
    assert reason == (Reason("pods", "matching pods: [blocker-pod]") if blocked else None)


@pytest.mark.k8s
def test_pod_blocker_lists_ten_then_dots(k8s: TestEnv) -> None:
    namespace = k8s.new_namespace()
    (node,) = k8s.add_nodes(k8s.unique("node"))
    for i in range(11):
        k8s.create_pod(namespace, f"p{i:02d}", node=node, labels={"app": "many"}, phase_running=False)
    reason = blockers.PodBlocker(k8s.kube(), node=node, selectors=["app=many"]).check(now=NOW)
    assert reason is not None
    names = reason.message.removeprefix("matching pods: [").removesuffix("]").split(" ")
    assert len(names) == 11
    assert names[-1] == "..."


# -- NodeMarkBlocker: real agents on simulated nodes --------------------------------------------------------


@pytest.fixture
def make_fleet(k8s: TestEnv, tmp_path: Path) -> Iterator[MakeFleet]:
    with fleet_factory(k8s, tmp_path, period="10s") as make:
        yield make


def _cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = agentcli.main(list(argv))
    return code, out.getvalue()


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["daemonset", "lease"])
def test_a_node_with_a_blocking_label_waits_while_another_reboots(
    k8s: TestEnv, make_fleet: MakeFleet, backend: str
) -> None:
    """``--blocking-node-label``: the labelled node takes no lock (its status and ``pykured plan`` say why)
    while the other node reboots; once the label is removed it reboots too."""
    args = (f"--lock-backend={backend}", "--blocking-node-label=example.com/hold")
    fleet, ns, (held, other) = make_fleet(2, args=args, labels=[{"example.com/hold": "disk-swap"}, {}])
    fleet.touch(held)
    fleet.touch(other)
    assert fleet.wait_for(lambda: fleet.slots[other].reboots == 1, timeout=60), fleet.log_text(other)
    assert fleet.wait_for(
        lambda: "Reboot blocked: node has blocking label example.com/hold" in fleet.log_text(held), timeout=30
    ), fleet.log_text(held)
    assert fleet.slots[held].reboots == 0
    assert not k8s.kube().get_node(held)["spec"].get("unschedulable")

    def published() -> bool:
        text = k8s.kube().get_node(held)["metadata"].get("annotations", {}).get(STATUS_ANNOTATION, "")
        return '"blocked":"node"' in text.replace(" ", "")

    assert fleet.wait_for(published, timeout=30)
    where = (f"--kubeconfig={k8s.admin_kubeconfig}", f"--ds-namespace={ns}")
    code, text = _cli("plan", held, *where)
    assert code == 0 and "node has blocking label example.com/hold" in text, text
    code, text = _cli("status", *where)
    assert code == 0 and "node has blocking label example.com/hold" in text, text

    k8s.kube().patch_node(
        held, {"metadata": {"labels": {"example.com/hold": None}}}, patch_type="application/merge-patch+json"
    )
    assert fleet.wait_for(lambda: fleet.slots[held].reboots == 1, timeout=60), fleet.log_text(held)
