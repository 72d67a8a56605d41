"""Tests for pykured.kube.events: the Event body, and posting (or quietly not posting) on FakeKube (on the
real API server, with and without kured's RBAC: tests/e2e/kube/test_events.py)."""

from __future__ import annotations

import datetime

from pykured.core.errors import KubeError
from pykured.kube.events import EVENT_NAMESPACE, REBOOTING, EventRecorder, build_event
from tests.fakes import FakeKube

T0 = datetime.datetime(2026, 6, 30, 11, 29, 16, tzinfo=datetime.UTC)


def test_build_event_body() -> None:
    body = build_event(
        node="n1",
        node_uid="u1",
        reason=REBOOTING,
        message="Rebooting node n1",
        event_type="Normal",
        component="pykured",
        now=T0,
        name="n1.abc",
    )
    assert body == {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "n1.abc", "namespace": EVENT_NAMESPACE},
        "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "u1"},
        "reason": "Rebooting",
        "message": "Rebooting node n1",
        "type": "Normal",
        "firstTimestamp": "2026-06-30T11:29:16Z",
        "lastTimestamp": "2026-06-30T11:29:16Z",
        "count": 1,
        "source": {"component": "pykured", "host": "n1"},
    }


def test_build_event_without_uid_and_long_message() -> None:
    body = build_event(
        node="n1",
        node_uid="",
        reason="X",
        message="m" * 5000,
        event_type="Warning",
        component="c",
        now=T0,
        name="n",
    )
    assert "uid" not in body["involvedObject"]
    assert len(body["message"]) == 1024
    assert body["type"] == "Warning"


def test_unreachable_server_does_not_raise() -> None:
    kube = FakeKube()
    kube.fail_next(lambda method, path, body: KubeError("POST events: connection refused"))
    recorder = EventRecorder(kube, node="n")
    assert recorder.record(REBOOTING, "x") is False
    assert kube.events == []
    assert recorder.enabled is True  # only a 403 turns events off


def test_disabled_recorder_posts_nothing() -> None:
    kube = FakeKube()
    assert EventRecorder(kube, node="n1", enabled=False).record(REBOOTING, "x") is False
    assert kube.events == [] and kube.requests == []


def test_enabled_recorder_posts_one_event_about_the_node() -> None:
    kube = FakeKube()
    assert EventRecorder(kube, node="n1").record(REBOOTING, "Node n1 rebooting") is True
    (event,) = kube.events
    assert event["involvedObject"]["name"] == "n1" and event["reason"] == REBOOTING
    assert kube.requests == [("POST", f"/api/v1/namespaces/{EVENT_NAMESPACE}/events")]
