"""The HTTP client of the alert sources: Prometheus' instant query and the plumbing Alertmanager's API shares.

:func:`instant_query` runs a query against ``<url>/api/v1/query`` the way client_golang's ``v1.API.Query``
sends it: a POST form, a GET on 405/501; the answer is decoded within bounds (:data:`MAX_ANSWER` bytes,
:data:`MAX_DEPTH` deep, :mod:`pykured.core.boundedjson`) and any failure is a :class:`PromQueryError` with
client_golang's error text where practical. The Prometheus blocker (:mod:`pykured.blockers.prometheus`) and
the settle gate (:class:`pykured.gates.settle.PromQueryGate`) query through it.

The plumbing is the one both alert sources use (:mod:`pykured.alertmanager.api` too): :func:`api_target`
takes a URL's ``user:password`` as HTTP basic auth and never shows it (:func:`shown_url`), :func:`opener_for`
follows Go's proxy rules and never carries the credentials on through a redirect, :func:`read_answer` reads
a bounded answer.
"""

from __future__ import annotations

import base64
import dataclasses
import http.client
import ipaddress
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from typing import Any

from pykured.core import boundedjson
from pykured.core.errors import PykuredError


class PromQueryError(PykuredError):
    """A Prometheus query failed; the message follows client_golang's error text where practical."""


_ERROR_STATUSES = (400, 422, 503)  # client_golang decodes these as API errors, not as HTTP failures


def go_float(value: float) -> str:
    """Go's ``strconv.FormatFloat(v, 'f', -1, 64)``: shortest round-trip digits, never an exponent."""
    text = repr(float(value))
    if "e" in text or "E" in text:
        text = f"{value:.17f}".rstrip("0")
    return text.removesuffix(".0").rstrip(".")


MAX_ANSWER = 8 * 1024 * 1024
"""The largest Prometheus answer read (bytes): ~25,000 alert samples; a larger one is a query error."""

MAX_DEPTH = 16
"""The deepest JSON nesting accepted in an answer (a vector answer is five levels deep)."""

MAX_SHOWN = 512
"""The longest text taken from an answer into a message (an error string, a result type)."""


@dataclasses.dataclass(frozen=True, slots=True)
class PromTarget:
    """Where a query goes: the endpoint without userinfo, the basic auth taken from the userinfo, and the
    endpoint as it may be shown (it never carries the password)."""

    endpoint: str
    authorization: str | None = dataclasses.field(default=None, repr=False)

    def __str__(self) -> str:
        return self.endpoint


def shown_url(url: str) -> str:
    """``--prometheus-url`` as pykured shows it: without its userinfo (``http://host:9090/p``); a value that
    does not split as a URL is ``<invalid URL>``."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.netloc.rpartition("@")[2]
    except ValueError:
        return "<invalid URL>"
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))


def query_endpoint(url: str) -> PromTarget:
    """``<url>/api/v1/query`` (a path prefix kept, Go's ``path.Join``), with the URL's ``user:password`` as
    HTTP basic auth, as Go's ``net/http`` sends it for client_golang (the user and password percent-decoded;
    a user without a password is ``user:``)."""
    return api_target(url, ("api", "v1", "query"), error=PromQueryError, what="Prometheus")


def api_target(url: str, segments: Sequence[str], *, error: type[PykuredError], what: str) -> PromTarget:
    """``<url>/<segments…>`` with the URL's userinfo as basic auth (see :func:`query_endpoint`); a URL that
    is not ``http(s)://host…`` raises ``error`` naming ``what`` (it never shows the password)."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:  # its text may quote the netloc, userinfo included
        raise error(f"invalid {what} URL {shown_url(url)!r}") from None
    try:
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as exc:  # "Port could not be cast to integer value as '…'" quotes the port only
        raise error(f"invalid {what} URL {shown_url(url)!r}: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise error(f"invalid {what} URL {shown_url(url)!r}")
    userinfo, at, hostport = parts.netloc.rpartition("@")
    authorization = None
    if at:
        user, _, password = userinfo.partition(":")
        pair = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}"
        authorization = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
    path = "/" + "/".join([*(s for s in parts.path.split("/") if s and s != "."), *segments])
    endpoint = urllib.parse.urlunsplit((parts.scheme, hostport, path, parts.query, ""))
    return PromTarget(endpoint, authorization)


