"""The silence keeper on the real API server and a real Alertmanager: made with its record on the Node,
expired with the record removed, by a keeper that did not make it too (an agent restarted mid-cycle); a
silence that cannot be made is an Event, never an error; an expiry Alertmanager refuses (a proxy in front of
it answers 500) is marked on the Node, counted, shown by ``pykured status`` and retried until it succeeds —
by the same keeper, or by the next agent's."""

from __future__ import annotations

import datetime
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from pykured.alertmanager.record import SILENCE_ANNOTATION, SilenceRecord, record_of, record_patch
from pykured.alertmanager.silence import SilenceKeeper
from pykured.core import errors
from pykured.cycle.state import NodeState
from pykured.fleet import view as fleetview
from pykured.kube.client import JSON_PATCH, MERGE_PATCH
from pykured.kube.events import EventRecorder
from pykured.metrics import Metrics
from pykured_dev.eventually import eventually
from pykured_dev.testenv.alertmanager import Alertmanager, AlertmanagerProxy
from tests.testenv import TestEnv

pytestmark = pytest.mark.k8s


def keeper(
    k8s: TestEnv, node: str, url: str, template: str = 'node="{{.Node}}"', **more: Any
) -> SilenceKeeper:
    kube = k8s.kube()
    return SilenceKeeper(
        kube, node=node, url=url, template=template, longest=datetime.timedelta(hours=2),
        events=EventRecorder(kube, node=node), timeout=3, **more,
    )  # fmt: skip


@pytest.fixture
def proxy(alertmanager: Alertmanager) -> Iterator[AlertmanagerProxy]:
    with AlertmanagerProxy(alertmanager.url) as found:
        yield found


@pytest.fixture
def stopping() -> Iterator[threading.Event]:
    """The agent's stop: set at the end of the test, so no keeper's retry outlives it."""
    event = threading.Event()
    yield event
    event.set()


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


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


def test_a_refused_expiry_is_marked_counted_shown_and_retried(
    k8s: TestEnv, alertmanager: Alertmanager, proxy: AlertmanagerProxy, stopping: threading.Event
) -> None:
    (node,) = k8s.add_nodes(k8s.unique("sil"))
    metrics = Metrics(process_collectors=False)
    kept = keeper(k8s, node, proxy.url, metrics=metrics, stopping=stopping, retry_first=0.5, retry_max=2.0)
    made = kept.start()
    assert made is not None
    proxy.refuse_expiry = True
    assert kept.end()  # the slot would be freed now: the expiry fails, and does not hold it
    (silence,) = alertmanager.silences(state="active")
    marked = record_of(k8s.kube().get_node(node))
    assert marked is not None and marked.ident == made.ident and marked.due is not None
    assert sample(metrics, "pykured_silence_expiry_failures_total") >= 1
    assert sample(metrics, "pykured_silence_expiry_pending", node=node) == 1.0
    assert eventually(lambda: "SilenceFailed" in events(k8s, node))
    row = fleetview.node_row(
        NodeState.from_obj(k8s.kube().get_node(node)), now=datetime.datetime.now(datetime.UTC)
    )
    assert "silence not expired since " in row.cells(datetime.datetime.now(datetime.UTC))[5]
    assert eventually(lambda: sample(metrics, "pykured_silence_expiry_failures_total") >= 2, timeout=60)
    assert alertmanager.silences(state="active") == [silence]  # every retry refused: still active

    proxy.refuse_expiry = False
    assert eventually(lambda: alertmanager.silences(state="active") == [], timeout=60)
    assert eventually(lambda: record_of(k8s.kube().get_node(node)) is None, timeout=60)
    assert sample(metrics, "pykured_silence_expiry_pending", node=node) == 0.0
    assert eventually(lambda: "SilenceExpired" in events(k8s, node))
    assert [e.status for e in proxy.expiries][-1] == 200 and {e.status for e in proxy.expiries[:-1]} == {500}


