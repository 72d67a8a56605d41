"""Operator side of reboot requests: ``request-reboot``, ``rollout`` and ``status`` against the API server.

Concept: the thin adapter between the pure modules (:mod:`pykured.requests.record`,
:mod:`pykured.fleet.rollout`, :mod:`pykured.fleet.view`) and the API server. It runs from an operator's
machine (kubeconfig) or inside an agent's pod (in-cluster, kured's RBAC: ``get``/``patch`` on its own Node).
The lock holders are read through each backend's operator view (:func:`pykured.lock.registry.open_views`).

Invariants:
* Validate, then write: every node is read (it exists, it reports a bootID) and the caller's right to
  ``patch`` it is checked (SelfSubjectAccessReview) before the first write, so a refusal changes nothing.
* A request is written with a JSON Patch that ``test``s ``/status/nodeInfo/bootID``: it is bound to the boot
  that was read, even if the node rebooted in between (then it is read again and bound to the new boot).
* Writing the same request again (same boot, reason and rollout) makes no API call: idempotent.
* A request is replaced (or withdrawn) only as it was read (a JSON Patch ``test`` of its text), and one the
  node has rebooted out of since (classified as the agent classifies it) leaves its satisfied record, written
  in the same patch: the agent never sees that request again, so the requester is the only one who can.
* Every failure is a :class:`RequestError` with one operator-facing line.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
from collections.abc import Sequence

from pykured.core import errors
from pykured.cycle.state import NodeState
from pykured.fleet import rollout
from pykured.fleet import view as fleetview
from pykured.kube.api import KubeApi
from pykured.kube.client import JSON_PATCH, MERGE_PATCH, Obj
from pykured.lock.base import forbidden
from pykured.lock.budget import Budget
from pykured.lock.counts import daemonset_count
from pykured.lock.registry import LockPlace, LockRegistry, open_views
from pykured.requests import keeper
from pykured.requests import record as rebootrequest
from pykured.status.agent import reported_boot_ids

logger = logging.getLogger(__name__)

_UNPROCESSABLE = 422
SELF_SUBJECT_REVIEWS = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
SELF_SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


class RequestError(errors.PykuredError):
    """A request could not be made; the message is the one line the operator sees."""


# -- who and what --------------------------------------------------------------------------------------------


def whoami(kube: KubeApi) -> str:
    """The caller's user name (a SelfSubjectReview, ``authentication.k8s.io/v1``); ``unknown`` if refused."""
    body: Obj = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    try:
        answer = kube.create(SELF_SUBJECT_REVIEWS, body)
    except errors.KubeError as exc:
        logger.debug("SelfSubjectReview failed: %s", exc)
        return "unknown"
    user = answer.get("status", {}).get("userInfo", {}).get("username")
    return str(user) if user else "unknown"


def may_patch(kube: KubeApi, node: str) -> bool | None:
    """Whether the caller may ``patch`` this Node (SelfSubjectAccessReview); ``None`` if the review failed."""
    body: Obj = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": "patch", "resource": "nodes", "name": node}},
    }
    try:
        answer = kube.create(SELF_SUBJECT_ACCESS_REVIEWS, body)
    except errors.KubeError as exc:
        logger.debug("SelfSubjectAccessReview failed: %s", exc)
        return None
    return answer.get("status", {}).get("allowed") is True


def nodes(
    kube: KubeApi, *, names: Sequence[str] = (), selector: str = "", all_nodes: bool = False
) -> list[NodeState]:
    """The Nodes named, or matching ``selector``, or all; a missing one or a refused read is an error."""
    if names:
        out = []
        for name in dict.fromkeys(names):
            try:
                out.append(NodeState.from_obj(kube.get_node(name)))
            except errors.NotFoundError:
                raise RequestError(f'node "{name}" not found') from None
            except errors.ForbiddenError as exc:
                raise RequestError(f"forbidden: {_message(exc)}") from None
            except errors.KubeError as exc:
                raise RequestError(f'cannot read node "{name}": {exc}') from None
        return out
    if not selector and not all_nodes:
        raise RequestError("name the nodes, or give --selector or --all")
    try:
        items = kube.list_nodes(label_selector=selector or None).get("items", [])
    except errors.ForbiddenError as exc:
        raise RequestError(f"forbidden: {_message(exc)}") from None
    except errors.KubeError as exc:
        raise RequestError(f"cannot list nodes: {exc}") from None
    found = [NodeState.from_obj(item) for item in items]
    if not found:
        raise RequestError(
            f"no node matches the selector {selector!r}" if selector else "the cluster has no nodes"
        )
    return sorted(found, key=lambda v: v.name)


def _message(exc: errors.KubeError) -> str:
    text = str(exc)
    return text.removesuffix(f" (HTTP {exc.status})") if exc.status else text


def _check_patch(kube: KubeApi, views: Sequence[NodeState]) -> None:
    denied = [v.name for v in views if may_patch(kube, v.name) is False]
    if denied:
        who = whoami(kube)
        shown = ", ".join(denied[:5]) + (f" and {len(denied) - 5} more" if len(denied) > 5 else "")
        raise RequestError(
            f'forbidden: user "{who}" may not patch nodes ({shown}); nothing was changed '
            "(bind the pykured-reboot-requester ClusterRole)"
        )


