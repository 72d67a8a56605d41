"""The status publisher on the real API server: the drain's blocker is written at once and kept until the
node needs no reboot; the roll's record goes with the status."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from pykured.cycle.state import NodeState
from pykured.roll import record as rollrecord
from pykured.status import agent as agentstatus
from pykured.status.agent import AgentStatus
from pykured.status.publisher import StatusPublisher

pytestmark = pytest.mark.k8s
NOW = datetime.datetime(2026, 11, 30, 21, 40, tzinfo=datetime.UTC)


def test_the_drains_blocker_is_published_at_once_kept_and_dropped_when_no_reboot_is_needed(k8s: Any) -> None:
    node = k8s.unique("node")
    k8s.add_nodes(node)
    kube = k8s.kube()

    def view() -> NodeState:
        return NodeState.from_obj(kube.get_node(node))

    def published() -> agentstatus.AgentStatus | None:
        return agentstatus.decode(view().annotations.get(agentstatus.STATUS_ANNOTATION))

    publisher = StatusPublisher(kube, node=node, version="0.1.0")
    assert publisher.drain_blocked("too early") is False  # nothing published on the Node yet: only kept
    publisher.drain_blocked("")
    assert publisher.publish(view(), AgentStatus(step="drain-and-reboot", sentinel=True), now=NOW)
    assert publisher.drain_blocked("eviction of pod a/b refused: no (HTTP 429)")
    status = published()
    assert status is not None and status.drain_blocked_by == "eviction of pod a/b refused: no (HTTP 429)"
    assert status.step == "drain-and-reboot" and status.sentinel
    assert not publisher.drain_blocked("eviction of pod a/b refused: no (HTTP 429)")  # unchanged: no write
    publisher.publish(view(), AgentStatus(step="wait", sentinel=True), now=NOW)  # a failed drain: kept
    status = published()
    assert status is not None and status.step == "wait" and status.drain_blocked_by.endswith("(HTTP 429)")
    assert publisher.publish(view(), AgentStatus(step="wait", sentinel=False), now=NOW)  # no reboot needed
    status = published()
    assert status is not None and status.drain_blocked_by == "" and publisher.drain_blocked_by == ""


def test_the_rolls_record_is_written_with_the_status_and_only_when_it_changes(k8s: Any) -> None:
    node = k8s.unique("node")
    k8s.add_nodes(node)
    kube = k8s.kube()

    def view() -> NodeState:
        return NodeState.from_obj(kube.get_node(node))

    def place() -> rollrecord.Place | None:
        return rollrecord.decode(view().annotations.get(rollrecord.ROLL_ANNOTATION))

    publisher = StatusPublisher(kube, node=node, version="0.1.0")
    assert publisher.publish(view(), AgentStatus(step="acquire", sentinel=True), now=NOW)
    assert place() == rollrecord.Place(waiting_since=NOW)
    later = NOW + datetime.timedelta(hours=1)
    assert not publisher.publish(view(), AgentStatus(step="acquire", sentinel=True), now=later)  # no change
    assert place() == rollrecord.Place(waiting_since=NOW)
    assert publisher.publish(view(), AgentStatus(step="wait", sentinel=False), now=later)
    assert place() == rollrecord.Place()


def test_a_status_someone_else_overwrote_or_removed_is_written_again_at_once(k8s: Any) -> None:
    node = k8s.unique("node")
    k8s.add_nodes(node)
    kube = k8s.kube()

    def view() -> NodeState:
        return NodeState.from_obj(kube.get_node(node))

    def carried() -> str | None:
        return view().annotations.get(agentstatus.STATUS_ANNOTATION)

    publisher = StatusPublisher(kube, node=node, version="0.1.0")
    status = AgentStatus(step="wait", sentinel=False)
    assert publisher.publish(view(), status, now=NOW)
    mine = carried()
    assert not publisher.publish(view(), status, now=NOW)  # nothing changed: no write
    kube.patch_node(node, {"metadata": {"annotations": {agentstatus.STATUS_ANNOTATION: "[" * 3000}}})
    assert publisher.publish(view(), status, now=NOW)  # the same status, but the Node carried garbage
    assert carried() == mine
    kube.patch_node(node, {"metadata": {"annotations": {agentstatus.STATUS_ANNOTATION: None}}})
    assert publisher.publish(view(), status, now=NOW)
    assert carried() == mine
