"""Which Node a FleetLock ``id`` is: the node-local check, and the central mode's watched index.

Concept: Zincati sends its app-specific machine id (:mod:`pykured.fleetlock.appid`), never a node name.

* :class:`LocalResolver` (node-local mode, the DaemonSet pod on ``127.0.0.1``): the only node is
  ``--node-id``; the id must equal the one computed from the host's ``--machine-id-file``. Anything else is
  ``unknown_node``, so another host can neither lock nor unlock this node.
* :class:`NodeIndex` (central mode, the poseidon/fleetlock replacement): ``app_specific_id`` of every
  Node's ``status.nodeInfo.machineID``, kept current by a LIST + WATCH of Nodes (RBAC: ``list``, ``watch``).

Who may speak for a node (:meth:`Resolver.admits`): a Zincati id is a public function of the Node's machine
id, so the id alone proves nothing. In central mode the caller's address — the TCP peer, never a header —
must be one of the claimed Node's ``status.addresses`` (an IPv4-mapped IPv6 peer counts as its IPv4
address); in node-local mode the server listens on loopback only and the caller is the node itself.

Invariants: an id matching no Node, or several (cloned machine ids), resolves to ``None`` with a reason —
FleetLock then answers 4xx and takes no slot, so an unknown node never wedges a group (poseidon's failure).
A miss triggers one re-list (at most every ``refresh_interval``) so a node that just joined is found.
"""

from __future__ import annotations

import ipaddress
import logging
import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from pykured.core import errors
from pykured.cycle.state import FLEETLOCK_ID_ANNOTATION
from pykured.fleetlock.appid import app_specific_id, normalize_id, read_machine_id

if TYPE_CHECKING:
    from pykured.kube.api import KubeApi
    from pykured.kube.client import Obj

logger = logging.getLogger(__name__)


class Resolver(Protocol):
    """Maps FleetLock ids to Node names."""

    def resolve(self, ident: str) -> tuple[str | None, str]:
        """``(node, "")`` or ``(None, why)``."""
        ...

    def fleetlock_nodes(self) -> list[str]:
        """The nodes whose FleetLock cycles the reconcile loop looks after."""
        ...

    def admits(self, node: str, peer: str) -> bool:
        """Whether a caller at address ``peer`` may act for ``node``."""
        ...

    def start(self) -> None: ...

    def stop(self) -> None: ...


class LocalResolver:
    """Node-local mode: one node, identified by the host's machine id."""

    def __init__(self, *, node: str, machine_id_file: str) -> None:
        if not node:
            raise errors.ConfigError("FleetLock node-local mode needs --node-id")
        try:
            self.expected = app_specific_id(read_machine_id(machine_id_file))
        except (OSError, ValueError) as exc:
            raise errors.ConfigError(
                f"FleetLock node-local mode cannot read a machine id from {machine_id_file}: {exc}"
            ) from exc
        self.node = node

    def resolve(self, ident: str) -> tuple[str | None, str]:
        if normalize_id(ident) == self.expected:
            return self.node, ""
        return None, f"id {ident[:64]!r} is not this node's Zincati id ({self.node} is {self.expected})"

    def fleetlock_nodes(self) -> list[str]:
        return [self.node]

    def admits(self, node: str, peer: str) -> bool:
        """The node's own Zincati reaches the loopback listener from loopback."""
        address = normalize_address(peer)
        return node == self.node and address is not None and address.is_loopback

    def start(self) -> None:
        logger.info("FleetLock serves node %s (Zincati id %s)", self.node, self.expected)

    def stop(self) -> None:
        return None


Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def normalize_address(text: str) -> Address | None:
    """An IP address (an IPv4-mapped IPv6 one as IPv4; a zone dropped), or ``None`` when ``text`` is none."""
    try:
        address = ipaddress.ip_address(text.split("%", 1)[0].strip("[]"))
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


MAX_ADDRESSES = 64
"""The most ``status.addresses`` entries read from one Node (a kubelet reports a handful)."""


def addresses_of(node: Obj) -> frozenset[Address]:
    """The IP addresses among a Node's ``status.addresses`` (Hostname and other names are skipped)."""
    status = node.get("status") or {}
    entries = status.get("addresses") if isinstance(status, dict) else None
    found: set[Address] = set()
    for entry in entries[:MAX_ADDRESSES] if isinstance(entries, list) else ():
        text = entry.get("address") if isinstance(entry, dict) else None
        address = normalize_address(text) if isinstance(text, str) and len(text) <= 64 else None
        if address is not None:
            found.add(address)
    return frozenset(found)


def zincati_id_of(node: Obj) -> str | None:
    """The Zincati id of a Node object, from ``status.nodeInfo.machineID`` (``None`` when unusable)."""
    status = node.get("status") or {}
    info = status.get("nodeInfo") if isinstance(status, dict) else None
    machine = info.get("machineID") if isinstance(info, dict) else None
    if not isinstance(machine, str) or not machine:
        return None
    try:
        return app_specific_id(machine)
    except ValueError:
        return None


