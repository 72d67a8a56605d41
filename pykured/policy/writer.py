"""Writing the policy ConfigMap: the freeze set or removed by an operator, the halt added by an agent.

``write_freeze`` sets (or removes) the ``freeze`` key with a JSON merge patch, other keys untouched, and
creates the ConfigMap when it is missing (:mod:`pykured.fleet.freeze`, ``pykured freeze``).
``add_halt`` is the halting agent's write (:mod:`pykured.halting.deadline`, :mod:`pykured.halting.streak`)
and the failed canary's (:mod:`pykured.fleet.canaryrun`): it adds the ``halt`` key where there is none and
changes nothing else, conditionally, so of several writers exactly one sets it. That is all an agent's
token may do to the ConfigMap (the admission policy on it refuses anything else): it can stop the fleet,
never lift an operator's freeze or change the blackouts. ``unfreeze`` is the operator's: it removes the
freeze and the halt and remembers the lifted halt's reboot in ``halts-lifted``
(:func:`pykured.policy.halt.lifting`), so that reboot does not halt the fleet again.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from pykured.core.errors import ConflictError, KubeError, NotFoundError
from pykured.policy.document import (
    FREEZE_KEY,
    HALT_KEY,
    LIFTED_KEY,
    PolicyMapError,
    parse_policy_map,
    read_record,
)
from pykured.policy.freeze import FreezeRecord
from pykured.policy.halt import lifted_json, lifting, parse_lifted
from pykured.policy.source import configmaps_path

if TYPE_CHECKING:
    from pykured.kube.api import KubeApi

MERGE_PATCH = "application/merge-patch+json"
ATTEMPTS = 5


def _new_configmap(namespace: str, name: str, data: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "pykured"},
        },
        "data": data,
    }


def write_freeze(kube: KubeApi, namespace: str, name: str, value: str | None) -> None:
    """Set the ``freeze`` key to ``value`` (``None``: remove it); a missing ConfigMap is created to set it."""
    patch = {"data": {FREEZE_KEY: value}}
    try:
        kube.request("PATCH", configmaps_path(namespace, name), body=patch, content_type=MERGE_PATCH)
    except NotFoundError:
        if value is None:
            return
        kube.request(
            "POST", configmaps_path(namespace), body=_new_configmap(namespace, name, {FREEZE_KEY: value})
        )


def add_halt(
    kube: KubeApi, *, namespace: str, name: str, record: FreezeRecord, now: datetime.datetime
) -> FreezeRecord | None:
    """Add ``record`` as the halt unless a halt or an active freeze is there already (a halt is idempotent).

    Returns None when this call added it, else what is in force. Only the ``halt`` key is added, nothing else
    of the ConfigMap changes; the write is conditional (PUT with the resourceVersion read, or POST of a
    missing ConfigMap), so of several agents halting at once exactly one sets it. A ConfigMap whose other
    keys do not parse gets the halt too (agents honour the freeze and halt of a refused ConfigMap). Raises
    :class:`KubeError`.
    """
    for _ in range(ATTEMPTS):
        try:
            obj = kube.request("GET", configmaps_path(namespace, name))
        except NotFoundError:
            obj = None
        if obj is not None:
            data = obj.get("data") or {}
            try:
                doc = parse_policy_map(data, zone=datetime.UTC)
            except PolicyMapError as exc:
                doc = exc.doc
            current = doc.in_force(now)
            if current is not None:
                return current
            obj = {**obj, "data": {**data, HALT_KEY: record.to_json()}}
        try:
            if obj is None:
                body = _new_configmap(namespace, name, {HALT_KEY: record.to_json()})
                kube.request("POST", configmaps_path(namespace), body=body)
            else:
                kube.request("PUT", configmaps_path(namespace, name), body=obj)
            return None
        except ConflictError:
            continue  # another agent wrote first (or created it): read again
    raise KubeError(f"policy ConfigMap {namespace}/{name} kept changing while setting the halt")


def unfreeze(kube: KubeApi, *, namespace: str, name: str) -> FreezeRecord | None:
    """Remove the freeze and the halt (nothing to do when there is neither, or no ConfigMap).

    A halt that names a node's reboot goes into ``halts-lifted``. Returns the halt lifted (None: there was
    none). One JSON merge patch (``patch`` suffices, as for ``pykured freeze``), conditional on the
    resourceVersion read, retried on a conflict; the other keys (and a ConfigMap that does not parse
    otherwise) stay as they are. Raises :class:`KubeError`.
    """
    for _ in range(ATTEMPTS):
        try:
            obj = kube.request("GET", configmaps_path(namespace, name))
        except NotFoundError:
            return None
        data = obj.get("data") or {}
        if FREEZE_KEY not in data and HALT_KEY not in data:
            return None
        halt = read_record(data.get(HALT_KEY), key=HALT_KEY)
        lifted = data.get(LIFTED_KEY)
        remembered = lifting(parse_lifted(lifted if isinstance(lifted, str) else None), halt)
        changes: dict[str, str | None] = {FREEZE_KEY: None, HALT_KEY: None}
        if remembered is not None:
            changes[LIFTED_KEY] = lifted_json(remembered)
        version = (obj.get("metadata") or {}).get("resourceVersion")
        patch = {"metadata": {"resourceVersion": version}, "data": changes}
        try:
            kube.request("PATCH", configmaps_path(namespace, name), body=patch, content_type=MERGE_PATCH)
        except ConflictError:
            continue
        return halt
    raise KubeError(f"policy ConfigMap {namespace}/{name} kept changing while lifting the freeze")
