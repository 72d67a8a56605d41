"""The agent's copy of its own Node, kept current by its watch: a pass reads it instead of GETting the Node.

The reboot-request watch (:mod:`pykured.requests.watch`) already follows the agent's Node
(``fieldSelector=metadata.name=<node>``); every copy it sees — the GET it starts from, then each event — is
offered here, and so is the answer to each of the agent's own writes of its Node
(:meth:`~pykured.kube.client.Kube.on_node_written`), so that a pass right after a write never reads a copy
older than the write, whatever the watch's lag.

Invariants:
* A copy is served only while the watch is live (:meth:`set_live`); when it ends, fails, gets 410 Gone or
  is refused (kured's RBAC has no ``watch`` on nodes) the copy is dropped and passes GET the Node again.
* Of two copies the newer wins, by ``resourceVersion`` compared as the integer it is on every API server
  backed by etcd (Kubernetes documents resource versions of one resource as comparable); a copy whose
  version is not an integer is never served (the pass GETs instead).
* A reader that accepts a copy some seconds old (``get(max_age=...)``: the pause check of the pass that has
  just read the Node) is also served the last GET's answer within that age when the watch is not live
  (kured's RBAC: no ``watch`` on nodes), so one pass reads its Node once, not once per reader.
* Thread-safe: the watch thread offers, the loop reads, any thread writes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

from pykured.kube.client import Obj


def _version(obj: Mapping[str, Any]) -> int | None:
    text = str((obj.get("metadata") or {}).get("resourceVersion") or "")
    return int(text) if text.isdigit() else None


class NodeCopy:
    """The newest copy of one Node seen by its watch or returned by a write, served while the watch lives."""

    def __init__(self, node: str) -> None:
        self.node = node
        self._mutex = threading.Lock()
        self._obj: Obj | None = None
        self._version: int | None = None
        self._live = False
        self._at: float | None = None
        """When (monotonic) the copy was offered."""
        self.served = 0
        """How many reads the copy answered (instead of a GET)."""

    def offer(self, obj: Obj) -> None:
        """A copy of the Node (the watch's GET or event, or a write's answer): kept when it is the newest."""
        if (obj.get("metadata") or {}).get("name") != self.node:
            return
        version = _version(obj)
        with self._mutex:
            if version is None:
                self._obj = self._version = None
            elif self._version is None or version >= self._version:
                self._obj, self._version, self._at = obj, version, time.monotonic()

    def written(self, name: str, obj: Obj) -> None:
        """The answer to a write of a Node (:meth:`~pykured.kube.client.Kube.on_node_written`)."""
        if name == self.node:
            self.offer(obj)

    def deleted(self) -> None:
        """The Node was deleted: nothing to serve."""
        with self._mutex:
            self._obj = self._version = None

    def set_live(self, live: bool) -> None:
        """Whether the watch is following the Node; when it is not, the copy is dropped."""
        with self._mutex:
            self._live = live
            if not live:
                self._obj = self._version = None

    @property
    def live(self) -> bool:
        return self._live

    def get(self, *, max_age: float | None = None) -> Obj | None:
        """The copy, if the watch is live and has one (or, with ``max_age``, if it was offered at most that
        many seconds ago, live or not); ``None``: GET the Node."""
        with self._mutex:
            if self._obj is None:
                return None
            recent = max_age is not None and self._at is not None and time.monotonic() - self._at <= max_age
            if not self._live and not recent:
                return None
            self.served += 1
            return self._obj
