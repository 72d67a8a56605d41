"""Reboot requests bound to a boot: "reboot this node once, for this reason", recorded on the Node.

Concept: besides the sentinel, an operator asks for a reboot (kernel arguments, a CVE fix, a pool roll) by
putting a request on the Node that names the node's current ``status.nodeInfo.bootID``. The request is
satisfied by the first boot after it (the bootID changes), so it can never trigger a second reboot; a
request naming a boot the node is not in is never acted on. OpenShift's machine-config daemon binds its
``request-reboot`` to the boot ID the same way.

The annotation (``pykured.dev/reboot-request``) holds compact JSON with sorted keys::

    {"bootID":"<status.nodeInfo.bootID when asked>","reason":"kernel 6.12",
     "requestedAt":"2026-11-30T21:40:00Z","requestedBy":"alice","rollout":"r20261130-214000-1a2b"}

``rollout`` is present only for requests written by ``pykured rollout``. When the agent sees the node back
with a new bootID it removes the request and records the outcome in ``pykured.dev/reboot-request-satisfied``
(the same fields plus ``newBootID`` and ``satisfiedAt``), which ``pykured rollout status`` reads. A requester
that replaces (or withdraws) a request the node has already rebooted out of writes that record itself, in the
same patch: every request ends satisfied (with its record), stale, invalid or withdrawn, and a request for
the current boot is acted on, never held by the sentinel's loop guard (:mod:`pykured.cycle.decide`).

Pure: no I/O, no clock reads (``now`` is passed in). Decoding is bounded (:mod:`pykured.core.boundedjson`:
size and depth checked before the JSON is decoded) and total: a garbled value of any size or shape raises
:class:`ValueError` from the parsers and classifies as :attr:`RequestState.INVALID`; it never raises into the
daemon.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import re
from collections.abc import Collection, Mapping
from typing import Any

from pykured.core import boundedjson
from pykured.core.times import format_rfc3339, parse_rfc3339
from pykured.kube.node import PYKURED_PREFIX

REQUEST_ANNOTATION = PYKURED_PREFIX + "reboot-request"
SATISFIED_ANNOTATION = PYKURED_PREFIX + "reboot-request-satisfied"
MAX_REASON = 256
"""Longer reasons are cut (an annotation is read by humans in ``kubectl describe``)."""
_ROLLOUT_ID = re.compile(r"^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$")


class RequestState(enum.Enum):
    """What a node's request means for the current boot."""

    NONE = "none"
    """No request on the Node."""
    PENDING = "pending"
    """The request names the current boot: the node needs a reboot."""
    SATISFIED = "satisfied"
    """The request names a boot this node has left (a reboot happened since): remove it and say so."""
    STALE = "stale"
    """The request names a boot this node is not known to have been in: never acted on, removed."""
    INVALID = "invalid"
    """The annotation cannot be decoded: never acted on, removed."""
    UNBOUND = "unbound"
    """The node reports no bootID, so the request cannot be checked: kept, not acted on."""


@dataclasses.dataclass(frozen=True, slots=True)
class RebootRequest:
    """One request, as stored in the annotation."""

    boot_id: str
    reason: str
    requested_at: datetime.datetime
    requested_by: str = ""
    rollout: str = ""

    def same_intent(self, other: RebootRequest) -> bool:
        """Same boot, reason and rollout (who and when do not matter): writing ``other`` changes nothing."""
        return (self.boot_id, self.reason, self.rollout) == (other.boot_id, other.reason, other.rollout)


@dataclasses.dataclass(frozen=True, slots=True)
class Classified:
    """The outcome of :func:`classify`."""

    state: RequestState
    request: RebootRequest | None = None
    why: str = ""
    raw: str | None = None
    """The annotation's text as read (for a guarded removal), ``None`` when absent."""

    @property
    def pending(self) -> bool:
        """Does this request make the node need a reboot now?"""
        return self.state is RequestState.PENDING

    @property
    def cleanup(self) -> bool:
        """Should the agent remove the annotation?"""
        return self.state in (RequestState.SATISFIED, RequestState.STALE, RequestState.INVALID)


def clean_reason(text: str) -> str:
    """One line, trimmed, at most :data:`MAX_REASON` characters."""
    return " ".join(text.split())[:MAX_REASON]


