"""The soak's judge: watches on Nodes, lock Leases and the DaemonSet; invariants checked at every event.

Nothing here reads an agent's log or asks an agent anything: the API server's history is the evidence. Each
resource is listed, then watched from the listed ``resourceVersion``; when a watch breaks (the API server
restarts) it is listed again and the listing is treated as one more observed revision.

Invariants (a breach is a *violation*, each recorded with the time and the state that broke it):

* **holders ≤ limit** — live holders of the Lease slots, and separately of the DaemonSet annotation, never
  exceed ``--concurrency`` at any observed revision;
* **cordoned ≤ limit** — Nodes that are unschedulable and not cordoned by the administrator never exceed it;
* **admin cordon kept** — a Node the administrator cordoned is never seen schedulable until the
  administrator uncordons it;
* **one reboot per need** — every bootID change of a Node answers exactly one outstanding need (a sentinel
  or a reboot request the soak created); a reboot with none outstanding is a double reboot;
* **no lock taken in a closed window** — no slot is taken while the maintenance window is closed (a few
  seconds of slack at its edges: windows are evaluated per pass with second precision).

The end-of-run checks (no node left cordoned by pykured, no need pending, no lock held) are in
:meth:`Observer.final_check`.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterator

from pykured.core import errors
from pykured.kube.api import KubeApi
from pykured.kube.client import Obj
from pykured.lock.record import decode

logger = logging.getLogger(__name__)

LOCK_ANNOTATION = "weave.works/kured-node-lock"
LOCK_LABEL = "pykured.dev/lock"
STATE_PREFIX = "pykured.dev/"
STATE_KEYS = (
    "pykured.dev/unschedulable-before",
    "pykured.dev/reboot-boot-id",
    "pykured.dev/reboot-triggered-at",
    "pykured.dev/release-after",
    "pykured.dev/reboot-attempts",
)
REQUEST_ANNOTATION = "pykured.dev/reboot-request"
WINDOW_SLACK = 3.0


@dataclasses.dataclass
class NodeState:
    """What the watch last saw of one Node."""

    uid: str
    boot_id: str
    unschedulable: bool
    ready: bool
    annotations: dict[str, str]

    @classmethod
    def from_obj(cls, obj: Obj) -> NodeState:
        meta = obj.get("metadata") or {}
        status = obj.get("status") or {}
        conditions = status.get("conditions") or []
        return cls(
            uid=str(meta.get("uid", "")),
            boot_id=str((status.get("nodeInfo") or {}).get("bootID", "") or ""),
            unschedulable=bool((obj.get("spec") or {}).get("unschedulable")),
            ready=any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions),
            annotations=dict(meta.get("annotations") or {}),
        )

    @property
    def in_cycle(self) -> bool:
        """pykured's memory of a cycle, or a reboot request not yet answered, is on the Node."""
        return any(key in self.annotations for key in (*STATE_KEYS, REQUEST_ANNOTATION))


@dataclasses.dataclass
class Need:
    """A reason to reboot that the soak created (a sentinel or a reboot request)."""

    node: str
    kind: str
    since: float


