"""FleetLock v1 on the wire: routing, the ``client_params`` body, and ``{"kind", "value"}`` replies. Pure.

Concept: everything about a FleetLock HTTP exchange that does not need the cluster, so it can be tested with
the exact bytes Zincati sends (Zincati's FleetLock client; docs/fleetlock.md) and fuzzed. The server adapter
(:mod:`pykured.fleetlock.server`) only moves bytes; the service (:mod:`pykured.fleetlock.service`) only sees a
parsed :class:`Request` and answers a :class:`Reply`.

Invariants:

* Only ``POST {base}v1/pre-reboot`` and ``POST {base}v1/steady-state`` are served; ``base`` is a path
  prefix ending in ``/`` (Zincati joins ``v1/...`` to its ``base_url`` with relative URL resolution, so a
  base URL with a path must end in a slash). With the default base ``/`` any prefix is accepted, so a
  ``base_url`` such as ``http://host/${group}/`` (Zincati substitutes its group) works unconfigured; the
  body's group is still checked. A trailing slash after the endpoint and a query string are tolerated.
  Other paths answer 404, other methods on the endpoints 405.
* The ``fleet-lock-protocol: true`` header is required (400 ``missing_header``).
* The body is parsed as JSON **whatever the Content-Type** (Zincati sends none, pretty-printed, ``id``
  then ``group``). ``id`` and ``group`` must be non-empty strings; ``group`` must match
  ``^[a-zA-Z0-9.-]+$`` (400 ``invalid_request``). Bodies above :data:`MAX_BODY` answer 413, bodies nested
  deeper than :data:`MAX_DEPTH` 400, both before the JSON is parsed (:mod:`pykured.core.boundedjson`).
* Bad input never answers 5xx. Errors are JSON ``{"kind": ..., "value": ...}`` and ``kind`` comes from
  the small fixed set :data:`KINDS` (Zincati uses it as a metric label, so it must stay bounded).
* A 2xx means the operation is complete. "Please wait" (still draining, lock held, window closed) is 423,
  never 202: Zincati treats every 2xx as a grant (§0.2).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import re
from typing import Any, Final

from pykured.core import boundedjson

MAX_BODY: Final = 64 * 1024
"""Largest request body read; Zincati's is ~80 bytes."""

MAX_DEPTH: Final = 4
"""Deepest JSON nesting accepted in a body (Zincati's is two levels deep)."""

MAX_ID: Final = 256
"""Longest ``id``/``group`` accepted (Zincati's id is 32 hex characters)."""

HEADER: Final = "fleet-lock-protocol"
GROUP_RE: Final = re.compile(r"[a-zA-Z0-9.-]+", re.ASCII)


class Api(enum.Enum):
    """The two FleetLock operations."""

    PRE_REBOOT = "pre-reboot"
    """RecursiveLock: reserve a reboot slot."""
    STEADY_STATE = "steady-state"
    """UnlockIfHeld: release the slot this client holds."""


OK: Final = "ok"
METHOD_NOT_ALLOWED: Final = "method_not_allowed"
NOT_FOUND: Final = "not_found"
MISSING_HEADER: Final = "missing_header"
INVALID_REQUEST: Final = "invalid_request"
REQUEST_TOO_LARGE: Final = "request_too_large"
UNKNOWN_GROUP: Final = "unknown_group"
UNKNOWN_NODE: Final = "unknown_node"
OUTSIDE_WINDOW: Final = "outside_window"
BLOCKED: Final = "blocked"
LOCK_HELD: Final = "lock_held"
DRAIN_IN_PROGRESS: Final = "drain_in_progress"
DRAIN_FAILED: Final = "drain_failed"
NODE_NOT_READY: Final = "node_not_ready"
FORBIDDEN: Final = "forbidden"
INTERNAL_ERROR: Final = "internal_error"

KINDS: Final = frozenset(
    {
        OK,
        METHOD_NOT_ALLOWED,
        NOT_FOUND,
        MISSING_HEADER,
        INVALID_REQUEST,
        REQUEST_TOO_LARGE,
        UNKNOWN_GROUP,
        UNKNOWN_NODE,
        OUTSIDE_WINDOW,
        BLOCKED,
        LOCK_HELD,
        DRAIN_IN_PROGRESS,
        DRAIN_FAILED,
        NODE_NOT_READY,
        FORBIDDEN,
        INTERNAL_ERROR,
    }
)
"""Every ``kind`` pykured answers (the bounded label set of Zincati's error metric)."""

STATUS: Final[dict[str, int]] = {
    OK: 200,
    METHOD_NOT_ALLOWED: 405,
    NOT_FOUND: 404,
    MISSING_HEADER: 400,
    INVALID_REQUEST: 400,
    REQUEST_TOO_LARGE: 413,
    UNKNOWN_GROUP: 400,
    UNKNOWN_NODE: 404,
    OUTSIDE_WINDOW: 423,
    BLOCKED: 423,
    LOCK_HELD: 423,
    DRAIN_IN_PROGRESS: 423,
    DRAIN_FAILED: 503,
    NODE_NOT_READY: 503,
    FORBIDDEN: 403,
    INTERNAL_ERROR: 500,
}
"""The HTTP status of each kind."""


