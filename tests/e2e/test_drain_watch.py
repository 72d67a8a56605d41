"""A drain you can watch, against the real API server: the pods the drain still waits on and why (a
PodDisruptionBudget by name, an admission webhook's message, a pod terminating past its grace period) in the
node's ``pykured.dev/status``, ``pykured status NODE`` and ``-o json``, the metric, the ``DrainSlow`` Event,
and the record cleared when the drain ends (it succeeds, times out, is escalated). The pure parts:
tests/drain/test_progress.py, tests/status/test_drainwatch.py; every path a drain runs on:
``test_a_drain_you_can_watch`` in tests/e2e/parity/test_parity.py."""

from __future__ import annotations

import contextlib
import http.client
import io
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pykured.cli.status import status_main
from pykured.core.errors import DrainTimeout, NotFoundError
from pykured.drain import Drainer
from pykured.kube.client import MERGE_PATCH, Kube
from pykured.kube.events import EventRecorder
from pykured.metrics import Metrics
from pykured.status import agent as agentstatus
from pykured.status.drainwatch import DRAIN_SLOW, DrainWatch
from pykured.status.publisher import StatusPublisher
from pykured_dev.eventually import eventually
from pykured_dev.testenv.fleet import Fleet
from tests.webhooks import MESSAGE, Webhook, evictions_webhook

pytestmark = pytest.mark.k8s
RS_REF = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "r1", "controller": True}
HOLD = {"metadata": {"finalizers": ["pykured.dev/test-hold"]}}
UNHOLD = {"metadata": {"finalizers": None}}


def _status(kube: Kube, node: str) -> agentstatus.AgentStatus | None:
    annotations = kube.get_node(node)["metadata"].get("annotations") or {}
    return agentstatus.decode(annotations.get(agentstatus.STATUS_ANNOTATION))


def _reasons(kube: Kube, node: str) -> dict[str, tuple[str, str]]:
    status = _status(kube, node)
    drain = status.drain if status is not None else None
    return {h.pod: (h.reason, h.detail) for h in drain.pods} if drain is not None else {}


def _events(kube: Kube, node: str, reason: str) -> list[str]:
    query = {"fieldSelector": f"involvedObject.name={node},reason={reason}"}
    return [str(e["message"]) for e in kube.get("/api/v1/namespaces/default/events", query=query)["items"]]


def _watched(kube: Kube, node: str, metrics: Metrics, **kw: Any) -> Drainer:
    drainer = Drainer(kube, node=node, retry_delay=0.2, max_retry_delay=0.5, poll_interval=0.2, **kw)
    drainer.on_progress = DrainWatch(
        StatusPublisher(kube, node=node, version="test"), metrics=metrics,
        events=EventRecorder(kube, node=node), slow_after=1.0, record_every=0.2,
    )  # fmt: skip
    return drainer


@pytest.fixture
def held(k8s: Any, tmp_path: Path) -> Iterator[tuple[str, str, str, str, Webhook]]:
    """A node with three pods the drain cannot move: one a PodDisruptionBudget (``guarded-pdb``) holds, one
    an admission webhook refuses to evict, one a finalizer keeps terminating past its grace period; the
    namespace of the agents' DaemonSet, the pods' namespace, the webhook's namespace and the webhook."""
    ds, workloads, hooked = k8s.new_namespace("ds"), k8s.new_namespace("dw"), k8s.new_namespace("wh")
    k8s.create_daemonset(ds, "kured")
    node = k8s.unique("node")
    k8s.add_nodes(node)
    k8s.create_pod(workloads, "guarded", node=node, labels={"app": "guarded"}, owner=RS_REF)
    k8s.create_pdb(workloads, "guarded-pdb", {"app": "guarded"}, min_available=1)
    k8s.set_pdb_status(workloads, "guarded-pdb", disruptions_allowed=0)
    k8s.create_pod(workloads, "stuck", node=node, owner=RS_REF, grace=1)
    k8s.kube().request(
        "PATCH", f"/api/v1/namespaces/{workloads}/pods/stuck", body=HOLD, content_type=MERGE_PATCH
    )
    k8s.create_pod(hooked, "broker-0", node=node, owner=RS_REF)
    try:
        with evictions_webhook(k8s, hooked, tmp_path, deny=10_000) as hook:
            yield ds, node, workloads, hooked, hook
    finally:
        with contextlib.suppress(NotFoundError):  # gone when the test let it go
            k8s.kube().request(
                "PATCH", f"/api/v1/namespaces/{workloads}/pods/stuck", body=UNHOLD, content_type=MERGE_PATCH
            )


