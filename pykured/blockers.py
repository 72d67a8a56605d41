"""Reboot blockers: reasons not to reboot right now, evaluated in order, first one wins.

Mirrors kured's ``pkg/blockers``. Each blocker answers ``check(now=...) -> Reason | None``; the daemon logs
``Reboot blocked: <reason.message>`` and skips the iteration. Errors block too (fail safe).

* :class:`PrometheusAlertBlocker` (``--prometheus-url``): instant query ``ALERTS`` at ``now`` against
  ``<url>/api/v1/query`` the way client_golang sends it — POST form, GET fallback on 405/501. Samples with an
  ``alertname`` and a non-zero value count, filtered by :func:`filter_alerts` (``--alert-filter-regexp``,
  ``--alert-filter-match-only``, ``--alert-firing-only``). Message ``<n> active alerts: [a b …]`` (ten names,
  then ``...``); any query failure is ``prometheus query error: <err>``. The filters (:func:`keep_alert`), the
  message and the HTTP plumbing (:func:`api_target`, :func:`opener_for`, :func:`read_answer`) serve
  ``--alertmanager-url`` too (:mod:`pykured.alertmanager`).
* :class:`PodBlocker` (``--blocking-pod-selector``, repeatable = OR, commas = AND): pods on this node that are
  not Succeeded/Failed/Unknown; message ``matching pods: [names…]`` (plus ``...`` when more exist), errors
  ``pod query error: <err>``.
* :class:`NodeMarkBlocker` (pykured: ``--blocking-node-label``, ``--blocking-node-annotation``, repeatable,
  ``key`` or ``key=value``): the node's own Node carries a matching label or annotation; message
  ``node has blocking label <key[=value]>``.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import http.client
import ipaddress
import logging
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from pykured.core import boundedjson
from pykured.core.errors import ConfigError, KubeError, PykuredError
from pykured.core.model import Reason
from pykured.gocompat.goflags import GoValueError
from pykured.gocompat.goregexp import GoRegexp, compile_re2
from pykured.kube.api import KubeApi

logger = logging.getLogger(__name__)

MAX_LISTED = 10
"""kured lists at most ten alert or pod names, then ``...``."""

POD_FIELD_SELECTOR = "spec.nodeName={node},status.phase!=Succeeded,status.phase!=Failed,status.phase!=Unknown"


class Blocker(Protocol):
    """One reason not to reboot; ``None`` means "not blocked"."""

    def check(self, *, now: datetime.datetime) -> Reason | None: ...


def first_block(blockers: Iterable[Blocker], *, now: datetime.datetime) -> Reason | None:
    """kured's ``RebootBlocked``: ask each blocker in order and stop at the first block."""
    for blocker in blockers:
        reason = blocker.check(now=now)
        if reason is not None:
            return reason
    return None


def go_list(items: Sequence[str]) -> str:
    """Go's ``%v`` of a ``[]string``: ``[a b c]``."""
    return "[" + " ".join(items) + "]"


# -- Prometheus ---------------------------------------------------------------------------------------------


def compile_alert_filter(expression: str) -> GoRegexp:
    """Compile ``--alert-filter-regexp`` as Go RE2 (:func:`pykured.gocompat.goregexp.compile_re2`).

    An expression Go rejects raises :class:`~pykured.core.errors.ConfigError` with Go's error, as kured's flag
    parser rejects it at startup.
    """
    try:
        return compile_re2(expression)
    except GoValueError as exc:
        raise ConfigError(f'invalid argument "{expression}" for "--alert-filter-regexp" flag: {exc}') from exc


def filter_alerts(
    samples: Iterable[Mapping[str, Any]],
    *,
    regexp: GoRegexp | None,
    match_only: bool,
    firing_only: bool,
) -> list[str]:
    """Distinct sorted names of the alerts that block, from Prometheus vector samples.

    A sample counts when it has an ``alertname`` label and a value ≠ 0; then, if ``regexp`` is set, when
    ``regexp.search(name)`` equals ``match_only``; and, with ``firing_only``, when ``alertstate == "firing"``.
    """
    names: set[str] = set()
    for sample in samples:
        metric = sample.get("metric") or {}
        name = metric.get("alertname")
        if name is None or _sample_value(sample) == 0:
            continue
        state = metric.get("alertstate")
        if keep_alert(
            str(name), alertstate=state, regexp=regexp, match_only=match_only, firing_only=firing_only
        ):
            names.add(str(name))
    return sorted(names)


