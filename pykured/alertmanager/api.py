"""Alertmanager's HTTP API v2, as pykured uses it: active alerts, and silences made and expired.

Every answer is hostile until parsed: at most :data:`pykured.alerts.client.MAX_ANSWER` bytes, JSON nested at
most :data:`MAX_DEPTH` deep (:mod:`pykured.core.boundedjson`), and parsed whole — an answer of the wrong
shape is an :class:`AlertmanagerError`, never a partial list. The URL's ``user:password`` is sent as HTTP
basic auth and never shown (:func:`pykured.alerts.client.shown_url`), as for ``--prometheus-url``; a
redirect does not carry it on (the HTTP plumbing is the one Prometheus' query uses).

Endpoints (Alertmanager's ``api/v2/openapi.yaml``): ``GET /api/v2/alerts`` (filters ``active``,
``silenced``, ``inhibited`` as query parameters; each alert's ``status.silencedBy`` lists the silences that
cover it), ``GET /api/v2/silences`` (every silence, expired ones too, with ``createdBy`` and ``comment``),
``POST /api/v2/silences`` (a ``postableSilence``, answered with ``{"silenceID": …}``),
``DELETE /api/v2/silence/{silenceID}`` (expires it; 404 when there is none).
"""

from __future__ import annotations

import dataclasses
import datetime
import http.client
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

from pykured.alertmanager.matchers import Matcher
from pykured.alerts.client import api_target, opener_for, read_answer
from pykured.core import boundedjson
from pykured.core.errors import PykuredError

MAX_DEPTH = 8
"""An alerts answer is four levels deep (list, alert, labels or status, silencedBy)."""
MAX_ALERTS = 50_000
MAX_SILENCES = 50_000
MAX_SHOWN = 256
SILENCE_ID = re.compile(r"[A-Za-z0-9-]{1,64}")
"""Alertmanager's silence ids are UUIDs; anything else from an answer is not used."""
ACTIVE_QUERY = {"active": "true", "silenced": "false", "inhibited": "false"}
"""Alerts neither silenced nor inhibited (and unprocessed ones, which Alertmanager has not yet matched
against silences)."""
SILENCED_QUERY = {"active": "true", "silenced": "true", "inhibited": "false"}
"""The same, and the silenced ones too (each with the silences that cover it): the gate decides which
silences it trusts (:mod:`pykured.blockers.alertmanager`)."""


class AlertmanagerError(PykuredError):
    """An Alertmanager call failed, or its answer was not what the API says."""


@dataclasses.dataclass(frozen=True, slots=True)
class Alert:
    """One alert from ``GET /api/v2/alerts``: its labels, its state (``active``, ``unprocessed``,
    ``suppressed``) and the ids of the silences that cover it (``status.silencedBy``)."""

    labels: Mapping[str, str]
    state: str
    silenced_by: tuple[str, ...] = ()

    @property
    def name(self) -> str | None:
        return self.labels.get("alertname")


def _endpoint(url: str, *segments: str) -> tuple[str, dict[str, str]]:
    target = api_target(url, ("api", "v2", *segments), error=AlertmanagerError, what="Alertmanager")
    headers = {"User-Agent": "pykured", "Accept": "application/json"}
    if target.authorization is not None:
        headers["Authorization"] = target.authorization
    return target.endpoint, headers


def _call(
    url: str, method: str, segments: Sequence[str], *, query: Mapping[str, str] | None = None,
    body: Any = None, timeout: float,
) -> tuple[int, bytes]:  # fmt: skip
    endpoint, headers = _endpoint(url, *segments)
    base = endpoint.split("?", 1)[0]
    if query:
        endpoint = f"{base}?{urllib.parse.urlencode(dict(query))}"
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(endpoint, data=data, method=method, headers=headers)  # noqa: S310 - http(s) only
    try:
        with opener_for(endpoint).open(request, timeout=timeout) as response:
            status = response.status
            return status, read_answer(response, status, error=AlertmanagerError, what="Alertmanager")
    except urllib.error.HTTPError as exc:
        with exc:
            text = read_answer(exc, exc.code, error=AlertmanagerError, what="Alertmanager")
            return exc.code, text
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
        reason = getattr(exc, "reason", exc)
        raise AlertmanagerError(f"{method} {base!r}: {_shown(str(reason))}") from None


def _shown(text: str) -> str:
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 1] + "…"


def _failed(method: str, segments: Sequence[str], status: int, body: bytes) -> AlertmanagerError:
    """A non-2xx answer: its status and the start of its text (Alertmanager's errors are JSON strings)."""
    detail = ""
    try:
        value = boundedjson.loads(body, max_chars=MAX_SHOWN * 16, max_depth=4)
        if isinstance(value, str):
            detail = f": {_shown(value)}"
    except boundedjson.UnreadableJSON:
        pass
    path = "/".join(("api", "v2", *segments))
    return AlertmanagerError(f"{method} /{path}: HTTP {status}{detail}")


def _decode(status: int, body: bytes) -> Any:
    try:
        return boundedjson.loads(body, max_chars=len(body) + 1, max_depth=MAX_DEPTH)
    except boundedjson.UnreadableJSON as exc:
        raise AlertmanagerError(f"cannot decode Alertmanager answer (HTTP {status}): {exc}") from None


