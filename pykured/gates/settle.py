"""Settle gates: after a node is back and uncordoned, hold the lock until the cluster settles (kured #277).

kured releases the lock right after the uncordon (plus the fixed ``--lock-release-delay``, which pykured
keeps). With ``--settle-*`` flags the holder also waits, before releasing, until:

* :class:`PodsReadyGate` (``--settle-pod-selector``, repeatable = OR): the pods on this node that match are
  Ready (Succeeded/Failed pods are ignored);
* :class:`NodesReadyGate` (``--settle-nodes-ready``): every Node's ``Ready`` condition is ``True`` (needs
  ``list`` on nodes);
* :class:`PdbGate` (``--settle-pdbs``): the PodDisruptionBudgets that covered the pods drained from this node
  (recorded on the Node before the drain, ``pykured.dev/drained-pdbs``) allow a disruption again;
* :class:`PromQueryGate` (``--settle-prometheus-query``): the query against ``--prometheus-url`` returns an
  empty result.

All are bounded by ``--settle-timeout`` (see :mod:`pykured.gates.phase`); after it the lock is released with a
warning and an Event. Label selectors are matched by the API server (pods) or, for PDBs, with
:func:`selector_matches` (``matchLabels`` and ``matchExpressions``: In, NotIn, Exists, DoesNotExist).
"""

from __future__ import annotations

import datetime
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pykured.alerts.client import PromQueryError, instant_query
from pykured.core.errors import NotFoundError
from pykured.core.model import Reason
from pykured.gocompat.gofmt import go_list

if TYPE_CHECKING:
    from pykured.kube.api import KubeApi

DRAINED_PDBS_ANNOTATION = "pykured.dev/drained-pdbs"
_FINISHED = ("Succeeded", "Failed")


def _shown(names: Sequence[str]) -> str:
    return go_list([*names[:10], *(["..."] if len(names) > 10 else [])])