# -- request and cancel --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    node: str
    action: str
    """``requested``, ``unchanged``, ``cancelled`` or ``none``."""
    boot_id: str = ""
    satisfied: rebootrequest.RebootRequest | None = None
    """The request replaced or withdrawn, when a reboot had satisfied it (its record was written)."""


def describe(o: Outcome, reason: str) -> str:
    """One line for what was done to ``o``'s node (``reason``: the request's, as given)."""
    if o.action == "requested":
        return f"{o.node}: reboot requested for bootID {o.boot_id}: {rebootrequest.clean_reason(reason)}"
    if o.action == "unchanged":
        return f"{o.node}: already requested for bootID {o.boot_id} (unchanged)"
    if o.action == "cancelled":
        return f"{o.node}: request withdrawn"
    return f"{o.node}: no request"


def _existing(view: NodeState) -> rebootrequest.RebootRequest | None:
    raw = view.annotations.get(rebootrequest.REQUEST_ANNOTATION)
    if raw is None:
        return None
    try:
        return rebootrequest.parse_request(raw)
    except ValueError:
        return None


def _settled(view: NodeState, now: datetime.datetime) -> tuple[str | None, str | None]:
    """The request on the Node as read (its text), and its satisfied record if a reboot satisfied it: the
    agent's own classification (the boots its memory and its published status say the node has left)."""
    found = keeper.classify(view, now, reported_boot_ids(view.annotations))
    if found.state is rebootrequest.RequestState.SATISFIED and found.request is not None:
        return found.raw, rebootrequest.satisfied_record(found.request, new_boot_id=view.boot_id, now=now)
    return found.raw, None


def _write(kube: KubeApi, view: NodeState, req: rebootrequest.RebootRequest, now: datetime.datetime) -> bool:
    """Write ``req`` in place of the request read; ``True`` if that one was satisfied (its record written)."""
    raw, record = _settled(view, now)
    patch = rebootrequest.bind_patch(
        req, has_annotations=bool(view.annotations), replacing=raw, satisfied=record
    )
    try:
        kube.patch_node(view.name, patch, patch_type=JSON_PATCH)
    except errors.ForbiddenError as exc:
        raise RequestError(f"forbidden: {_message(exc)}") from None
    except errors.NotFoundError:
        raise RequestError(f'node "{view.name}" not found') from None
    return record is not None


def request_reboot(
    kube: KubeApi,
    views: Sequence[NodeState],
    *,
    reason: str,
    requested_by: str,
    now: datetime.datetime,
    rollout_id: str = "",
) -> list[Outcome]:
    """Put a request for its current boot on every node of ``views`` (read just before)."""
    missing = [v.name for v in views if not v.boot_id]
    if missing:
        raise RequestError(
            f"node(s) {', '.join(missing)} report no status.nodeInfo.bootID; nothing was changed"
        )
    _check_patch(kube, views)
    out = []
    for view in views:
        current = view
        for _attempt in range(3):
            req = rebootrequest.make_request(
                boot_id=current.boot_id, reason=reason, requested_by=requested_by, now=now, rollout=rollout_id
            )
            old = _existing(current)
            if old is not None and old.same_intent(req):
                out.append(Outcome(view.name, "unchanged", current.boot_id))
                break
            try:
                satisfied = _write(kube, current, req, now)
            except errors.KubeError as exc:
                if exc.status != _UNPROCESSABLE:  # a test failed: the node rebooted, or its request changed
                    raise RequestError(f'cannot write the request on node "{view.name}": {exc}') from None
                current = nodes(kube, names=[view.name])[0]
                if not current.boot_id:
                    raise RequestError(f'node "{view.name}" reports no status.nodeInfo.bootID') from None
                continue
            out.append(Outcome(view.name, "requested", current.boot_id, old if satisfied else None))
            break
        else:
            raise RequestError(f'node "{view.name}" keeps changing its bootID; request not written')
    return out


def cancel(
    kube: KubeApi, views: Sequence[NodeState], *, now: datetime.datetime | None = None
) -> list[Outcome]:
    """Withdraw the request of every node of ``views`` (no call for a node without one). A request the node
    has rebooted out of since is not lost: its satisfied record is written as it is removed. ``now``: the
    record's time (``None``: the clock)."""
    at = now or datetime.datetime.now(datetime.UTC)
    with_request = [v for v in views if rebootrequest.REQUEST_ANNOTATION in v.annotations]
    _check_patch(kube, with_request)
    out = [Outcome(v.name, "none") for v in views if v not in with_request]
    for view in with_request:
        out.append(_withdraw(kube, view, at))
    return sorted(out, key=lambda o: o.node)