def valid_rollout_id(text: str) -> bool:
    """A rollout id is a DNS label-like token (lower-case letters, digits, ``-`` and ``.``, ≤ 63)."""
    return bool(_ROLLOUT_ID.match(text))


def new_rollout_id(now: datetime.datetime, token: str) -> str:
    """``r<UTC date>-<time>-<token>`` (``token``: a few random hex digits chosen by the caller)."""
    stamp = now.astimezone(datetime.UTC).strftime("%Y%m%d-%H%M%S")
    return f"r{stamp}-{token.lower()}"


def make_request(
    *, boot_id: str, reason: str, requested_by: str, now: datetime.datetime, rollout: str = ""
) -> RebootRequest:
    """A new request for the boot ``boot_id``."""
    if not boot_id:
        raise ValueError("the node reports no bootID")
    if rollout and not valid_rollout_id(rollout):
        raise ValueError(f"invalid rollout id {rollout!r}")
    return RebootRequest(
        boot_id=boot_id,
        reason=clean_reason(reason),
        requested_at=now.astimezone(datetime.UTC).replace(microsecond=0),
        requested_by=requested_by,
        rollout=rollout,
    )


def _fields(req: RebootRequest) -> dict[str, str]:
    out = {
        "bootID": req.boot_id,
        "reason": req.reason,
        "requestedAt": format_rfc3339(req.requested_at),
        "requestedBy": req.requested_by,
    }
    if req.rollout:
        out["rollout"] = req.rollout
    return out