def keep_alert(
    name: str, *, alertstate: str | None, regexp: GoRegexp | None, match_only: bool, firing_only: bool
) -> bool:
    """kured's filters on one alert: ``--alert-filter-regexp`` (with ``--alert-filter-match-only``) on its
    name, ``--alert-firing-only`` on its ``alertstate``. Every alert source (Prometheus' ``ALERTS``,
    Alertmanager's alerts) goes through this one function."""
    if regexp is not None and (regexp.search(name) is not None) != match_only:
        return False
    return not (firing_only and alertstate != "firing")


def _sample_value(sample: Mapping[str, Any]) -> float:
    value = sample.get("value")
    try:
        return float(value[1]) if isinstance(value, list | tuple) and len(value) == 2 else float("nan")
    except (TypeError, ValueError):
        return float("nan")


def alerts_message(names: Sequence[str]) -> str:
    """``<n> active alerts: [first ten ...]``."""
    shown = list(names[:MAX_LISTED]) + (["..."] if len(names) > MAX_LISTED else [])
    return f"{len(names)} active alerts: {go_list(shown)}"


def _valid_sample(sample: Any) -> bool:
    """A vector sample as the filter reads it: a ``metric`` object whose labels are strings."""
    if not isinstance(sample, dict):
        return False
    metric = sample.get("metric", {})
    return isinstance(metric, dict) and all(isinstance(v, str) for v in metric.values())


class PrometheusAlertBlocker:
    """Blocks while Prometheus reports active alerts (see the module docstring)."""

    def __init__(
        self,
        url: str,
        *,
        filter_regexp: str | None = None,
        match_only: bool = False,
        firing_only: bool = False,
        timeout: float = 10,
    ) -> None:
        self._url = url
        self._regexp = compile_alert_filter(filter_regexp) if filter_regexp is not None else None
        self._match_only = match_only
        self._firing_only = firing_only
        self._timeout = timeout

    def active_alerts(self, *, now: datetime.datetime) -> list[str]:
        """The blocking alert names; raises :class:`PromQueryError` on any failure."""
        result_type, result = instant_query(self._url, "ALERTS", at=now.timestamp(), timeout=self._timeout)
        if result_type != "vector" or not isinstance(result, list):
            raise PromQueryError(f"Unexpected value type: {result_type}")
        if not all(_valid_sample(sample) for sample in result):
            raise PromQueryError("malformed vector sample")
        return filter_alerts(
            result, regexp=self._regexp, match_only=self._match_only, firing_only=self._firing_only
        )

    def check(self, *, now: datetime.datetime) -> Reason | None:
        try:
            names = self.active_alerts(now=now)
        except PromQueryError as exc:
            return Reason("prometheus", f"prometheus query error: {exc}")
        return Reason("prometheus", alerts_message(names)) if names else None


# -- Prometheus HTTP API (what client_golang's v1.API.Query sends) ------------------------------------------


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


# -- Pods ---------------------------------------------------------------------------------------------------


class PodBlocker:
    """Blocks while a pod matching any selector is Pending or Running on this node."""

    def __init__(self, kube: KubeApi, *, node: str, selectors: Sequence[str]) -> None:
        self._kube = kube
        self.node = node
        self.selectors = list(selectors)

    def check(self, *, now: datetime.datetime) -> Reason | None:
        field_selector = POD_FIELD_SELECTOR.format(node=self.node)
        for selector in self.selectors:
            try:
                pods = self._kube.list_pods(
                    field_selector=field_selector, label_selector=selector, limit=MAX_LISTED
                )
            except KubeError as exc:
                return Reason("pods", f"pod query error: {exc}")
            items = pods.get("items") or []
            if items:
                names = [str(item.get("metadata", {}).get("name", "")) for item in items]
                if (pods.get("metadata") or {}).get("continue"):
                    names.append("...")
                return Reason("pods", f"matching pods: {go_list(names)}")
        return None


