"""The API server's own history of Nodes and DaemonSets, and what a reboot roll looked like in it.

:class:`History` lists, then watches ``/api/v1/nodes`` and ``/apis/apps/v1/daemonsets`` from the listed
resourceVersion, and keeps every change in the order etcd committed it (resourceVersions of one etcd are
its revisions). Nothing here reads an agent's log: :func:`replay` rebuilds the state after each change and
:class:`Roll` reports what the agents did to the cluster — lock holders and cordoned nodes at every
revision, each node's bootIDs, who got the PreferNoSchedule taint while whom held the lock, and the lock's
values as written.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator
from typing import Any

from pykured.core import errors
from pykured.kube.client import Kube, Obj

logger = logging.getLogger(__name__)

NODES = "/api/v1/nodes"
DAEMONSETS = "/apis/apps/v1/daemonsets"


@dataclasses.dataclass(frozen=True)
class Change:
    """One committed change of a watched object."""

    revision: int
    kind: str
    """``Node`` or ``DaemonSet``."""
    key: str
    """``name`` for Nodes, ``namespace/name`` for DaemonSets."""
    type: str
    """``ADDED``, ``MODIFIED`` or ``DELETED``."""
    obj: Obj
    seen: float
    """``time.monotonic()`` when the watch delivered it."""


def _key(kind: str, obj: Obj) -> str:
    meta = obj.get("metadata", {})
    return meta["name"] if kind == "Node" else f"{meta.get('namespace', '')}/{meta['name']}"


class History:
    """Every change of Nodes and DaemonSets since :meth:`start` (see the module docstring)."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self._changes: list[Change] = []
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.gaps = 0
        """Watches that had to re-list (history between the two may be incomplete)."""

    def start(self) -> History:
        """List, then watch both collections (the listing is recorded as ``ADDED`` changes)."""
        for kind, path in (("Node", NODES), ("DaemonSet", DAEMONSETS)):
            version = self._list(kind, path)
            thread = threading.Thread(
                target=self._watch, args=(kind, path, version), name=f"history-{kind}", daemon=True
            )
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        """Stop watching (threads end with their current watch)."""
        self._stop.set()

    def __enter__(self) -> History:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _record(self, kind: str, type_: str, obj: Obj) -> None:
        revision = int(obj.get("metadata", {}).get("resourceVersion") or 0)
        change = Change(revision, kind, _key(kind, obj), type_, obj, time.monotonic())
        with self._cond:
            self._changes.append(change)
            self._cond.notify_all()

    def _list(self, kind: str, path: str) -> str:
        listing = self.kube.request("GET", path)
        for item in listing.get("items", []):
            self._record(kind, "ADDED", item)
        return str(listing["metadata"]["resourceVersion"])

    def _watch(self, kind: str, path: str, version: str) -> None:
        while not self._stop.is_set():
            try:
                for event in self.kube.watch(path, query={"resourceVersion": version}, timeout_seconds=120):
                    obj = event.get("object", {})
                    if event.get("type") == "ERROR":
                        raise errors.KubeError(f"watch {path}: {obj.get('message')}")
                    version = obj.get("metadata", {}).get("resourceVersion", version)
                    if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                        self._record(kind, event["type"], obj)
                    if self._stop.is_set():
                        return
            except errors.KubeError as exc:
                if self._stop.is_set():
                    return
                logger.warning("history watch of %s restarts with a new listing: %s", path, exc)
                self.gaps += 1
                time.sleep(0.2)
                with contextlib.suppress(errors.KubeError):
                    version = self._list(kind, path)

    def changes(self) -> list[Change]:
        """Every change so far, in commit order."""
        with self._cond:
            return sorted(self._changes, key=lambda c: c.revision)

    def wait(self, predicate: Callable[[list[Change]], bool], *, timeout: float) -> bool:
        """Wait until ``predicate(changes())`` holds (re-checked at each change and every second)."""
        deadline = time.monotonic() + timeout
        while True:
            if predicate(self.changes()):
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            with self._cond:
                self._cond.wait(min(remaining, 1.0))


# -- reading a roll out of the history ---------------------------------------------------------------------


def lock_holders(value: str | None) -> list[str]:
    """The nodes a kured lock annotation names (single ``{"nodeID"}`` or multi ``{"locks": [...]}``).

    TTLs are not applied: the tests use none, so an entry holds until its node removes it.
    """
    if not value:
        return []
    decoded = json.loads(value)
    if "locks" in decoded or "maxOwners" in decoded:
        return [str(entry["nodeID"]) for entry in decoded.get("locks") or []]
    return [str(decoded["nodeID"])] if decoded.get("nodeID") else []