def test_the_drain_shows_each_pod_and_why_in_status_metrics_and_an_event_and_clears_at_its_end(
    k8s: Any, held: tuple[str, str, str, str, Webhook]
) -> None:
    ds, node, workloads, hooked, hook = held
    kube, metrics = k8s.kube(), Metrics(process_collectors=False)
    drainer = _watched(kube, node, metrics)
    outcome: list[object] = []
    worker = threading.Thread(target=lambda: outcome.append(drainer.drain()))
    worker.start()
    try:
        expected = {
            f"{workloads}/guarded": ("pdb", "guarded-pdb"),
            f"{workloads}/stuck": ("overdue", ""),
        }

        def recorded() -> bool:
            found = _reasons(kube, node)
            webhook = found.pop(f"{hooked}/broker-0", ("", ""))
            return found == expected and webhook[0] == "webhook" and MESSAGE in webhook[1]

        assert eventually(recorded, timeout=90), _reasons(kube, node)
        # pykured status NODE: the table, then the pods the drain waits on, for how long and why
        argv = [node, f"--ds-namespace={ds}", f"--kubeconfig={k8s.admin_kubeconfig}"]
        out, err = io.StringIO(), io.StringIO()
        assert status_main(argv, out=out, err=err) == 0, err.getvalue()
        text = out.getvalue()
        assert f"drain of {node}: running for " in text and "waiting for 3 pods" in text, text
        lines = {line.split()[0]: line for line in text.splitlines() if line.startswith("  ")}
        assert "PodDisruptionBudget guarded-pdb" in lines[f"{workloads}/guarded"], text
        assert "terminating past its grace period" in lines[f"{workloads}/stuck"], text
        assert f'admission webhook "{hooked}.evictions.pykured.dev" denied the request: {MESSAGE}' in lines[
            f"{hooked}/broker-0"
        ], text  # fmt: skip
        out = io.StringIO()
        assert status_main([*argv, "-o", "json"], out=out, err=err) == 0, err.getvalue()
        (data,) = json.loads(out.getvalue())["nodes"]
        pods = {f"{p['namespace']}/{p['name']}": p for p in data["drain"]["pods"]}
        assert data["drain"]["total"] == 3 and pods[f"{workloads}/guarded"]["detail"] == "guarded-pdb"
        assert pods[f"{workloads}/stuck"]["why"] == "terminating past its grace period"
        assert MESSAGE in pods[f"{hooked}/broker-0"]["detail"]
        # the metric, by reason (no pod names in labels)
        for reason in ("pdb", "webhook", "overdue"):
            labels = {"node": node, "reason": reason}
            assert metrics.registry.get_sample_value("pykured_drain_pods_waiting", labels) == 1.0
        # the slow-drain Event names the pods and why (another only when that changed)
        assert eventually(
            lambda: any("PodDisruptionBudget guarded-pdb" in m and MESSAGE in m and "past its grace" in m
                        for m in _events(kube, node, DRAIN_SLOW)),
            timeout=60,
        ), _events(kube, node, DRAIN_SLOW)  # fmt: skip
        # every pod may go now: the drain succeeds, and its record is gone
        k8s.set_pdb_status(workloads, "guarded-pdb", disruptions_allowed=1)
        hook.deny = 0
        kube.request(
            "PATCH", f"/api/v1/namespaces/{workloads}/pods/stuck", body=UNHOLD, content_type=MERGE_PATCH
        )
    finally:
        worker.join(120)
    assert outcome and not worker.is_alive()
    assert _status(kube, node) is None  # no agent publishes on this node: the drain's record was all of it
    assert (
        metrics.registry.get_sample_value("pykured_drain_pods_waiting", {"node": node, "reason": "pdb"})
        is None
    )