def _withdraw(kube: KubeApi, view: NodeState, now: datetime.datetime) -> Outcome:
    current = view
    for _attempt in range(3):
        raw, record = _settled(current, now)
        if raw is None:
            return Outcome(view.name, "none")
        try:
            if record is not None:  # guarded by the text read: the agent may be settling it right now
                kube.patch_node(view.name, rebootrequest.satisfy_patch(raw, record), patch_type=JSON_PATCH)
            else:
                patch = {"metadata": {"annotations": {rebootrequest.REQUEST_ANNOTATION: None}}}
                kube.patch_node(view.name, patch, patch_type=MERGE_PATCH)
        except errors.ForbiddenError as exc:
            raise RequestError(f"forbidden: {_message(exc)}") from None
        except errors.KubeError as exc:
            if exc.status != _UNPROCESSABLE:
                raise RequestError(f'cannot remove the request from node "{view.name}": {exc}') from None
            current = nodes(kube, names=[view.name])[0]  # settled or replaced meanwhile: look again
            continue
        satisfied = _existing(current) if record is not None else None
        return Outcome(view.name, "cancelled", current.boot_id, satisfied)
    raise RequestError(f'the request on node "{view.name}" keeps changing; not withdrawn')


# -- reading the fleet ---------------------------------------------------------------------------------------


def all_nodes(kube: KubeApi, selector: str = "") -> list[NodeState]:
    """LIST the Nodes (``list`` on nodes: not in kured's agent RBAC)."""
    try:
        items = kube.list_nodes(label_selector=selector or None).get("items", [])
    except errors.ForbiddenError as exc:
        raise RequestError(
            f"forbidden: {_message(exc)} (list on nodes is needed, or name the nodes: pykured status NODE...)"
        ) from None
    except errors.KubeError as exc:
        raise RequestError(f"cannot list nodes: {exc}") from None
    return [NodeState.from_obj(item) for item in items]


def fleet(
    kube: KubeApi,
    *,
    names: Sequence[str],
    selector: str,
    namespace: str,
    ds_name: str,
    annotation: str,
    lease_prefix: str,
) -> tuple[list[NodeState], list[fleetview.LockInfo]]:
    """The Nodes ``status`` and ``plan`` show (``names``, else by ``selector``) and the lock holders they
    read."""
    views = nodes(kube, names=names) if names else all_nodes(kube, selector)
    locks = lock_holders(
        kube,
        namespace=namespace,
        ds_name=ds_name,
        annotation=annotation,
        lease_prefix=lease_prefix,
    )
    return views, locks


def lock_limit(
    kube: KubeApi, *, namespace: str, ds_name: str, concurrency: int, budget: Budget | None
) -> fleetview.LockLimit:
    """The lock's limit as the agents compute it: a percentage budget is taken of the DaemonSet's
    ``status.desiredNumberScheduled`` (one GET; ``None`` when it cannot be read, as the agents then allow
    one)."""
    nodes = None
    if budget is not None and budget.percent:
        nodes = daemonset_count(kube, namespace=namespace, name=ds_name)()
    return fleetview.LockLimit(concurrency, budget, nodes)


def limit(
    kube: KubeApi, *, namespace: str, ds_name: str, concurrency: int, budget: Budget | None
) -> fleetview.LockLimit | None:
    """The lock's limit under the agents' ``--max-unavailable`` (:func:`lock_limit`); ``None`` when they have
    none."""
    if budget is None:
        return None
    return lock_limit(kube, namespace=namespace, ds_name=ds_name, concurrency=concurrency, budget=budget)


def lock_holders(
    kube: KubeApi,
    *,
    namespace: str,
    ds_name: str,
    annotation: str,
    lease_prefix: str,
    registry: LockRegistry | None = None,
) -> list[fleetview.LockInfo]:
    """The holders of every lock backend of ``registry`` (the registered ones by default), through their
    operator views; what the caller may not read is reported, not raised."""
    place = LockPlace(namespace=namespace, ds_name=ds_name, annotation=annotation, lease_prefix=lease_prefix)
    out = []
    for view in open_views(kube, place, registry=registry):
        reading = view.read()
        if reading.error is not None:
            out.append(fleetview.LockInfo(view.backend, error=_lock_error(reading.error)))
        elif reading.unreadable is not None:
            error = f"unreadable value, counts as held ({reading.unreadable.error})"
            out.append(fleetview.LockInfo(view.backend, error=error))
        else:
            out.append(fleetview.LockInfo(view.backend, tuple(e.node_id for e in reading.holders)))
    return out


def _lock_error(exc: BaseException) -> str:
    if forbidden(exc) or isinstance(exc, errors.ForbiddenError):
        return "forbidden (403) for this user"
    cause = exc.__cause__
    if isinstance(cause, errors.NotFoundError) or isinstance(exc, errors.NotFoundError):
        return "not found (404)"
    return str(exc)


def rollout_progress(kube: KubeApi, rollout_id: str = "", selector: str = "") -> rollout.RolloutProgress:
    """A rollout's progress (the newest rollout when ``rollout_id`` is empty)."""
    views = all_nodes(kube, selector)
    if not rollout_id:
        ids = rollout.rollouts(views)
        if not ids:
            raise RequestError(
                "no rollout found (no node carries a request or a satisfied record with a rollout id)"
            )
        rollout_id = ids[0]
    prog = rollout.progress(views, rollout_id)
    if not prog.nodes:
        raise RequestError(f"rollout {rollout_id!r} not found on any node")
    return prog
