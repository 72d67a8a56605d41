"""The silence keeper on the real API server and a real Alertmanager: made with its record on the Node,
expired with the record removed, by a keeper that did not make it too (an agent restarted mid-cycle); a
silence that cannot be made is an Event, never an error."""

from __future__ import annotations

import datetime

import pytest

from pykured.alertmanager.silence import SILENCE_ANNOTATION, SilenceKeeper, record_of
from pykured.kube.events import EventRecorder
from pykured_dev.eventually import eventually
from pykured_dev.testenv.alertmanager import Alertmanager
from tests.testenv import TestEnv

pytestmark = pytest.mark.k8s


def keeper(k8s: TestEnv, node: str, url: str, template: str = 'node="{{.Node}}"') -> SilenceKeeper:
    kube = k8s.kube()
    return SilenceKeeper(
        kube, node=node, url=url, template=template, longest=datetime.timedelta(hours=2),
        events=EventRecorder(kube, node=node), timeout=3,
    )  # fmt: skip


def events(k8s: TestEnv, node: str) -> list[str]:
    query = {"fieldSelector": f"involvedObject.name={node}"}
    return [
        str(e["reason"]) for e in k8s.kube().get("/api/v1/namespaces/default/events", query=query)["items"]
    ]


def test_made_recorded_and_expired_by_a_restarted_keeper(k8s: TestEnv, alertmanager: Alertmanager) -> None:
    (node,) = k8s.add_nodes(k8s.unique("sil"))
    alertmanager.fire("NodeRebooting", node=node)
    assert alertmanager.alerts() != []
    record = keeper(k8s, node, alertmanager.url).start()
    assert record is not None
    (made,) = alertmanager.silences(state="active")
    assert made["id"] == record.ident and made["createdBy"] == "pykured" and node in made["comment"]
    assert made["matchers"] == [{"name": "node", "value": node, "isRegex": False, "isEqual": True}]
    assert record_of(k8s.kube().get_node(node)) == record
    assert alertmanager.alerts() == []  # the node's alert is silenced
    assert keeper(k8s, node, alertmanager.url).start() == record  # the record says it has one: no second
    assert len(alertmanager.silences()) == 1

    assert keeper(k8s, node, alertmanager.url).end()  # another keeper: the agent restarted mid-cycle
    assert alertmanager.silences(state="active") == []
    assert SILENCE_ANNOTATION not in (k8s.kube().get_node(node)["metadata"].get("annotations") or {})
    assert alertmanager.alerts() != []
    assert eventually(lambda: {"Silenced", "SilenceExpired"} <= set(events(k8s, node)))
    assert not keeper(k8s, node, alertmanager.url).end()  # nothing left to expire


def test_a_silence_that_cannot_be_made_is_an_event(k8s: TestEnv, alertmanager: Alertmanager) -> None:
    (node,) = k8s.add_nodes(k8s.unique("sil"))
    url = alertmanager.url.replace("http://", "http://pk:s3cret@")
    assert keeper(k8s, node, url, template='node=~".*"').start() is None  # Alertmanager refuses it
    dead = url.rsplit(":", 1)[0] + ":1"
    assert keeper(k8s, node, dead).start() is None
    assert SILENCE_ANNOTATION not in (k8s.kube().get_node(node)["metadata"].get("annotations") or {})
    assert eventually(lambda: events(k8s, node).count("SilenceFailed") == 2)
    query = {"fieldSelector": f"involvedObject.name={node}"}
    items = k8s.kube().get("/api/v1/namespaces/default/events", query=query)["items"]
    assert all("s3cret" not in e["message"] for e in items)