def condition_true(obj: Mapping[str, Any], kind: str) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def _expression_matches(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, op, values = str(expr.get("key")), expr.get("operator"), expr.get("values") or []
    present = key in labels
    checks = {
        "In": present and labels.get(key) in values,
        "NotIn": not present or labels.get(key) not in values,
        "Exists": present,
        "DoesNotExist": not present,
    }
    return checks.get(str(op), False)


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A ``metav1.LabelSelector``: null matches nothing, ``{}`` matches everything."""
    if selector is None:
        return False
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    return all(_expression_matches(e, labels) for e in selector.get("matchExpressions") or [])


def covering_pdbs(pods: Iterable[Mapping[str, Any]], pdbs: Iterable[Mapping[str, Any]]) -> list[str]:
    """``namespace/name`` of every PDB whose selector matches one of ``pods`` (same namespace), sorted."""
    pods = list(pods)
    found = set()
    for pdb in pdbs:
        meta = pdb.get("metadata") or {}
        for pod in pods:
            pod_meta = pod.get("metadata") or {}
            if pod_meta.get("namespace") == meta.get("namespace") and selector_matches(
                (pdb.get("spec") or {}).get("selector"), pod_meta.get("labels") or {}
            ):
                found.add(f"{meta.get('namespace')}/{meta.get('name')}")
    return sorted(found)


def _pods_on(kube: KubeApi, node: str, label_selector: str | None = None) -> list[Mapping[str, Any]]:
    answer = kube.list_pods(field_selector=f"spec.nodeName={node}", label_selector=label_selector)
    return [p for p in answer.get("items") or [] if (p.get("status") or {}).get("phase") not in _FINISHED]


def _pdb_path(namespace: str, name: str | None = None) -> str:
    base = f"/apis/policy/v1/namespaces/{urllib.parse.quote(namespace, safe='')}/poddisruptionbudgets"
    return f"{base}/{urllib.parse.quote(name, safe='')}" if name else base


def record_drained_pdbs(kube: KubeApi, node: str) -> list[str]:
    """Before the drain: note on the Node which PDBs cover its pods (the :class:`PdbGate` reads it)."""
    pods = _pods_on(kube, node)
    pdbs: list[Mapping[str, Any]] = []
    for namespace in sorted({(p.get("metadata") or {}).get("namespace") or "" for p in pods}):
        pdbs.extend(kube.request("GET", _pdb_path(namespace)).get("items") or [])
    names = covering_pdbs(pods, pdbs)
    patch = {"metadata": {"annotations": {DRAINED_PDBS_ANNOTATION: ",".join(names) or None}}}
    kube.patch_node(node, patch)
    return names


class PodsReadyGate:
    """This node's pods matching a selector are Ready."""

    name = "settle-pods"

    def __init__(self, kube: KubeApi, *, node: str, selectors: Sequence[str]) -> None:
        self._kube, self._node, self._selectors = kube, node, tuple(selectors)

    def check(self, node: Mapping[str, Any], now: datetime.datetime) -> Reason | None:
        unready: list[str] = []
        for selector in self._selectors:
            for pod in _pods_on(self._kube, self._node, selector):
                if not condition_true(pod, "Ready"):
                    meta = pod.get("metadata") or {}
                    unready.append(f"{meta.get('namespace')}/{meta.get('name')}")
        if unready:
            names = sorted(set(unready))
            return Reason(self.name, f"pods not ready: {_shown(names)}")
        return None


class NodesReadyGate:
    """Every Node is Ready."""

    name = "settle-nodes"

    def __init__(self, kube: KubeApi) -> None:
        self._kube = kube

    def check(self, node: Mapping[str, Any], now: datetime.datetime) -> Reason | None:
        items = self._kube.list_nodes().get("items") or []
        unready = sorted(n["metadata"]["name"] for n in items if not condition_true(n, "Ready"))
        return Reason(self.name, f"nodes not ready: {_shown(unready)}") if unready else None


class PdbGate:
    """The PDBs recorded before the drain allow a disruption again."""

    name = "settle-pdbs"

    def __init__(self, kube: KubeApi) -> None:
        self._kube = kube

    def check(self, node: Mapping[str, Any], now: datetime.datetime) -> Reason | None:
        annotations = (node.get("metadata") or {}).get("annotations") or {}
        held: list[str] = []
        for ref in filter(None, (annotations.get(DRAINED_PDBS_ANNOTATION) or "").split(",")):
            namespace, _, name = ref.partition("/")
            try:
                pdb = self._kube.request("GET", _pdb_path(namespace, name))
            except NotFoundError:
                continue  # deleted since: nothing to wait for
            status = pdb.get("status") or {}
            observed = status.get("observedGeneration", 0) >= (pdb.get("metadata") or {}).get("generation", 0)
            if not observed or int(status.get("disruptionsAllowed") or 0) < 1:
                held.append(ref)
        return (
            Reason(self.name, f"PodDisruptionBudgets allow no disruption: {_shown(held)}") if held else None
        )


class PromQueryGate:
    """A Prometheus query returns nothing (e.g. ``ALERTS{severity="critical"}`` or an error-rate rule)."""

    name = "settle-prometheus"

    def __init__(self, url: str, query: str, *, timeout: float = 10) -> None:
        self._url, self._query, self._timeout = url, query, timeout

    def check(self, node: Mapping[str, Any], now: datetime.datetime) -> Reason | None:
        try:
            kind, result = instant_query(self._url, self._query, at=now.timestamp(), timeout=self._timeout)
            count = result_count(kind, result)
        except PromQueryError as exc:
            return Reason(self.name, f"prometheus query error: {exc}")
        if count == 0:
            return None
        return Reason(self.name, f"prometheus query {self._query!r} returned {count} result(s)")


def result_count(kind: str, result: Any) -> int:
    """How many results an instant query's answer holds: a vector's or matrix's samples; a scalar counts
    when it is not ``"0"``, a string when it is not empty. Any other shape raises :class:`PromQueryError`."""
    if kind in ("vector", "matrix") and (result is None or isinstance(result, list)):
        return len(result or [])
    if kind in ("scalar", "string") and isinstance(result, list) and len(result) == 2:
        value = result[1]
        if isinstance(value, str):
            return 0 if value == ("0" if kind == "scalar" else "") else 1
    raise PromQueryError(f"malformed {kind[:32] or 'untyped'} answer")