class _NoCredentialRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect never carries the URL's basic auth on (Go's client sets it only on the first request)."""

    def redirect_request(  # noqa: PLR0917 - urllib's signature
        self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> urllib.request.Request | None:
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None:
            new.remove_header("Authorization")
        return new


def opener_for(url: str) -> urllib.request.OpenerDirector:
    """Environment proxies like Go's ``ProxyFromEnvironment``, which never proxies loopback hosts."""
    host = urllib.parse.urlsplit(url).hostname or ""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    proxies: dict[str, str] = {} if loopback else urllib.request.getproxies()
    return urllib.request.build_opener(urllib.request.ProxyHandler(proxies), _NoCredentialRedirects)


def read_answer(
    response: Any, status: int, *, error: type[PykuredError] = PromQueryError, what: str = "Prometheus"
) -> bytes:
    """At most :data:`MAX_ANSWER` bytes of an answer; a larger one (by its Content-Length or by what
    arrives) is an ``error`` (:class:`PromQueryError`) before it is read whole."""
    length = (response.headers.get("Content-Length") or "").strip() if response.headers else ""
    if length.isdigit() and int(length) > MAX_ANSWER:
        raise error(f"{what} answer (HTTP {status}) larger than {MAX_ANSWER} bytes")
    body: bytes = response.read(MAX_ANSWER + 1)
    if len(body) > MAX_ANSWER:
        raise error(f"{what} answer (HTTP {status}) larger than {MAX_ANSWER} bytes")
    return body


def _decode(status: int, body: bytes) -> tuple[str, Any]:
    try:
        answer = boundedjson.loads(body, max_chars=MAX_ANSWER, max_depth=MAX_DEPTH)
    except boundedjson.UnreadableJSON as exc:
        raise PromQueryError(f"cannot decode Prometheus answer (HTTP {status}): {exc}") from None
    if not isinstance(answer, dict):
        raise PromQueryError(f"unexpected Prometheus answer (HTTP {status})")
    if answer.get("status") == "error":
        raise PromQueryError(f"{_text(answer.get('errorType'))}: {_text(answer.get('error'))}")
    if status not in range(200, 300):
        raise PromQueryError(f"server returned HTTP status {status}")
    data = answer.get("data")
    if not isinstance(data, dict):
        raise PromQueryError("Prometheus answer has no data")
    return _text(data.get("resultType")), data.get("result")


def _text(value: Any) -> str:
    """A string field of an answer, shown bounded (anything else is shown empty)."""
    return value[:MAX_SHOWN] if isinstance(value, str) else ""


def instant_query(url: str, query: str, *, at: float, timeout: float) -> tuple[str, Any]:
    """Run an instant query; returns ``(resultType, result)``. POST form first, GET on 405/501."""
    target = query_endpoint(url)
    endpoint = target.endpoint
    form = urllib.parse.urlencode({"query": query, "time": go_float(at)})
    opener = opener_for(endpoint)
    headers = {"User-Agent": "pykured"}
    if target.authorization is not None:
        headers["Authorization"] = target.authorization
    post = urllib.request.Request(  # noqa: S310 - query_endpoint() admits only http and https
        endpoint,
        data=form.encode(),
        method="POST",
        headers={**headers, "Content-Type": "application/x-www-form-urlencoded"},
    )
    base = endpoint.split("?", 1)[0]
    get = urllib.request.Request(f"{base}?{form}", method="GET", headers=headers)  # noqa: S310
    for request in (post, get):
        try:
            with opener.open(request, timeout=timeout) as response:
                return _decode(response.status, read_answer(response, response.status))
        except urllib.error.HTTPError as exc:
            with exc:
                if request is post and exc.code in (405, 501):
                    continue
                if exc.code in _ERROR_STATUSES:
                    return _decode(exc.code, read_answer(exc, exc.code))
                raise PromQueryError(f"server returned HTTP status {exc.code} {exc.reason}") from exc
        except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", exc)
            raise PromQueryError(f"{request.get_method()} {base!r}: {reason}") from exc
    raise PromQueryError("unreachable")  # pragma: no cover