class NodeIndex:
    """Central mode: a watched ``Zincati id → Node`` index over every Node."""

    def __init__(self, kube: KubeApi, *, refresh_interval: float = 5.0, watch_timeout: int = 30) -> None:
        self._kube = kube
        self._refresh_interval = refresh_interval
        self._watch_timeout = watch_timeout
        self._ids: dict[str, str | None] = {}
        self._addresses: dict[str, frozenset[Address]] = {}
        self._annotated: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._last_list = 0.0
        self._rv = ""
        self._thread: threading.Thread | None = None

    # -- the index ---------------------------------------------------------------------------------------

    def _rebuild(self, items: Iterable[Obj]) -> None:
        by_name: dict[str, str | None] = {}
        addresses: dict[str, frozenset[Address]] = {}
        annotated = set()
        for node in items:
            meta = node.get("metadata") or {}
            name = str(meta.get("name", ""))
            by_name[name] = zincati_id_of(node)
            addresses[name] = addresses_of(node)
            if FLEETLOCK_ID_ANNOTATION in (meta.get("annotations") or {}):
                annotated.add(name)
        with self._lock:
            self._ids = by_name
            self._addresses = addresses
            self._annotated = annotated

    def _apply(self, kind: str, node: Obj) -> None:
        meta = node.get("metadata") or {}
        name = str(meta.get("name", ""))
        with self._lock:
            if kind == "DELETED":
                self._ids.pop(name, None)
                self._addresses.pop(name, None)
                self._annotated.discard(name)
                return
            self._ids[name] = zincati_id_of(node)
            self._addresses[name] = addresses_of(node)
            if FLEETLOCK_ID_ANNOTATION in (meta.get("annotations") or {}):
                self._annotated.add(name)
            else:
                self._annotated.discard(name)

    def relist(self) -> None:
        """LIST Nodes and rebuild the index; raises ``KubeError``."""
        self._last_list = time.monotonic()
        listed = self._kube.list_nodes()
        self._rebuild(listed.get("items") or [])
        self._rv = str((listed.get("metadata") or {}).get("resourceVersion", ""))

    def resolve(self, ident: str) -> tuple[str | None, str]:
        wanted = normalize_id(ident)
        found = self._lookup(wanted)
        if not found and time.monotonic() - self._last_list >= self._refresh_interval:
            try:
                self.relist()
            except errors.KubeError as exc:
                logger.warning("FleetLock could not list Nodes to find id %s: %s", ident[:64], exc)
            found = self._lookup(wanted)
        if len(found) == 1:
            return found[0], ""
        if not found:
            return None, f"no Node has the Zincati id {ident[:64]!r} (status.nodeInfo.machineID)"
        return None, f"Zincati id {ident[:64]!r} matches several Nodes: {', '.join(sorted(found))}"

    def _lookup(self, wanted: str) -> list[str]:
        with self._lock:
            return [name for name, zid in self._ids.items() if zid == wanted]

    def fleetlock_nodes(self) -> list[str]:
        with self._lock:
            return sorted(self._annotated)

    def admits(self, node: str, peer: str) -> bool:
        """``peer`` is one of ``node``'s ``status.addresses`` (after one re-list, at most every
        ``refresh_interval``, when the index does not say so: the addresses may just have changed)."""
        address = normalize_address(peer)
        if address is None:
            return False
        if self._has_address(node, address):
            return True
        if time.monotonic() - self._last_list >= self._refresh_interval:
            try:
                self.relist()
            except errors.KubeError as exc:
                logger.warning("FleetLock could not list Nodes to check node %s's addresses: %s", node, exc)
        return self._has_address(node, address)

    def _has_address(self, node: str, address: Address) -> bool:
        with self._lock:
            return address in self._addresses.get(node, frozenset())

    # -- the watch ---------------------------------------------------------------------------------------

    def start(self) -> None:
        try:
            self.relist()
        except errors.KubeError as exc:
            logger.warning("FleetLock could not list Nodes yet, will retry: %s", exc)
        self._thread = threading.Thread(target=self._run, name="fleetlock-node-index", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if not self._rv:
                    self.relist()
                self._watch_once()
            except errors.KubeError as exc:
                logger.debug("FleetLock node watch failed, re-listing: %s", exc)
                self._rv = ""
                self._stop.wait(1.0)

    def _watch_once(self) -> None:
        for event in self._kube.watch_nodes(resource_version=self._rv, timeout_seconds=self._watch_timeout):
            if self._stop.is_set():
                return
            kind = str(event.get("type", ""))
            obj = event.get("object") or {}
            if kind == "ERROR":  # 410 Gone: the resourceVersion is too old
                self._rv = ""
                return
            rv = (obj.get("metadata") or {}).get("resourceVersion")
            if rv:
                self._rv = str(rv)
            if kind in ("ADDED", "MODIFIED", "DELETED"):
                self._apply(kind, obj)
