"""The pass reads the agent's Node from its watch, not by a GET, on the real API server (requests counted).

Every HTTP request the agent's client sends is counted (a client whose transport counts what it sends to the
real kube-apiserver); the Node is read through :class:`NodeBook` as the loop's pass reads it.
"""

from __future__ import annotations

import datetime
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from pykured.cycle.nodecopy import NodeCopy
from pykured.kube.client import Kube
from pykured.kube.events import EventRecorder
from pykured.notify import Notifier
from pykured.requests.keeper import RequestKeeper
from pykured.requests.watch import RequestWatch


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class CountingKube(Kube):
    """The agent's client, counting each request it sends (method and path, watches included)."""

    sent: Counter[tuple[str, str]]

    def _send(self, method: str, path: str, **kwargs: Any) -> Any:
        watch = (kwargs.get("query") or {}).get("watch") == "true"
        self.sent[("WATCH" if watch else method, path)] += 1
        return super()._send(method, path, **kwargs)


def counting(path: str) -> CountingKube:
    kube = CountingKube.from_kubeconfig(path)
    assert isinstance(kube, CountingKube)
    kube.sent = Counter()
    return kube


def follow(kube: Kube, node: str, copy: NodeCopy) -> tuple[RequestWatch, threading.Event]:
    keeper = RequestKeeper(
        kube, node=node, events=EventRecorder(kube, node=node, enabled=False),
        notifier=Notifier.from_urls(),
    )  # fmt: skip
    stopping = threading.Event()
    watch = RequestWatch(kube, keeper, on_request=lambda: None, clock=now, poll_seconds=0.5, copy=copy)
    threading.Thread(target=watch.run, args=(stopping,), daemon=True).start()
    return watch, stopping


@pytest.fixture
def stop_watches() -> Iterator[list[threading.Event]]:
    events: list[threading.Event] = []
    yield events
    for event in events:
        event.set()


def node_obj(name: str, version: str, value: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": version, "annotations": {"v": value}}}


def test_the_newer_copy_wins_and_a_dead_watch_serves_nothing() -> None:
    copy = NodeCopy("n1")
    copy.offer(node_obj("n1", "10", "a"))
    assert copy.get() is None  # no watch yet: GET
    copy.set_live(True)
    assert (copy.get() or {})["metadata"]["annotations"] == {"v": "a"}
    copy.written("n1", node_obj("n1", "12", "write"))  # the agent's write answered first ...
    copy.offer(node_obj("n1", "11", "late event"))  # ... the watch's older event comes after it
    assert (copy.get() or {})["metadata"]["annotations"] == {"v": "write"}
    copy.written("n2", node_obj("n2", "99", "other"))  # another node's write
    copy.offer(node_obj("n2", "99", "other"))
    assert (copy.get() or {})["metadata"]["annotations"] == {"v": "write"}
    copy.offer(node_obj("n1", "not-a-number", "x"))  # an incomparable version: never served
    assert copy.get() is None
    copy.offer(node_obj("n1", "13", "b"))
    assert copy.get() is not None
    copy.set_live(False)  # the watch ended, failed or was refused
    assert copy.get() is None
    copy.set_live(True)
    assert copy.get() is None  # nothing until the next GET or event
    copy.offer(node_obj("n1", "14", "c"))
    copy.deleted()
    assert copy.get() is None
