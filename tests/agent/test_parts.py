"""The daemon's own parts (pykured.agent.parts): the composition root builds them and the daemon uses what it
is given; a daemon built without them gets the same ones."""

from __future__ import annotations

import datetime
import threading

from pykured.agent.daemon import Daemon
from pykured.agent.parts import build_parts
from pykured.metrics import NullMetrics
from pykured.requests.keeper import RequestKeeper
from pykured.requests.watch import RequestWatch
from pykured.roll.queue import RollQueue
from pykured.roll.turns import RollTurns
from pykured.status.publisher import StatusPublisher
from tests.agent.test_daemon import NODE, NS, PERIOD, T0, make_rig


def _clock() -> datetime.datetime:
    return T0


def test_the_daemon_uses_the_parts_it_is_given() -> None:
    rig = make_rig()
    built = rig.daemon
    wake = threading.Event()
    queue = RollQueue(rig.kube, namespace=NS, prefix="kured-lock", node=NODE, period=PERIOD)
    parts = build_parts(
        rig.kube,
        built.hands,
        node=NODE,
        period=PERIOD,
        wake=wake,
        clock=_clock,
        metrics=NullMetrics(),
        queue=queue,
    )
    daemon = Daemon(built.hands, built.senses, settings=built.settings, clock=_clock, wake=wake, parts=parts)
    assert daemon.requests is parts.requests and daemon.status is parts.status
    assert daemon._turns is parts.turns and daemon._watch is parts.watch
    assert isinstance(parts.turns, RollTurns) and parts.turns.queue is queue
    assert built.hands.drainer.on_blocked == parts.status.drain_blocked  # the drain's blocker, published


def test_a_daemon_built_without_parts_builds_the_same_ones() -> None:
    daemon = make_rig().daemon
    assert isinstance(daemon.requests, RequestKeeper) and isinstance(daemon.status, StatusPublisher)
    assert isinstance(daemon._watch, RequestWatch) and daemon._turns is None  # no queue: kured's race
    assert daemon.hands.drainer.on_blocked == daemon.status.drain_blocked