def test_the_record_is_cleared_when_the_drain_times_out_and_when_its_escalation_ends(k8s: Any) -> None:
    ns, node = k8s.new_namespace("dw"), k8s.unique("node")
    k8s.add_nodes(node)
    k8s.create_pod(ns, "guarded", node=node, labels={"app": "guarded"}, owner=RS_REF, grace=1)
    k8s.create_pdb(ns, "guarded-pdb", {"app": "guarded"}, min_available=1)
    k8s.set_pdb_status(ns, "guarded-pdb", disruptions_allowed=0)
    kube = k8s.kube()
    agent = agentstatus.AgentStatus(version="1.0", boot_id="b", step="drain-and-reboot", sentinel=True)
    kube.patch_node(
        node, {"metadata": {"annotations": {agentstatus.STATUS_ANNOTATION: agentstatus.encode(agent)}}}
    )
    written: list[agentstatus.AgentStatus | None] = []
    kube.on_node_written(
        lambda name, obj: written.append(
            agentstatus.decode((obj["metadata"].get("annotations") or {}).get(agentstatus.STATUS_ANNOTATION))
        ) if name == node else None
    )  # fmt: skip
    drainer = _watched(kube, node, Metrics(process_collectors=False), timeout=3.0)
    with pytest.raises(DrainTimeout):
        drainer.drain()
    held = [s.drain for s in written if s is not None and s.drain is not None]
    assert held and held[-1].pods[0].reason == "pdb" and held[-1].pods[0].detail == "guarded-pdb", written
    assert _status(kube, node) == agent  # timed out: the record gone, the agent's own status kept
    del written[:]
    drainer.delete_remaining()  # --drain-escalation=delete: deleted, gone within its grace period
    assert _status(kube, node) == agent
    drains = [s.drain for s in written if s is not None and s.drain is not None]
    assert all(h.reason != "pdb" for drain in drains for h in drain.pods), drains


@pytest.mark.slow
def test_an_agent_records_its_drain_and_pykured_status_names_the_budget(k8s: Any, tmp_path: Path) -> None:
    """A real agent drains its node; a PodDisruptionBudget holds a pod: its status names the budget while the
    drain waits, ``pykured status NODE`` prints it, the agent's ``/metrics`` counts the pod by reason; once
    the budget allows, the node reboots and the record is gone (the Event of a real agent, built as
    ``pykured`` builds it: tests/e2e/parity/test_parity.py)."""
    ns, workloads = k8s.new_namespace("ds"), k8s.new_namespace("dw")
    k8s.create_daemonset(ns, "kured")
    node = k8s.unique("node")
    k8s.add_nodes(node)
    k8s.create_pod(workloads, "guarded", node=node, labels={"app": "guarded"}, owner=RS_REF)
    k8s.create_pdb(workloads, "guarded-pdb", {"app": "guarded"}, min_available=1)
    k8s.set_pdb_status(workloads, "guarded-pdb", disruptions_allowed=0)
    kube = k8s.kube()
    # a drain that waits as long as the budget holds (this test ends it by letting the budget allow)
    args = [f"--ds-namespace={ns}", "--period=2s", "--drain-timeout=1h"]
    with Fleet(k8s, workdir=tmp_path / "fleet", args=args, metrics=True) as fleet:
        slot = fleet.add(node)
        fleet.touch(node)
        assert fleet.wait_for(
            lambda: _reasons(kube, node).get(f"{workloads}/guarded") == ("pdb", "guarded-pdb"), timeout=90
        ), fleet.log_text(node)
        argv = [node, f"--ds-namespace={ns}", f"--kubeconfig={k8s.admin_kubeconfig}"]
        out, err = io.StringIO(), io.StringIO()
        assert status_main(argv, out=out, err=err) == 0, err.getvalue()
        (row,) = [line for line in out.getvalue().splitlines() if line.startswith(node)]
        assert "draining, waiting for 1 pods" in row, out.getvalue()
        assert f"  {workloads}/guarded  PodDisruptionBudget guarded-pdb  for " in out.getvalue()

        def scraped() -> str:
            conn = http.client.HTTPConnection(slot.metrics_address, timeout=5)
            try:
                conn.request("GET", "/metrics")
                return conn.getresponse().read().decode()
            finally:
                conn.close()

        assert f'pykured_drain_pods_waiting{{node="{node}",reason="pdb"}} 1.0' in scraped()
        k8s.set_pdb_status(workloads, "guarded-pdb", disruptions_allowed=1)
        assert fleet.wait_for(lambda: fleet.slots[node].reboots == 1, timeout=90), fleet.log_text(node)
        assert fleet.wait_for(
            lambda: (s := _status(kube, node)) is not None and s.drain is None, timeout=90
        ), fleet.log_text(node)
        assert f'pykured_drain_pods_waiting{{node="{node}",reason="pdb"}}' not in scraped()