def parse_alerts(value: Any) -> list[Alert]:
    """A ``gettableAlerts`` answer, whole: a list of objects, each with ``labels`` (strings to strings) and
    ``status.state`` (a string); anything else is an :class:`AlertmanagerError`."""
    if not isinstance(value, list):
        raise AlertmanagerError("Alertmanager's alerts answer is not a list")
    if len(value) > MAX_ALERTS:
        raise AlertmanagerError(f"more than {MAX_ALERTS} alerts in Alertmanager's answer")
    alerts = []
    for item in value:
        labels = item.get("labels") if isinstance(item, dict) else None
        status = item.get("status") if isinstance(item, dict) else None
        state = status.get("state") if isinstance(status, dict) else None
        silenced_by = status.get("silencedBy", []) if isinstance(status, dict) else None
        if (
            not isinstance(labels, dict)
            or not all(isinstance(v, str) for v in labels.values())
            or not isinstance(state, str)
            or not isinstance(silenced_by, list)
            or not all(isinstance(i, str) for i in silenced_by)
        ):
            raise AlertmanagerError("malformed alert in Alertmanager's answer")
        alerts.append(Alert(labels=dict(labels), state=state, silenced_by=tuple(silenced_by)))
    return alerts


def active_alerts(url: str, *, silenced: bool = False, timeout: float = 10) -> list[Alert]:
    """``GET /api/v2/alerts?active=true&silenced=false&inhibited=false`` (``silenced``:
    ``silenced=true``, so the silenced alerts come too)."""
    query = SILENCED_QUERY if silenced else ACTIVE_QUERY
    status, body = _call(url, "GET", ("alerts",), query=query, timeout=timeout)
    if status != 200:
        raise _failed("GET", ("alerts",), status, body)
    return parse_alerts(_decode(status, body))


@dataclasses.dataclass(frozen=True, slots=True)
class Silence:
    """One silence from ``GET /api/v2/silences``: its id, who made it and why, its state (``active``,
    ``pending``, ``expired``)."""

    ident: str
    created_by: str
    comment: str
    state: str


def parse_silences(value: Any) -> list[Silence]:
    """A ``gettableSilences`` answer, whole: a list of objects with string ``id``, ``createdBy``,
    ``comment`` and ``status.state``; anything else is an :class:`AlertmanagerError`."""
    if not isinstance(value, list):
        raise AlertmanagerError("Alertmanager's silences answer is not a list")
    if len(value) > MAX_SILENCES:
        raise AlertmanagerError(f"more than {MAX_SILENCES} silences in Alertmanager's answer")
    silences = []
    for item in value:
        fields = item if isinstance(item, dict) else {}
        status = fields.get("status")
        state = status.get("state") if isinstance(status, dict) else None
        ident, created_by, comment = fields.get("id"), fields.get("createdBy"), fields.get("comment")
        if not all(isinstance(v, str) for v in (ident, created_by, comment, state)):
            raise AlertmanagerError("malformed silence in Alertmanager's answer")
        silences.append(Silence(str(ident), str(created_by), str(comment), str(state)))
    return silences


def list_silences(url: str, *, timeout: float = 10) -> list[Silence]:
    """``GET /api/v2/silences``: every silence Alertmanager keeps (expired ones too, for its retention)."""
    status, body = _call(url, "GET", ("silences",), timeout=timeout)
    if status != 200:
        raise _failed("GET", ("silences",), status, body)
    return parse_silences(_decode(status, body))


@dataclasses.dataclass(frozen=True, slots=True)
class SilenceSpec:
    """What ``POST /api/v2/silences`` is sent."""

    matchers: tuple[Matcher, ...]
    starts: datetime.datetime
    ends: datetime.datetime
    comment: str
    created_by: str = "pykured"

    def to_api(self) -> dict[str, Any]:
        return {
            "matchers": [m.to_api() for m in self.matchers],
            "startsAt": _time(self.starts),
            "endsAt": _time(self.ends),
            "createdBy": self.created_by,
            "comment": self.comment,
        }


def _time(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def create_silence(url: str, spec: SilenceSpec, *, timeout: float = 10) -> str:
    """``POST /api/v2/silences``; the new silence's id."""
    status, body = _call(url, "POST", ("silences",), body=spec.to_api(), timeout=timeout)
    if status != 200:
        raise _failed("POST", ("silences",), status, body)
    answer = _decode(status, body)
    ident = answer.get("silenceID") if isinstance(answer, dict) else None
    if not isinstance(ident, str) or SILENCE_ID.fullmatch(ident) is None:
        raise AlertmanagerError("Alertmanager's answer to a new silence has no valid silenceID")
    return ident


def expire_silence(url: str, ident: str, *, timeout: float = 10) -> bool:
    """``DELETE /api/v2/silence/{id}``: ``True`` when expired now, ``False`` when Alertmanager has no such
    silence (gone already)."""
    if SILENCE_ID.fullmatch(ident) is None:
        raise AlertmanagerError("not a silence id")
    status, body = _call(url, "DELETE", ("silence", ident), timeout=timeout)
    if status == 404:
        return False
    if status != 200:
        raise _failed("DELETE", ("silence", ident), status, body)
    return True


__all__ = [
    "ACTIVE_QUERY",
    "SILENCED_QUERY",
    "Alert",
    "AlertmanagerError",
    "Silence",
    "SilenceSpec",
    "active_alerts",
    "create_silence",
    "expire_silence",
    "list_silences",
    "parse_alerts",
    "parse_silences",
]