def _dump(data: Mapping[str, Any]) -> str:
    return json.dumps(dict(data), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def format_request(req: RebootRequest) -> str:
    """The annotation value: compact JSON, sorted keys."""
    return _dump(_fields(req))


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose keys are unique: a second ``requestedBy`` (JSON decoders keep the last one) would let a
    record say one requester to a check that reads the first and another to the agent."""
    data = dict(pairs)
    if len(data) != len(pairs):
        raise ValueError("a key appears twice")
    return data


def _decode(text: str) -> dict[str, Any]:
    try:
        data = boundedjson.loads(text, object_pairs_hook=_unique)
    except boundedjson.UnreadableJSON as exc:
        raise ValueError(str(exc)) from None
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    return data


def _text(data: Mapping[str, Any], key: str, *, required: bool = False) -> str:
    value = data.get(key, "")
    if not isinstance(value, str):
        raise ValueError(f"{key} is not a string")
    if required and not value:
        raise ValueError(f"{key} is missing")
    return value


def parse_request(text: str) -> RebootRequest:
    """Decode an annotation value; ``ValueError`` says what is wrong."""
    data = _decode(text)
    boot_id = _text(data, "bootID", required=True)
    at_text = _text(data, "requestedAt", required=True)
    requested_at = parse_rfc3339(at_text)
    if requested_at is None:
        raise ValueError(f"requestedAt {at_text!r} is not an RFC 3339 time")
    rollout = _text(data, "rollout")
    if rollout and not valid_rollout_id(rollout):
        raise ValueError(f"invalid rollout id {rollout!r}")
    return RebootRequest(
        boot_id=boot_id,
        reason=clean_reason(_text(data, "reason")),
        requested_at=requested_at,
        requested_by=_text(data, "requestedBy")[:MAX_REASON],
        rollout=rollout,
    )


def ago(now: datetime.datetime, then: datetime.datetime, *, future: str = "in the future") -> str:
    """``45s ago``, ``12m ago``, ``3h ago``, ``2d ago``; ``future`` when ``then`` is after ``now``."""
    seconds = int((now - then).total_seconds())
    if seconds < 0:
        return future
    if seconds < 120:
        return f"{seconds}s ago"
    if seconds < 7200:
        return f"{seconds // 60}m ago"
    if seconds < 172800:
        return f"{seconds // 3600}h ago"
    return f"{seconds // 86400}d ago"


def classify(
    annotations: Mapping[str, str],
    boot_id: str,
    *,
    previous_boot_ids: Collection[str] = (),
    now: datetime.datetime,
) -> Classified:
    """What the node's request means now.

    ``previous_boot_ids`` are boots this node is known to have left (the bootID recorded when pykured
    triggered its reboot, the bootID of the agent's last published status): a request naming one of them
    was satisfied by a reboot. Any other bootID that is not the current one is stale.
    """
    raw = annotations.get(REQUEST_ANNOTATION)
    if raw is None:
        return Classified(RequestState.NONE)
    try:
        req = parse_request(raw)
    except ValueError as exc:
        return Classified(RequestState.INVALID, why=f"unreadable reboot request ({exc})", raw=raw)
    asked = f"requested {ago(now, req.requested_at)} by {req.requested_by or 'unknown'}"
    if not boot_id:
        return Classified(RequestState.UNBOUND, req, f"the node reports no bootID ({asked})", raw)
    if req.boot_id == boot_id:
        return Classified(RequestState.PENDING, req, f"reboot requested: {req.reason} ({asked})", raw)
    if req.boot_id in previous_boot_ids:
        why = f"rebooted since the request (bootID {req.boot_id} -> {boot_id}): {req.reason} ({asked})"
        return Classified(RequestState.SATISFIED, req, why, raw)
    why = f"request for bootID {req.boot_id}, but the node runs bootID {boot_id}: {req.reason} ({asked})"
    return Classified(RequestState.STALE, req, why, raw)


# -- writing ------------------------------------------------------------------------------------------------


def _pointer(key: str) -> str:
    return "/metadata/annotations/" + key.replace("~", "~0").replace("/", "~1")


def bind_patch(
    req: RebootRequest, *, has_annotations: bool, replacing: str | None = None, satisfied: str | None = None
) -> list[dict[str, Any]]:
    """A JSON Patch that writes ``req`` only if the node still runs ``req.boot_id`` (else HTTP 422).

    The ``test`` of ``/status/nodeInfo/bootID`` makes reading the bootID and writing the request atomic:
    a node that rebooted in between is not given a request for a boot it has left. ``replacing``: the text
    of the request read on the Node, which must still be there (else HTTP 422: the agent settled it, or
    someone replaced it, meanwhile); ``satisfied``: its :func:`satisfied_record`, when a reboot satisfied it,
    written in the same patch, so the record of a satisfied request is never lost to a newer request.
    """
    ops: list[dict[str, Any]] = [{"op": "test", "path": "/status/nodeInfo/bootID", "value": req.boot_id}]
    if replacing is not None:
        ops.append({"op": "test", "path": _pointer(REQUEST_ANNOTATION), "value": replacing})
        if satisfied is not None:
            ops.append({"op": "add", "path": _pointer(SATISFIED_ANNOTATION), "value": satisfied})
    if has_annotations:
        ops.append({"op": "add", "path": _pointer(REQUEST_ANNOTATION), "value": format_request(req)})
    else:
        value = {REQUEST_ANNOTATION: format_request(req)}
        ops.append({"op": "add", "path": "/metadata/annotations", "value": value})
    return ops


def remove_patch(raw: str) -> list[dict[str, Any]]:
    """A JSON Patch that removes the request only if it still reads ``raw`` (a newer request survives)."""
    path = _pointer(REQUEST_ANNOTATION)
    return [{"op": "test", "path": path, "value": raw}, {"op": "remove", "path": path}]


def satisfied_record(req: RebootRequest, *, new_boot_id: str, now: datetime.datetime) -> str:
    """The ``pykured.dev/reboot-request-satisfied`` value: the request plus ``newBootID``, ``satisfiedAt``."""
    fields: dict[str, str] = {**_fields(req), "newBootID": new_boot_id, "satisfiedAt": format_rfc3339(now)}
    return _dump(fields)


def satisfy_patch(raw: str, record: str) -> list[dict[str, Any]]:
    """Remove the request (guarded by its text, as :func:`remove_patch`) and write the satisfied record."""
    return [*remove_patch(raw), {"op": "add", "path": _pointer(SATISFIED_ANNOTATION), "value": record}]


@dataclasses.dataclass(frozen=True, slots=True)
class Satisfied:
    """A decoded ``pykured.dev/reboot-request-satisfied`` record."""

    request: RebootRequest
    new_boot_id: str
    satisfied_at: datetime.datetime


def parse_satisfied(text: str) -> Satisfied:
    """Decode a satisfied record; ``ValueError`` if it is not one."""
    data = _decode(text)
    req = parse_request(text)
    at = parse_rfc3339(_text(data, "satisfiedAt", required=True))
    if at is None:
        raise ValueError("satisfiedAt is not an RFC 3339 time")
    return Satisfied(request=req, new_boot_id=_text(data, "newBootID", required=True), satisfied_at=at)