class Observer:
    """Follows the API server and checks the invariants; see the module docstring."""

    def __init__(
        self, kube: KubeApi, *, limit: int, namespace: str = "kube-system", ds_name: str = "kured"
    ) -> None:
        self._kube = kube
        self.limit = limit
        self.namespace = namespace
        self.ds_name = ds_name
        self.lock = threading.RLock()
        self.nodes: dict[str, NodeState] = {}
        self.lease_holders: dict[str, str] = {}
        self.ds_holders: tuple[str, ...] = ()
        self.admin_cordoned: dict[str, bool] = {}
        """Node → whether the cordon has been seen (a cordon is checked only once it was observed)."""
        self.admin_releasing: set[str] = set()
        """Administrator's cordons being lifted: theirs until the watch shows the node schedulable."""
        self.needs: dict[str, list[Need]] = {}
        self.answered: dict[str, int] = {}
        self.waits: list[float] = []
        self.violations: list[str] = []
        self.closed_windows: list[tuple[float, float]] = []
        self.peak_holders = 0
        self.peak_cordoned = 0
        self.events = 0
        self.relists = 0
        self.reboots_seen = 0
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._synced = {name: threading.Event() for name in ("nodes", "leases", "daemonset")}
        self._threads = [
            threading.Thread(target=self._follow_nodes, name="observe-nodes", daemon=True),
            threading.Thread(target=self._follow_leases, name="observe-leases", daemon=True),
            threading.Thread(target=self._follow_daemonset, name="observe-daemonset", daemon=True),
        ]

    # -- lifecycle -----------------------------------------------------------------------------------------

    def start(self, timeout: float = 30.0) -> Observer:
        """Start the watches and wait for the first listing of each."""
        for thread in self._threads:
            thread.start()
        for event in self._synced.values():
            event.wait(timeout)
        return self

    def stop(self) -> None:
        """Stop following (the watches end within their timeout; the threads are daemons)."""
        self._stop.set()

    def violation(self, text: str) -> None:
        """Record a breach."""
        stamp = time.monotonic() - self.started
        with self.lock:
            self.violations.append(f"[{stamp:7.1f}s] {text}")
        logger.error("VIOLATION %s", text)

    # -- what the soak tells the judge ---------------------------------------------------------------------

    def add_need(self, node: str, kind: str) -> None:
        """The soak created a sentinel or a request for ``node``: exactly one reboot must answer it."""
        with self.lock:
            self.needs.setdefault(node, []).append(Need(node, kind, time.monotonic()))

    def drop_needs(self, node: str) -> None:
        """``node`` was deleted: its needs die with it."""
        with self.lock:
            self.needs.pop(node, None)

    def admin_cordon(self, node: str) -> None:
        """The administrator is about to cordon ``node``."""
        with self.lock:
            self.admin_cordoned[node] = False

    def admin_uncordon(self, node: str) -> None:
        """The administrator is about to uncordon ``node`` (or deleted it).

        The node stays the administrator's until the watch shows it schedulable (or gone): until then it
        is still cordoned by the administrator, not by pykured.
        """
        with self.lock:
            if node in self.admin_cordoned:
                self.admin_releasing.add(node)

    def window_closed(self, start: float, end: float) -> None:
        """The maintenance window is closed from ``start`` to ``end`` (Unix seconds)."""
        with self.lock:
            self.closed_windows.append((start, end))

    # -- views ---------------------------------------------------------------------------------------------

    def pending(self) -> dict[str, list[Need]]:
        """Needs not yet answered by a reboot."""
        with self.lock:
            return {node: list(needs) for node, needs in self.needs.items() if needs}

    def holders(self) -> set[str]:
        """Every current holder, both backends."""
        with self.lock:
            return set(self.lease_holders.values()) | set(self.ds_holders)

    def pykured_cordoned(self) -> list[str]:
        """Unschedulable Nodes that the administrator did not cordon."""
        with self.lock:
            return sorted(
                n for n, s in self.nodes.items() if s.unschedulable and n not in self.admin_cordoned
            )

    def node(self, name: str) -> NodeState | None:
        with self.lock:
            return self.nodes.get(name)

    def at_rest(self, name: str) -> bool:
        """Ready, no pykured memory, not holding a slot, no need outstanding: a new need is unambiguous."""
        with self.lock:
            state = self.nodes.get(name)
            return (
                state is not None
                and state.ready
                and not state.in_cycle
                and "pykured.dev/backoff-until" not in state.annotations
                and name not in self.holders()
                and not self.needs.get(name)
            )

    # -- invariants ----------------------------------------------------------------------------------------

    def _check_limits(self, why: str) -> None:
        lease_count = len(set(self.lease_holders.values()))
        ds_count = len(set(self.ds_holders))
        self.peak_holders = max(self.peak_holders, lease_count, ds_count)
        if lease_count > self.limit:
            self.violation(
                f"{lease_count} Lease holders > {self.limit} ({why}): {sorted(self.lease_holders.values())}"
            )
        if ds_count > self.limit:
            self.violation(
                f"{ds_count} DaemonSet-lock holders > {self.limit} ({why}): {sorted(self.ds_holders)}"
            )
        cordoned = self.pykured_cordoned()
        self.peak_cordoned = max(self.peak_cordoned, len(cordoned))
        if len(cordoned) > self.limit:
            self.violation(f"{len(cordoned)} nodes cordoned by pykured > {self.limit} ({why}): {cordoned}")

    def _node_changed(self, name: str, old: NodeState | None, new: NodeState) -> None:
        if name in self.admin_releasing and (
            not new.unschedulable or (old is not None and old.uid != new.uid)
        ):
            self.admin_releasing.discard(name)
            self.admin_cordoned.pop(name, None)
        if name in self.admin_cordoned:
            if new.unschedulable:
                self.admin_cordoned[name] = True
            elif self.admin_cordoned[name]:
                self.violation(f"administrator's cordon of {name} was undone")
                self.admin_cordoned[name] = False
        if (
            old is None
            or old.uid != new.uid
            or not old.boot_id
            or not new.boot_id
            or old.boot_id == new.boot_id
        ):
            return
        self.reboots_seen += 1
        needs = self.needs.get(name) or []
        if not needs:
            self.violation(
                f"{name} rebooted (bootID {old.boot_id[:8]} → {new.boot_id[:8]}) with no need outstanding"
            )
            return
        need = needs.pop(0)
        self.answered[name] = self.answered.get(name, 0) + 1
        self.waits.append(time.monotonic() - need.since)

    def _lock_taken(self, holder: str) -> None:
        now = time.time()
        for start, end in self.closed_windows:
            if start + WINDOW_SLACK <= now <= end - WINDOW_SLACK:
                self.violation(f"{holder} took a lock slot while the maintenance window was closed")

    # -- watches -------------------------------------------------------------------------------------------

    def _stream(self, path: str, query: dict[str, str], rv: str) -> Iterator[Obj]:
        return self._kube.watch(path, query={**query, "resourceVersion": rv}, timeout_seconds=30)

    def _follow(
        self,
        name: str,
        path: str,
        query: dict[str, str],
        on_list: Callable[[list[Obj]], None],
        on_event: Callable[[str, Obj], None],
    ) -> None:
        rv = ""
        while not self._stop.is_set():
            try:
                if not rv:
                    listing = self._kube.get(path, query=query or None)
                    with self.lock:
                        on_list(listing.get("items") or [])
                        self._check_limits(f"{name} listed")
                    rv = str(listing["metadata"]["resourceVersion"])
                    self._synced[name].set()
                for event in self._stream(path, query, rv):
                    if self._stop.is_set():
                        return
                    kind, obj = event.get("type"), event.get("object") or {}
                    if kind == "ERROR":
                        rv = ""
                        break
                    rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                    if kind == "BOOKMARK":
                        continue
                    with self.lock:
                        self.events += 1
                        on_event(str(kind), obj)
                        self._check_limits(f"{name} {kind} rv {rv}")
            except (errors.KubeError, KeyError, ValueError) as exc:
                logger.debug("%s watch restarts: %s", name, exc)
                rv = ""
                with self.lock:
                    self.relists += 1
                self._stop.wait(0.3)

    # nodes

    def _follow_nodes(self) -> None:
        self._follow("nodes", "/api/v1/nodes", {}, self._nodes_listed, self._node_event)

    def _nodes_listed(self, items: list[Obj]) -> None:
        seen = set()
        for obj in items:
            name = obj["metadata"]["name"]
            seen.add(name)
            self._node_event("MODIFIED", obj)
        for gone in set(self.nodes) - seen:
            del self.nodes[gone]

    def _node_event(self, kind: str, obj: Obj) -> None:
        name = obj["metadata"]["name"]
        if kind == "DELETED":
            self.nodes.pop(name, None)
            if name in self.admin_releasing:
                self.admin_releasing.discard(name)
                self.admin_cordoned.pop(name, None)
            return
        new = NodeState.from_obj(obj)
        old = self.nodes.get(name)
        self.nodes[name] = new
        self._node_changed(name, old, new)

    # leases

    def _follow_leases(self) -> None:
        self._follow(
            "leases",
            f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases",
            {"labelSelector": LOCK_LABEL},
            self._leases_listed,
            self._lease_event,
        )

    def _leases_listed(self, items: list[Obj]) -> None:
        before = dict(self.lease_holders)
        self.lease_holders = {}
        for obj in items:
            self._lease_event("ADDED", obj, before=before)

    def _lease_event(self, kind: str, obj: Obj, *, before: dict[str, str] | None = None) -> None:
        name = obj["metadata"]["name"]
        previous = (before if before is not None else self.lease_holders).get(name)
        holder = ((obj.get("spec") or {}).get("holderIdentity") or "") if kind != "DELETED" else ""
        if holder:
            self.lease_holders[name] = str(holder)
            if holder != previous:
                self._lock_taken(str(holder))
        else:
            self.lease_holders.pop(name, None)

    # the DaemonSet

    def _follow_daemonset(self) -> None:
        self._follow(
            "daemonset",
            f"/apis/apps/v1/namespaces/{self.namespace}/daemonsets",
            {"fieldSelector": f"metadata.name={self.ds_name}"},
            self._ds_listed,
            self._ds_event,
        )

    def _ds_listed(self, items: list[Obj]) -> None:
        if not items:
            self.ds_holders = ()
        for obj in items:
            self._ds_event("MODIFIED", obj)

    def _ds_event(self, kind: str, obj: Obj) -> None:
        raw = ((obj.get("metadata") or {}).get("annotations") or {}).get(LOCK_ANNOTATION)
        holders: tuple[str, ...] = ()
        if kind != "DELETED" and raw:
            try:
                holders = tuple(e.node_id for e in decode(raw).entries if e.node_id)
            except errors.LockError as exc:
                self.violation(f"the DaemonSet lock annotation is unreadable: {exc}")
        for holder in set(holders) - set(self.ds_holders):
            self._lock_taken(holder)
        self.ds_holders = holders

    # -- the end -------------------------------------------------------------------------------------------

    def converged(self) -> bool:
        """No need pending, no lock held, no node cordoned by pykured, no pykured memory on a Node."""
        with self.lock:
            return (
                not self.pending()
                and not self.holders()
                and not self.pykured_cordoned()
                and not any(s.in_cycle for s in self.nodes.values())
            )

    def final_check(self, reboots_by_host: dict[str, int]) -> None:
        """The end-of-run invariants; ``reboots_by_host`` is what the simulated hosts counted."""
        with self.lock:
            for node, needs in self.pending().items():
                kinds = ", ".join(n.kind for n in needs)
                self.violation(f"{node} still needs a reboot at the end ({kinds})")
            cordoned = self.pykured_cordoned()
            if cordoned:
                self.violation(f"nodes left cordoned by pykured: {cordoned}")
            for node, seen in self.admin_cordoned.items():
                state = self.nodes.get(node)
                if (
                    seen
                    and node not in self.admin_releasing
                    and state is not None
                    and not state.unschedulable
                ):
                    self.violation(f"administrator's cordon of {node} is gone at the end")
            if self.holders():
                self.violation(f"lock still held at the end: {sorted(self.holders())}")
            for node, count in sorted(reboots_by_host.items()):
                if count != self.answered.get(node, 0):
                    self.violation(
                        f"{node}: the host rebooted {count} times, the API server shows "
                        f"{self.answered.get(node, 0)} answered needs"
                    )
