"""``pykured freeze`` / ``pykured unfreeze`` / ``pykured freeze --status``: the cluster-wide freeze switch.

``freeze`` asks the API server who the caller is (``SelfSubjectReview``, authentication.k8s.io/v1) and
writes a :class:`~pykured.policy.freeze.FreezeRecord` under the ``freeze`` key of the policy ConfigMap
(created when missing, other keys untouched, JSON merge patch). ``unfreeze`` removes the key. Agents
watching the ConfigMap stop starting new reboots within about a second; a node already holding the lock
finishes.
"""

from __future__ import annotations

import datetime
import json
from typing import IO, TYPE_CHECKING

from pykured.core.errors import ConflictError, KubeError, NotFoundError
from pykured.policy.document import FREEZE_KEY, PolicyDoc, PolicyMapError, parse_policy_map
from pykured.policy.freeze import FreezeRecord
from pykured.policy.pause import PAUSED_ANNOTATION, describe, paused_record, set_pause
from pykured.policy.source import configmaps_path

if TYPE_CHECKING:
    from pykured.kube.client import Kube

MERGE_PATCH = "application/merge-patch+json"


def whoami(kube: Kube) -> str:
    """The caller's user name as the API server sees it (``unknown`` if SelfSubjectReview is unavailable)."""
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    try:
        answer = kube.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", body=body)
    except KubeError:
        return "unknown"
    return str(((answer.get("status") or {}).get("userInfo") or {}).get("username") or "unknown")


def _write(kube: Kube, namespace: str, name: str, value: str | None) -> None:
    patch = {"data": {FREEZE_KEY: value}}
    try:
        kube.request("PATCH", configmaps_path(namespace, name), body=patch, content_type=MERGE_PATCH)
    except NotFoundError:
        if value is None:
            return
        obj = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {"app.kubernetes.io/managed-by": "pykured"},
            },
            "data": {FREEZE_KEY: value},
        }
        kube.request("POST", configmaps_path(namespace), body=obj)


def freeze(
    kube: Kube,
    *,
    namespace: str,
    name: str,
    reason: str,
    until: datetime.datetime | None,
    now: datetime.datetime,
) -> FreezeRecord:
    """Set the freeze; returns the record written."""
    record = FreezeRecord(reason=reason, by=whoami(kube), at=now, until=until)
    _write(kube, namespace, name, record.to_json())
    return record


def set_unless_frozen(
    kube: Kube, *, namespace: str, name: str, record: FreezeRecord, now: datetime.datetime
) -> FreezeRecord | None:
    """Set ``record`` as the freeze unless an active one is there already (a halt is idempotent).

    Returns None when this call set it, else the freeze in force. The write is conditional (PUT with the
    resourceVersion read, or POST of a missing ConfigMap), so of several agents halting at once exactly one
    sets it. Raises :class:`KubeError` (and :class:`PolicyMapError` for a ConfigMap that does not parse).
    """
    for _ in range(5):
        try:
            obj = kube.request("GET", configmaps_path(namespace, name))
        except NotFoundError:
            obj = None
        if obj is not None:
            current = parse_policy_map(obj.get("data") or {}, zone=datetime.UTC).freeze
            if current is not None and current.active(now):
                return current
            obj = {**obj, "data": {**(obj.get("data") or {}), FREEZE_KEY: record.to_json()}}
        try:
            if obj is None:
                _write(kube, namespace, name, record.to_json())
            else:
                kube.request("PUT", configmaps_path(namespace, name), body=obj)
            return None
        except ConflictError:
            continue  # another agent wrote first (or created it): read again
    raise KubeError(f"policy ConfigMap {namespace}/{name} kept changing while setting the freeze")


def unfreeze(kube: Kube, *, namespace: str, name: str) -> None:
    """Remove the freeze (nothing to do when there is none)."""
    _write(kube, namespace, name, None)


def read_freeze(kube: Kube, *, namespace: str, name: str) -> FreezeRecord | None:
    """The freeze record in the ConfigMap (raises :class:`PolicyMapError` when it does not parse)."""
    return read_policy(kube, namespace=namespace, name=name).freeze


def read_policy(kube: Kube, *, namespace: str, name: str) -> PolicyDoc:
    """The whole policy ConfigMap, freeze and blackouts (empty when absent; times without a zone in UTC)."""
    try:
        obj = kube.request("GET", configmaps_path(namespace, name))
    except NotFoundError:
        return PolicyDoc()
    return parse_policy_map(obj.get("data") or {}, zone=datetime.UTC)


def pause_nodes(
    kube: Kube, nodes: list[str], *, reason: str, until: datetime.datetime | None, now: datetime.datetime
) -> FreezeRecord:
    """Pause each node (raises :class:`KubeError`, e.g. NotFound for an unknown node)."""
    record = FreezeRecord(reason=reason, by=whoami(kube), at=now, until=until)
    for node in nodes:
        set_pause(kube, node, record)
    return record


def unpause_nodes(kube: Kube, nodes: list[str]) -> None:
    for node in nodes:
        set_pause(kube, node, None)


def paused_nodes(kube: Kube, now: datetime.datetime) -> list[tuple[str, FreezeRecord]]:
    """The nodes with an active pause, by name."""
    out = []
    for obj in kube.list_nodes().get("items") or []:
        meta = obj.get("metadata") or {}
        annotations = meta.get("annotations") or {}
        record = paused_record(annotations) if PAUSED_ANNOTATION in annotations else None
        if record is not None and record.active(now):
            out.append((str(meta.get("name", "")), record))
    return sorted(out, key=lambda item: item[0])


def print_status(
    kube: Kube, *, namespace: str, name: str, now: datetime.datetime, out: IO[str], as_json: bool = False
) -> int:
    """Print the freeze state; exit code 0 (1 when the ConfigMap does not parse)."""
    try:
        record = read_freeze(kube, namespace=namespace, name=name)
    except PolicyMapError as exc:
        print(f"policy ConfigMap {namespace}/{name} does not parse: {exc}", file=out)
        return 1
    active = record is not None and record.active(now)
    if as_json:
        data = json.loads(record.to_json()) if record else {}
        print(json.dumps({"frozen": active, **data}, sort_keys=True), file=out)
    elif record is None:
        print("not frozen", file=out)
    elif active:
        print(record.describe(), file=out)
    else:
        print(f"not frozen (expired: {record.describe()})", file=out)
    if not as_json:
        try:
            for node, pause in paused_nodes(kube, now):
                print(f"node {node}: {describe(pause)}", file=out)
        except KubeError as exc:
            print(f"paused nodes: cannot read: {exc}", file=out)
    return 0