# -- The node's own labels and annotations ------------------------------------------------------------------

MAX_KEY_NAME = 63
MAX_KEY_PREFIX = 253
_NAME_RE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_PREFIX_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def key_error(key: str) -> str | None:
    """Why ``key`` is not a Kubernetes label or annotation key (a qualified name: an optional DNS-subdomain
    prefix and ``/``, then a name of at most 63 characters; Kubernetes' "Labels and Selectors" syntax), or
    None."""
    prefix, slash, name = key.rpartition("/")
    if slash and not prefix:
        return "empty prefix"
    if slash and (len(prefix) > MAX_KEY_PREFIX or _PREFIX_RE.fullmatch(prefix) is None):
        return f"prefix {prefix!r} is not a DNS subdomain"
    if not name:
        return "empty key"
    if len(name) > MAX_KEY_NAME or _NAME_RE.fullmatch(name) is None:
        return (
            f"name {name!r} must be at most {MAX_KEY_NAME} alphanumeric characters, '-', '_' or '.', "
            "starting and ending with an alphanumeric character"
        )
    return None


@dataclasses.dataclass(frozen=True, slots=True)
class NodeMark:
    """One ``--blocking-node-label`` or ``--blocking-node-annotation``: ``key`` (any value) or
    ``key=value``."""

    key: str
    value: str | None = None

    @classmethod
    def parse(cls, text: str, *, flag: str) -> NodeMark:
        """``key`` or ``key=value``; a bad key (or, for a label, a bad value) is a :class:`ConfigError`."""
        key, eq, value = text.partition("=")
        error = key_error(key)
        if error is None and eq and flag == "blocking-node-label" and value:
            valid = "/" not in value and key_error(value) is None
            error = None if valid else f"label value {value!r} is not a valid label value"
        if error is not None:
            raise ConfigError(f"invalid --{flag} {text!r}: {error}", exit_code=1)
        return cls(key, value if eq else None)

    def matches(self, found: Mapping[str, str]) -> bool:
        return self.key in found and (self.value is None or found[self.key] == self.value)

    def __str__(self) -> str:
        return self.key if self.value is None else f"{self.key}={self.value}"


def node_marks_block(
    *,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    blocking_labels: Sequence[NodeMark],
    blocking_annotations: Sequence[NodeMark],
) -> Reason | None:
    """The pure check: the first blocking label, then annotation, the Node carries (in flag order)."""
    for kind, marks, found in (
        ("label", blocking_labels, labels),
        ("annotation", blocking_annotations, annotations),
    ):
        for mark in marks:
            if mark.matches(found):
                return Reason("node", f"node has blocking {kind} {mark}")
    return None


def _string_map(value: Any) -> dict[str, str]:
    """A Node's labels or annotations as read from the API: anything but a string map is empty."""
    if not isinstance(value, dict):
        return {}
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}


class NodeMarkBlocker:
    """Blocks ``node``'s new reboots while its Node carries a blocking label or annotation.

    ``read`` reads the Node (for the agent's own, the view its pass already has); without it, a GET. A Node
    that cannot be read blocks (fail safe)."""

    def __init__(
        self,
        kube: KubeApi,
        node: str,
        *,
        labels: Sequence[NodeMark],
        annotations: Sequence[NodeMark],
        read: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        self._kube = kube
        self.node = node
        self.labels = tuple(labels)
        self.annotations = tuple(annotations)
        self._read = read

    def check(self, *, now: datetime.datetime) -> Reason | None:
        try:
            obj = self._read() if self._read is not None else self._kube.get_node(self.node)
        except KubeError as exc:
            return Reason("node", f"cannot read node {self.node} to check its blocking labels: {exc}")
        metadata = obj.get("metadata") if isinstance(obj, dict) else None
        metadata = metadata if isinstance(metadata, dict) else {}
        return node_marks_block(
            labels=_string_map(metadata.get("labels")),
            annotations=_string_map(metadata.get("annotations")),
            blocking_labels=self.labels,
            blocking_annotations=self.annotations,
        )
