"""Operator commands: ``pykured lock status`` and ``pykured lock release NODE``.

kured offers only ``kubectl annotate`` for this (its documentation's manual lock/unlock). These commands read
and free both backends, so a stuck lock — a deleted holder, the ``manual`` lock, an unreadable value, a Lease
left by a node that never came back — is visible and fixable without editing JSON by hand.

* ``status`` prints every holder: backend, node, since, TTL, whether the TTL expired, whether the Node still
  exists. An unreadable annotation is printed raw and counts as held. Exit 0 if every backend could be
  read, 1 otherwise (a backend the caller may not read, e.g. Leases under kured's RBAC, is only noted).
* ``release`` frees the node's slots on the chosen backend (both by default): its annotation entries, or
  its Leases. An unreadable annotation is deleted (its old text is printed first). Exit 0 if something was
  released, 1 if the node held nothing, 2 on errors.

``open_backends`` opens both backends for an operator through the lock registry (no node of their own:
they never acquire); ``pykured status`` and ``pykured plan`` read the holders through it too
(:func:`pykured.fleet.requester.lock_holders`). ``pykured.cli.lock`` dispatches ``pykured lock`` here.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, TextIO

from pykured.core.errors import KubeError, LockError, NotFoundError
from pykured.gocompat.goflags import format_duration
from pykured.lock.annotation import AnnotationLock
from pykured.lock.base import forbidden
from pykured.lock.lease import LeaseLock
from pykured.lock.record import LockEntry, decode, format_go_time, ttl_expired
from pykured.lock.registry import DAEMONSET, LEASE, LockPlace, open_read_only

if TYPE_CHECKING:
    from pykured.kube.api import KubeApi

logger = logging.getLogger(__name__)

BACKENDS = ("annotation", "lease")
ALIASES: dict[str, str | None] = {"daemonset": "annotation", "both": None, "": None}


def open_backends(
    kube: KubeApi,
    *,
    namespace: str,
    ds_name: str,
    annotation: str,
    lease_prefix: str,
    lease_namespace: str | None = None,
) -> tuple[AnnotationLock, LeaseLock]:
    """Both lock backends as an operator opens them (:func:`pykured.lock.registry.open_read_only`): with no
    node of their own, so they never acquire; they read the holders, and release the slots of a node named
    to them. The Leases live in ``lease_namespace`` (default: ``namespace``)."""
    place = LockPlace(
        namespace=namespace,
        ds_name=ds_name,
        annotation=annotation,
        lease_prefix=lease_prefix,
        lease_namespace=lease_namespace,
    )
    views = open_read_only(kube, place)
    ann, lease = views[DAEMONSET.name], views[LEASE.name]
    if not isinstance(ann, AnnotationLock) or not isinstance(lease, LeaseLock):
        raise TypeError(f"the registered lock backends are not kured's annotation and the Lease: {views}")
    return ann, lease


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
) -> int:
    """Print the holders of both backends; see the module docstring for the exit codes."""
    now = time.time_ns() if now_ns is None else now_ns
    ann, lease = open_backends(
        kube,
        namespace=namespace,
        ds_name=ds_name,
        annotation=annotation,
        lease_prefix=lease_prefix,
        lease_namespace=lease_namespace,
    )
    rows: list[list[str]] = []
    code = 0
    try:
        raw = ann.raw_value()
        if raw is not None:
            try:
                rows += [_row(kube, "annotation", e, now) for e in decode(raw).entries]
            except LockError as exc:
                out.write(f"annotation {annotation} on {ann.where} is UNREADABLE and counts as held: {exc}\n")
                out.write(f"  value: {raw}\n  fix: pykured lock release <node> --backend annotation\n")
    except LockError as exc:
        out.write(f"annotation lock on {ann.where}: cannot read: {exc}\n")
        code = 1
    try:
        rows += [_row(kube, "lease", e, now) for e in sorted(lease.entries(), key=lambda e: e.node_id)]
    except LockError as exc:
        out.write(f"lease lock {lease.where}: cannot read: {exc}\n")
        code = code if forbidden(exc) else 1
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
) -> int:
    """Free ``node``'s slots on ``backend``: ``annotation`` (alias ``daemonset``), ``lease``, or both when
    ``None`` (alias ``both``)."""
    backend = ALIASES.get(backend or "", backend)
    if backend is not None and backend not in BACKENDS:
        out.write(f"unknown lock backend {backend!r} (choose from {', '.join(BACKENDS)})\n")
        return 2
    ann, lease = open_backends(
        kube,
        namespace=namespace,
        ds_name=ds_name,
        annotation=annotation,
        lease_prefix=lease_prefix,
        lease_namespace=lease_namespace,
    )
    released, failed = False, False
    if backend in (None, "annotation"):
        try:
            if ann.release(node_id=node):
                out.write(f"Released the annotation lock of {node} on {ann.where}\n")
                released = True
        except LockError as exc:
            if isinstance(exc.__cause__, KubeError):
                out.write(f"annotation lock on {ann.where}: {exc}\n")
                failed = True
            else:
                out.write(f"The annotation lock on {ann.where} is unreadable ({exc}); deleting it.\n")
                out.write(f"  old value: {ann.raw_value()}\n")
                released = ann.clear() or released
    if backend in (None, "lease"):
        try:
            if lease.release(node_id=node):
                out.write(f"Released the lease lock of {node} in {lease.where}\n")
                released = True
        except LockError as exc:
            if backend == "lease" or not forbidden(exc):
                out.write(f"lease lock {lease.where}: {exc}\n")
                failed = True
    if failed:
        return 2
    if not released:
        out.write(f"{node} holds no lock slot.\n")
        return 1
    logger.info("Lock released by an operator for %s", node)
    return 0