@dataclasses.dataclass(frozen=True, slots=True)
class Reply:
    """One answer: ``kind`` (from :data:`KINDS`) decides the status; ``value`` is the human text."""

    kind: str
    value: str

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown FleetLock reply kind {self.kind!r}")

    @property
    def status(self) -> int:
        """The HTTP status code."""
        return STATUS[self.kind]

    @property
    def ok(self) -> bool:
        """Whether this is the (only) success answer."""
        return self.kind == OK

    def body(self) -> bytes:
        """The JSON body ``{"kind": ..., "value": ...}`` (also for 200, which Zincati ignores)."""
        return json.dumps({"kind": self.kind, "value": self.value or self.kind}).encode()


def ok(value: str) -> Reply:
    """A 200 answer."""
    return Reply(OK, value)


@dataclasses.dataclass(frozen=True, slots=True)
class Request:
    """A parsed, valid FleetLock request."""

    api: Api
    id: str
    group: str


def normalize_base(base: str, *, group: str = "default") -> str:
    """The path prefix with exactly one leading and one trailing slash (``""`` and ``/`` → ``/``), with
    ``${group}`` replaced by the served group (as Zincati substitutes it into its ``base_url``)."""
    stripped = base.replace("${group}", group).strip().strip("/")
    return f"/{stripped}/" if stripped else "/"


def route(method: str, target: str, *, base: str = "/") -> Api | Reply:
    """The operation a request line asks for, or the error answer (404 path, 405 method)."""
    path = target.split("?", 1)[0].split("#", 1)[0]
    prefix = normalize_base(base)
    if prefix == "/" and "/v1/" in path:  # any prefix: Zincati's base_url may carry its ${group}
        prefix = path[: path.rfind("/v1/") + 1]
    api: Api | None = None
    if path.startswith(prefix):
        rest = path[len(prefix) :].rstrip("/")
        for candidate in Api:
            if rest == f"v1/{candidate.value}":
                api = candidate
    if api is None:
        return Reply(NOT_FOUND, f"no FleetLock endpoint at {path[:200]!r}; use {prefix}v1/pre-reboot")
    if method != "POST":
        return Reply(METHOD_NOT_ALLOWED, f"{method[:20]} not allowed on {api.value}, use POST")
    return api


def check_header(value: str | None) -> Reply | None:
    """``None`` when ``fleet-lock-protocol: true`` is present, else the 400 answer."""
    if value is not None and value.strip().lower() == "true":
        return None
    return Reply(MISSING_HEADER, "missing or invalid header fleet-lock-protocol: true")


def check_length(length: str | None) -> Reply | None:
    """``None`` when a ``Content-Length`` within :data:`MAX_BODY` is given, else the error answer."""
    if length is None:
        return Reply(INVALID_REQUEST, "missing Content-Length")
    text = length.strip()
    if not text.isascii() or not text.isdigit():
        return Reply(INVALID_REQUEST, "invalid Content-Length")
    if int(text) > MAX_BODY:
        return Reply(REQUEST_TOO_LARGE, f"request body larger than {MAX_BODY} bytes")
    return None


def _field(params: dict[str, Any], name: str) -> str | Reply:
    value = params.get(name)
    if not isinstance(value, str) or not value:
        return Reply(INVALID_REQUEST, f"client_params.{name} must be a non-empty string")
    if len(value) > MAX_ID:
        return Reply(INVALID_REQUEST, f"client_params.{name} longer than {MAX_ID} characters")
    return value


def parse_body(api: Api, body: bytes) -> Request | Reply:
    """Decode ``{"client_params": {"id": ..., "group": ...}}`` whatever the Content-Type."""
    if len(body) > MAX_BODY:
        return Reply(REQUEST_TOO_LARGE, f"request body larger than {MAX_BODY} bytes")
    try:
        decoded = boundedjson.loads(body, max_chars=MAX_BODY, max_depth=MAX_DEPTH)
    except boundedjson.UnreadableJSON as exc:
        return Reply(INVALID_REQUEST, f"request body is not valid UTF-8 JSON: {exc}")
    params = decoded.get("client_params") if isinstance(decoded, dict) else None
    if not isinstance(params, dict):
        return Reply(INVALID_REQUEST, 'request body must be {"client_params": {"id": ..., "group": ...}}')
    ident = _field(params, "id")
    if isinstance(ident, Reply):
        return ident
    group = _field(params, "group")
    if isinstance(group, Reply):
        return group
    if GROUP_RE.fullmatch(group) is None:
        return Reply(INVALID_REQUEST, "client_params.group must match ^[a-zA-Z0-9.-]+$")
    return Request(api, ident, group)


def check_group(request: Request, *, served: str) -> Reply | None:
    """``None`` when the request's group is the one served (``""`` or ``*`` serve any group)."""
    if served in ("", "*") or request.group == served:
        return None
    return Reply(UNKNOWN_GROUP, f"group {request.group!r} is not served here (serving {served!r})")