def shape(value: Any) -> Any:
    """A JSON value with every leaf replaced by its type name, keys kept in order (to compare writers)."""
    if isinstance(value, dict):
        return [(k, shape(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [shape(v) for v in value]
    return type(value).__name__


@dataclasses.dataclass
class State:
    """The cluster as of one revision: Nodes by name, DaemonSets by ``namespace/name``."""

    revision: int = 0
    nodes: dict[str, Obj] = dataclasses.field(default_factory=dict)
    daemonsets: dict[str, Obj] = dataclasses.field(default_factory=dict)


def replay(changes: Iterable[Change]) -> Iterator[tuple[Change, State]]:
    """Each change with the state right after it (the same :class:`State` object, updated in place)."""
    state = State()
    for change in changes:
        table = state.nodes if change.kind == "Node" else state.daemonsets
        if change.type == "DELETED":
            table.pop(change.key, None)
        else:
            table[change.key] = change.obj
        state.revision = change.revision
        yield change, state


def _annotations(obj: Obj | None) -> dict[str, str]:
    return dict(((obj or {}).get("metadata") or {}).get("annotations") or {})


def _taints(node: Obj | None) -> set[str]:
    return {
        t["key"]
        for t in ((node or {}).get("spec") or {}).get("taints") or []
        if t.get("effect") == "PreferNoSchedule"
    }


@dataclasses.dataclass(frozen=True)
class Blocked:
    """``node`` got its PreferNoSchedule taint (kured and pykured taint when the lock is full) while
    ``holders`` held the lock."""

    revision: int
    node: str
    holders: tuple[str, ...]


@dataclasses.dataclass
class Roll:
    """What one DaemonSet lock and its nodes went through (see :meth:`of`)."""

    nodes: tuple[str, ...]
    max_holders: int = 0
    max_cordoned: int = 0
    boot_ids: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    acquired: list[tuple[int, str, tuple[str, ...]]] = dataclasses.field(default_factory=list)
    """(revision, node, holders after it) each time a node entered the lock."""
    released: list[tuple[int, str, float]] = dataclasses.field(default_factory=list)
    """(revision, node, :attr:`Change.seen`) each time a node left the lock."""
    blocked: list[Blocked] = dataclasses.field(default_factory=list)
    lock_values: list[str] = dataclasses.field(default_factory=list)
    """Every distinct non-empty value the lock annotation had, in order."""
    holders: tuple[str, ...] = ()
    cordoned: tuple[str, ...] = ()
    """At the end of the history."""

    @classmethod
    def of(
        cls,
        changes: Iterable[Change],
        *,
        daemonset: str,
        annotation: str,
        nodes: Iterable[str],
        taint: str = "",
    ) -> Roll:
        """Replay ``changes`` for the lock on DaemonSet ``namespace/name`` and ``nodes``."""
        names = tuple(nodes)
        roll = cls(nodes=names, boot_ids={n: [] for n in names})
        holders: tuple[str, ...] = ()
        tainted: dict[str, bool] = {}
        for change, state in replay(changes):
            if change.kind == "DaemonSet" and change.key == daemonset:
                value = _annotations(state.daemonsets.get(daemonset)).get(annotation)
                if value and (not roll.lock_values or roll.lock_values[-1] != value):
                    roll.lock_values.append(value)
                now = tuple(lock_holders(value))
                for node in now:
                    if node not in holders:
                        roll.acquired.append((change.revision, node, now))
                for node in holders:
                    if node not in now:
                        roll.released.append((change.revision, node, change.seen))
                holders = now
                roll.max_holders = max(roll.max_holders, len(holders))
            elif change.kind == "Node" and change.key in roll.boot_ids:
                boot = ((change.obj.get("status") or {}).get("nodeInfo") or {}).get("bootID", "")
                seen = roll.boot_ids[change.key]
                if boot and (not seen or seen[-1] != boot):
                    seen.append(boot)
                if taint:
                    has = taint in _taints(change.obj)
                    if has and not tainted.get(change.key):
                        roll.blocked.append(Blocked(change.revision, change.key, holders))
                    tainted[change.key] = has
            cordoned = [
                n for n in names if ((state.nodes.get(n) or {}).get("spec") or {}).get("unschedulable")
            ]
            roll.max_cordoned = max(roll.max_cordoned, len(cordoned))
            roll.cordoned = tuple(cordoned)
        roll.holders = holders
        return roll

    def reboots(self) -> dict[str, int]:
        """How many times each node's bootID changed."""
        return {n: max(len(ids) - 1, 0) for n, ids in self.boot_ids.items()}

    def blocked_by(self, node: str, others: Collection[str]) -> list[Blocked]:
        """The times ``node`` was blocked while the lock's holders were all among ``others``."""
        return [b for b in self.blocked if b.node == node and b.holders and set(b.holders) <= set(others)]
