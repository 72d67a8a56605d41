"""The lock queue of ``--resume-rolls`` on the real API server without rights on Leases (its logic is tested
in-process: tests/roll/test_queue.py)."""

from __future__ import annotations

import datetime
import logging
import time

import pytest

from pykured.kube.client import Kube
from pykured.roll import rule as turns
from pykured.roll.order import Member
from pykured.roll.queue import RollQueue
from tests.testenv import TestEnv

pytestmark = pytest.mark.k8s
PREFIX = "kured-lock"
T = datetime.datetime(2026, 11, 28, 2, 0, tzinfo=datetime.UTC)


def queue(kube: Kube, ns: str, node: str, *, grace: float = 15.0, refresh: float = 60.0) -> RollQueue:
    return RollQueue(kube, namespace=ns, prefix=PREFIX, node=node, period=3600, grace=grace, refresh=refresh)


def again(node: str) -> Member:  # rebooted in this roll, needs a reboot again
    return Member(
        node, last_reboot=T + datetime.timedelta(hours=2), waiting_since=T + datetime.timedelta(hours=30)
    )


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
