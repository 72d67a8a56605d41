"""Operator commands: ``pykured lock status`` and ``pykured lock release NODE``.

kured offers only ``kubectl annotate`` for this (its documentation's manual lock/unlock). These commands read
and free every registered backend, so a stuck lock — a deleted holder, the ``manual`` lock, an unreadable
value, a Lease left by a node that never came back — is visible and fixable without editing JSON by hand.

* ``status`` prints every holder: backend, node, since, TTL, whether the TTL expired, whether the Node still
  exists. An unreadable value is printed raw and counts as held. Exit 0 if every backend could be read, 1
  otherwise (a backend the caller may not read, e.g. Leases under kured's RBAC, is only noted).
* ``release`` frees the node's slots on the chosen backend (every one by default): its annotation entries,
  or its Leases. An unreadable annotation is deleted (its old text is printed first). Exit 0 if something was
  released, 1 if the node held nothing, 2 on errors.

Both loop over the backends' operator views (:func:`pykured.lock.registry.open_views`), never asking which
backend a view is: what differs between backends is said by the view (:mod:`pykured.lock.operator`).
``pykured status`` and ``pykured plan`` read the holders through the same views
(:func:`pykured.fleet.requester.lock_holders`). ``pykured.cli.lock`` dispatches ``pykured lock`` here.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, TextIO

from pykured.core.errors import KubeError, NotFoundError
from pykured.gocompat.goflags import format_duration
from pykured.lock.base import forbidden
from pykured.lock.operator import Released
from pykured.lock.record import LockEntry, format_go_time, ttl_expired
from pykured.lock.registry import BACKENDS, LockPlace, LockRegistry, open_views

if TYPE_CHECKING:
    from pykured.kube.api import KubeApi

logger = logging.getLogger(__name__)

EVERY = ("", "both")
"""The ``backend`` values of :func:`lock_release` that mean every backend (as ``None`` does)."""


def _node_exists(kube: KubeApi, name: str) -> str:
    try:
        kube.get_node(name)
    except NotFoundError:
        return "no"
    except KubeError:
        return "unknown"
    return "yes"


def _row(kube: KubeApi, backend: str, entry: LockEntry, now_ns: int) -> list[str]:
    since = entry.created_raw or format_go_time(entry.created_ns)
    ttl = format_duration(entry.ttl_ns) if entry.ttl_ns else "never"
    expired = "yes" if ttl_expired(entry, now_ns) else "no"
    return [backend, entry.node_id, since, ttl, expired, _node_exists(kube, entry.node_id)]


def _table(rows: list[list[str]], out: TextIO) -> None:
    header = ["BACKEND", "NODE", "SINCE", "TTL", "EXPIRED", "NODE-EXISTS"]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        out.write("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() + "\n")


def lock_status(
    kube: KubeApi,
    *,
    namespace: str,
    ds_name: str,
    annotation: str,
    lease_prefix: str,
    out: TextIO,
    lease_namespace: str | None = None,
    now_ns: int | None = None,
    registry: LockRegistry | None = None,
) -> int:
    """Print the holders of every backend of ``registry`` (the registered ones by default); see the module
    docstring for the exit codes."""
    now = time.time_ns() if now_ns is None else now_ns
    place = LockPlace(
        namespace=namespace,
        ds_name=ds_name,
        annotation=annotation,
        lease_prefix=lease_prefix,
        lease_namespace=lease_namespace,
    )
    rows: list[list[str]] = []
    code = 0
    for view in open_views(kube, place, registry=registry):
        reading = view.read()
        if reading.error is not None:
            out.write(f"{view.subject}: cannot read: {reading.error}\n")
            code = code if view.optional and forbidden(reading.error) else 1
        if reading.unreadable is not None:
            out.write(reading.unreadable.note)
        rows += [_row(kube, view.backend, e, now) for e in reading.holders]
    if rows:
        _table(rows, out)
    else:
        out.write("No lock holders.\n")
    return code


def lock_release(
    kube: KubeApi,
    node: str,
    *,
    namespace: str,
    ds_name: str,
    annotation: str,
    lease_prefix: str,
    out: TextIO,
    backend: str | None = None,
    lease_namespace: str | None = None,
    registry: LockRegistry | None = None,
) -> int:
    """Free ``node``'s slots on ``backend`` — a backend's ``--lock-backend`` name or the word it is printed
    as (``daemonset`` or ``annotation``, ``lease``) — or on every backend when ``None`` (or ``both``)."""
    registry = BACKENDS if registry is None else registry
    chosen = None
    if backend is not None and backend not in EVERY:
        chosen = registry.find(backend)
        if chosen is None:
            out.write(f"unknown lock backend {backend!r} (choose from {', '.join(registry.labels)})\n")
            return 2
    place = LockPlace(
        namespace=namespace,
        ds_name=ds_name,
        annotation=annotation,
        lease_prefix=lease_prefix,
        lease_namespace=lease_namespace,
    )
    targets = [chosen] if chosen is not None else list(registry)
    outcomes = [b.open_view(kube, place).release(node, out=out, named=chosen is not None) for b in targets]
    if Released.FAILED in outcomes:
        return 2
    if Released.FREED not in outcomes:
        out.write(f"{node} holds no lock slot.\n")
        return 1
    logger.info("Lock released by an operator for %s", node)
    return 0
