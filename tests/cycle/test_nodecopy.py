"""The agent's copy of its own Node: the newer version wins, a dead watch serves nothing, and on FakeKube's
watch the pass sends no GET of its Node (the same on the real API server's watch, and without the right to
watch: tests/e2e/cycle/test_nodecopy.py)."""

from __future__ import annotations

import datetime
import threading
from typing import Any

import pytest

from pykured.agent.wiring import node_copy
from pykured.cycle.book import NodeBook
from pykured.cycle.nodecopy import NodeCopy
from pykured.kube.events import EventRecorder
from pykured.notify import Notifier
from pykured.requests.keeper import RequestKeeper
from pykured.requests.watch import RequestWatch
from pykured_dev.eventually import eventually
from tests.fakes import FakeKube

NOW = datetime.datetime(2026, 11, 30, 21, 40, tzinfo=datetime.UTC)


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


def test_with_the_watch_live_a_pass_sends_no_get_of_its_node() -> None:
    kube: Any = FakeKube()
    kube.add_node("n1")
    copy = node_copy(kube, "n1")
    book = NodeBook(kube, node="n1", copy=copy)
    keeper = RequestKeeper(
        kube, node="n1", events=EventRecorder(kube, node="n1", enabled=False), notifier=Notifier.from_urls()
    )
    watch = RequestWatch(
        kube, keeper, on_request=lambda: None, clock=lambda: NOW, poll_seconds=0.5, copy=copy
    )
    stopping = threading.Event()
    follower = threading.Thread(target=watch.run, args=(stopping,), daemon=True)
    follower.start()
    try:
        assert eventually(lambda: copy.live and kube.open_watches == 1, timeout=10)
        assert kube.calls("GET", "/api/v1/nodes/n1") == 1  # the watch's own GET, that it starts from
        for _ in range(5):
            assert book.view().name == "n1"
        # The agent's own write: the next pass sees it at once, from the write's answer.
        book.update_state(reboot_attempts=2)
        assert book.view().reboot_attempts == 2
        # Someone else's write: it reaches the pass through the watch.
        kube.patch_node("n1", {"metadata": {"annotations": {"example.com/seen": "yes"}}})
        assert eventually(lambda: book.view().annotations.get("example.com/seen") == "yes", timeout=10)
        assert kube.calls("GET", "/api/v1/nodes/n1") == 1
        assert copy.served >= 7
    finally:
        stopping.set()
        kube.end_watches()
    follower.join(timeout=10)
    assert not follower.is_alive()


def test_a_reader_that_accepts_an_older_copy_gets_the_last_get_without_a_watch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The pause check of a pass reads the Node as the pass read it: with no watch (kured's RBAC), the GET
    the pass made, while it is at most ``max_age`` seconds old; after that (or with no copy), a GET."""
    clock = [1000.0]
    monkeypatch.setattr("pykured.cycle.nodecopy.time.monotonic", lambda: clock[0])
    copy = NodeCopy("n1")
    assert copy.get(max_age=10) is None  # nothing read yet
    copy.offer(node_obj("n1", "5", "read by the pass"))  # the pass's GET (no watch)
    assert copy.get() is None  # a pass still GETs its Node: no watch
    clock[0] += 9.5
    assert (copy.get(max_age=10) or {})["metadata"]["annotations"] == {"v": "read by the pass"}
    clock[0] += 1.0
    assert copy.get(max_age=10) is None  # too old: GET
    copy.set_live(True)
    copy.offer(node_obj("n1", "6", "watched"))
    clock[0] += 3600
    assert (copy.get(max_age=10) or {})["metadata"]["annotations"] == {"v": "watched"}  # live: any age
