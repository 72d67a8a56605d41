"""The lock queue of ``--resume-rolls`` on the real API server: entries, the order, the grace, leaving."""

from __future__ import annotations

import datetime
import logging
import time

import pytest

from pykured.kube.client import Kube
from pykured.roll import rule as turns
from pykured.roll.order import Member
from pykured.roll.queue import RollQueue, queue_lease_name
from tests.testenv import TestEnv

pytestmark = pytest.mark.k8s
PREFIX = "kured-lock"
T = datetime.datetime(2026, 11, 28, 2, 0, tzinfo=datetime.UTC)


def queue(kube: Kube, ns: str, node: str, *, grace: float = 15.0, refresh: float = 60.0) -> RollQueue:
    return RollQueue(kube, namespace=ns, prefix=PREFIX, node=node, period=3600, grace=grace, refresh=refresh)


def fresh(node: str) -> Member:
    return Member(node, last_reboot=None, waiting_since=T)


def again(node: str) -> Member:  # rebooted in this roll, needs a reboot again
    return Member(
        node, last_reboot=T + datetime.timedelta(hours=2), waiting_since=T + datetime.timedelta(hours=30)
    )


def test_a_node_rebooted_in_the_roll_waits_for_one_that_was_not(k8s: TestEnv) -> None:
    ns, kube = k8s.new_namespace("queue"), k8s.kube()
    a, b = queue(kube, ns, "node-a"), queue(kube, ns, "node-b")
    b.note(turns.WINDOW, fresh("node-b"), now_ns=time.time_ns())  # b waits for its window: still ahead
    turn = a.turn(again("node-a"), holders=[], concurrency=1)
    assert not turn.go and turn.ahead == ("node-b",)
    assert b.turn(fresh("node-b"), holders=[], concurrency=1).go
    # b took the lock (holds a slot) and left the queue: a's turn
    b.leave()
    assert a.turn(again("node-a"), holders=["node-b"], concurrency=2).go
    lease = kube.get_lease(ns, queue_lease_name(PREFIX, "node-b"))
    assert not lease["spec"].get("holderIdentity") and turns.ENTRY_ANNOTATION not in lease["metadata"].get(
        "annotations", {}
    )
    assert lease["metadata"]["labels"][turns.QUEUE_LABEL] == PREFIX


def test_the_entry_is_written_once_and_renewed_only_when_due(k8s: TestEnv) -> None:
    ns, kube = k8s.new_namespace("queue"), k8s.kube()
    q = queue(kube, ns, "node-a", refresh=1.0)
    name = queue_lease_name(PREFIX, "node-a")
    q.note(turns.WAITING, fresh("node-a"), now_ns=time.time_ns())
    first = kube.get_lease(ns, name)
    assert first["spec"]["holderIdentity"] == "node-a"
    assert first["spec"]["acquireTime"].startswith("2026-11-28T02:00:00")  # waiting since
    q.note(turns.WAITING, fresh("node-a"), now_ns=time.time_ns())
    assert kube.get_lease(ns, name)["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    time.sleep(1.1)
    q.note(turns.WAITING, fresh("node-a"), now_ns=time.time_ns())
    renewed = kube.get_lease(ns, name)
    assert renewed["metadata"]["resourceVersion"] != first["metadata"]["resourceVersion"]
    assert renewed["spec"]["renewTime"] > first["spec"]["renewTime"]
    q.note(turns.HELD, fresh("node-a"), now_ns=time.time_ns())  # a change is written at once
    (entry,) = q.entries()
    assert entry.state == turns.HELD and entry.member == fresh("node-a")


def test_a_contender_that_leaves_the_free_slot_alone_is_passed_after_the_grace(k8s: TestEnv) -> None:
    ns, kube = k8s.new_namespace("queue"), k8s.kube()
    queue(kube, ns, "node-b").note(turns.WAITING, fresh("node-b"), now_ns=time.time_ns())  # and never goes
    a = queue(kube, ns, "node-a", grace=1.0)
    first = a.turn(again("node-a"), holders=[], concurrency=1)
    assert not first.go and first.wait_s <= 1.0
    time.sleep(1.1)
    turn = a.turn(again("node-a"), holders=[], concurrency=1)
    assert turn.go and turn.skipped and turn.ahead == ("node-b",)


def test_a_restarted_agent_clears_the_entry_its_previous_process_left(k8s: TestEnv) -> None:
    ns, kube = k8s.new_namespace("queue"), k8s.kube()
    queue(kube, ns, "node-a").note(turns.WAITING, fresh("node-a"), now_ns=time.time_ns())
    restarted = queue(kube, ns, "node-a")
    assert [e.node for e in restarted.entries()] == ["node-a"]
    restarted.leave()
    assert restarted.entries() == []
    restarted.leave()  # nothing to clear, no error


def test_without_rights_on_leases_the_agent_goes_to_the_lock_and_says_why(
    k8s: TestEnv, caplog: pytest.LogCaptureFixture
) -> None:
    ns = k8s.new_namespace("queue")
    q = queue(k8s.kube_as("nobody"), ns, "node-a")
    with caplog.at_level(logging.WARNING, logger="pykured.roll.queue"):
        assert q.turn(again("node-a"), holders=[], concurrency=1).go
    text = caplog.text
    assert "Could not update the lock queue entry" in text and "Cannot read the lock queue" in text
    assert "403" in text or "forbidden" in text.lower()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="pykured.roll.queue"):
        q.note(turns.WAITING, again("node-a"), now_ns=time.time_ns() + 120 * 10**9)
    assert "Could not update the lock queue entry" not in caplog.text  # said once, not at every pass
