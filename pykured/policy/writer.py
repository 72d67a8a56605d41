"""Writing the freeze into the policy ConfigMap: set or removed by an operator, set conditionally by an agent.

``write_freeze`` sets (or removes) the ``freeze`` key with a JSON merge patch, other keys untouched, and
creates the ConfigMap when it is missing (:mod:`pykured.fleet.freeze`, ``pykured freeze``/``unfreeze``).
``set_unless_frozen`` is the halting agent's write (:mod:`pykured.halting.deadline`,
:mod:`pykured.halting.streak`) and the failed canary's (:mod:`pykured.fleet.canaryrun`): conditional, so of
several writers exactly one sets it.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING

from pykured.core.errors import ConflictError, KubeError, NotFoundError
from pykured.policy.document import FREEZE_KEY, parse_policy_map
from pykured.policy.freeze import FreezeRecord
from pykured.policy.source import configmaps_path

if TYPE_CHECKING:
    from pykured.kube.api import KubeApi

MERGE_PATCH = "application/merge-patch+json"


def write_freeze(kube: KubeApi, namespace: str, name: str, value: str | None) -> None:
    """Set the ``freeze`` key to ``value`` (``None``: remove it); a missing ConfigMap is created to set it."""
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


def set_unless_frozen(
    kube: KubeApi, *, namespace: str, name: str, record: FreezeRecord, now: datetime.datetime
) -> FreezeRecord | None:
    """Set ``record`` as the freeze unless an active one is there already (a halt is idempotent).

    Returns None when this call set it, else the freeze in force. The write is conditional (PUT with the
    resourceVersion read, or POST of a missing ConfigMap), so of several agents halting at once exactly one
    sets it. Raises :class:`KubeError` (and :class:`~pykured.policy.document.PolicyMapError` for a ConfigMap
    that does not parse).
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
                write_freeze(kube, namespace, name, record.to_json())
            else:
                kube.request("PUT", configmaps_path(namespace, name), body=obj)
            return None
        except ConflictError:
            continue  # another agent wrote first (or created it): read again
    raise KubeError(f"policy ConfigMap {namespace}/{name} kept changing while setting the freeze")