def test_the_next_agent_retries_a_leftover_it_finds_on_the_node(
    k8s: TestEnv, alertmanager: Alertmanager, proxy: AlertmanagerProxy
) -> None:
    """The agent whose expiry failed stops before a retry succeeds: the next one (another keeper) sees the
    marked record at its first pass and expires the silence; so does it a record left on a Node whose cycle
    ended without marking it (its memory gone)."""
    (node,) = k8s.add_nodes(k8s.unique("sil"))
    first_stop = threading.Event()
    first = keeper(k8s, node, proxy.url, stopping=first_stop, retry_first=0.5, retry_max=1.0)
    assert first.start() is not None
    proxy.refuse_expiry = True
    first.end()
    first_stop.set()  # that agent stops; its retry ends with it
    proxy.refuse_expiry = False
    assert len(alertmanager.silences(state="active")) == 1
    second_stop = threading.Event()
    try:
        second = keeper(k8s, node, proxy.url, stopping=second_stop, retry_first=0.2)
        second.observed(NodeState.from_obj(k8s.kube().get_node(node)))  # its first pass
        assert eventually(lambda: alertmanager.silences(state="active") == [], timeout=60)
        assert eventually(lambda: record_of(k8s.kube().get_node(node)) is None, timeout=60)

        orphan = keeper(k8s, node, proxy.url).start()  # a record, and no cycle's memory on the Node
        assert orphan is not None and orphan.due is None
        second.observed(NodeState.from_obj(k8s.kube().get_node(node)))
        assert eventually(lambda: alertmanager.silences(state="active") == [], timeout=60)
        assert eventually(lambda: record_of(k8s.kube().get_node(node)) is None, timeout=60)
    finally:
        second_stop.set()


def test_a_new_cycle_expires_a_leftover_before_its_own_silence(
    k8s: TestEnv, alertmanager: Alertmanager, proxy: AlertmanagerProxy, stopping: threading.Event
) -> None:
    (node,) = k8s.add_nodes(k8s.unique("sil"))
    kept = keeper(k8s, node, proxy.url, stopping=stopping, retry_first=3600)  # no background retry here
    old = kept.start()
    assert old is not None
    proxy.refuse_expiry = True
    kept.end()
    assert kept.start() is None  # the leftover still cannot be expired: no second silence
    assert [s["id"] for s in alertmanager.silences()] == [old.ident]
    proxy.refuse_expiry = False
    new = kept.start()
    assert new is not None and new.ident != old.ident and new.due is None
    assert {s["id"]: s["status"]["state"] for s in alertmanager.silences()} == {
        old.ident: "expired", new.ident: "active",
    }  # fmt: skip
    assert record_of(k8s.kube().get_node(node)) == new


def test_the_record_changes_only_if_it_is_still_the_one_read(k8s: TestEnv) -> None:
    """The API server refuses the keeper's JSON patch when the record is no longer the value it read: a
    retry never removes (nor marks) the record of a newer silence."""
    (node,) = k8s.add_nodes(k8s.unique("sil"))
    kube = k8s.kube()
    until = datetime.datetime(2030, 1, 1, tzinfo=datetime.UTC)
    old = SilenceRecord("00000000-0000-0000-0000-000000000001", until).to_json()
    new = SilenceRecord("00000000-0000-0000-0000-000000000002", until).to_json()
    kube.patch_node(node, {"metadata": {"annotations": {SILENCE_ANNOTATION: new}}}, patch_type=MERGE_PATCH)
    for value in (None, "x"):
        with pytest.raises(errors.KubeError):
            kube.patch_node(node, record_patch(old, value), patch_type=JSON_PATCH)
    assert kube.get_node(node)["metadata"]["annotations"][SILENCE_ANNOTATION] == new
    kube.patch_node(node, record_patch(new, None), patch_type=JSON_PATCH)
    assert SILENCE_ANNOTATION not in (kube.get_node(node)["metadata"].get("annotations") or {})
