"""pykured.kube.events on the real API server: the Event on the Node, and kured's RBAC (no Events) without an
error."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from pykured.kube.client import Kube
from pykured.kube.events import DRAIN_FAILED, EVENT_NAMESPACE, REBOOTING, EventRecorder


def _events_for(kube: Kube, node: str) -> list[dict[str, Any]]:
    query = {"fieldSelector": f"involvedObject.name={node}"}
    return list(kube.get(f"/api/v1/namespaces/{EVENT_NAMESPACE}/events", query=query)["items"])


@pytest.mark.k8s
def test_event_appears_on_the_node(k8s: Any) -> None:
    node = k8s.unique("node")
    k8s.add_nodes(node)
    uid = k8s.kube().get_node(node)["metadata"]["uid"]
    recorder = EventRecorder(k8s.kube(), node=node, node_uid=uid)
    assert recorder.record(REBOOTING, f"Rebooting node {node}") is True
    assert recorder.record(DRAIN_FAILED, "PDB blocked", warning=True) is True
    events = sorted(_events_for(k8s.kube(), node), key=lambda e: e["reason"])
    assert [(e["reason"], e["type"]) for e in events] == [(DRAIN_FAILED, "Warning"), (REBOOTING, "Normal")]
    assert events[1]["involvedObject"] == {"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid}
    assert events[1]["source"] == {"component": "pykured", "host": node}
    assert events[1]["count"] == 1


@pytest.mark.k8s
def test_kureds_rbac_disables_events_without_raising(k8s: Any, caplog: pytest.LogCaptureFixture) -> None:
    node = k8s.unique("node")
    rbac_ns = k8s.new_namespace("kured")
    k8s.apply_rbac_kured(rbac_ns)
    kube = k8s.kube_as(
        f"system:serviceaccount:{rbac_ns}:kured",
        ("system:serviceaccounts", f"system:serviceaccounts:{rbac_ns}"),
    )
    recorder = EventRecorder(kube, node=node)
    caplog.set_level(logging.DEBUG, logger="pykured.kube.events")
    assert recorder.record(REBOOTING, "x") is False
    assert recorder.enabled is False
    assert recorder.record(REBOOTING, "y") is False
    assert len([r for r in caplog.records if "disabling" in r.getMessage()]) == 1
    assert _events_for(k8s.kube(), node) == []
