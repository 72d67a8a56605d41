"""The agent's copy of its own Node (pure: the newer version wins, a dead watch serves nothing; the pass
served by the watch on the real API server: tests/e2e/cycle/test_nodecopy.py)."""

from __future__ import annotations

from typing import Any

from pykured.cycle.nodecopy import NodeCopy


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
