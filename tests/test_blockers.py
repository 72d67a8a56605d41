"""Tests for pykured.blockers: kured's TestActiveAlerts and Test_rebootBlocked, and the Prometheus wire
protocol against a real loopback HTTP server (PodBlocker on the real kube-apiserver: ``tests/e2e/``)."""

from __future__ import annotations

import base64
import datetime
import json
import logging
import sys
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

import pytest

from pykured import blockers
from pykured.core.errors import ConfigError, KubeError
from pykured.core.model import Reason
from pykured.gates import settle as gates_settle
from pykured.gocompat.goregexp import compile_re2
from pykured.kube.client import Kube

NOW = datetime.datetime(2026, 1, 1, 0, 0, 0, 500000, tzinfo=datetime.UTC)


def alert(name: str, state: str = "firing", value: str = "1", **labels: str) -> dict[str, Any]:
    metric = {"__name__": "ALERTS", "alertname": name, "alertstate": state, **labels}
    return {"metric": metric, "value": [1767225600.5, value]}


def vector(*samples: dict[str, Any]) -> dict[str, Any]:
    return {"status": "success", "data": {"resultType": "vector", "result": list(samples)}}


KURED_ALERTS = vector(
    alert("GatekeeperViolations"),
    alert("PodCrashing-dev"),
    alert("PodRestart-dev"),
    alert("PrometheusTargetDown"),
    alert("ScheduledRebootFailing", "pending"),
)


# -- a Prometheus query API on 127.0.0.1 ------------------------------------------------------------------


@dataclass
class Seen:
    method: str
    path: str
    content_type: str
    params: dict[str, list[str]]
    authorization: str | None = None


@dataclass
class PromStub:
    url: str = ""
    answer: Any = field(default_factory=lambda: KURED_ALERTS)
    status: int = 200
    post_status: int | None = None  # e.g. 405: POST refused, GET answered
    raw: bytes | None = None
    require_auth: str | None = None  # answer 401 unless the Authorization header is this
    redirect: str | None = None  # answer 302 to this URL
    seen: list[Seen] = field(default_factory=list)


class _Handler(BaseHTTPRequestHandler):
    stub: PromStub

    def log_message(self, fmt: str, *args: Any) -> None:
        return

    def _answer(self, method: str) -> None:
        parts = urllib.parse.urlsplit(self.path)
        if method == "POST":
            length = int(self.headers.get("Content-Length") or 0)
            params = urllib.parse.parse_qs(self.rfile.read(length).decode())
        else:
            params = urllib.parse.parse_qs(parts.query)
        auth = self.headers.get("Authorization")
        self.stub.seen.append(Seen(method, parts.path, self.headers.get("Content-Type") or "", params, auth))
        if self.stub.redirect is not None:
            self.send_response(302)
            self.send_header("Location", self.stub.redirect)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.stub.require_auth is not None and auth != self.stub.require_auth:
            self.send_response(401)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if method == "POST" and self.stub.post_status is not None:
            self.send_response(self.stub.post_status)
            self.end_headers()
            return
        body = self.stub.raw if self.stub.raw is not None else json.dumps(self.stub.answer).encode()
        self.send_response(self.stub.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        self._answer("POST")

    def do_GET(self) -> None:
        self._answer("GET")


class _QuietServer(ThreadingHTTPServer):
    """The stub's server: a client that stops reading an over-long answer (as the bounded reader does) resets
    the connection mid-write, which is what the test wants, not an error to print."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@pytest.fixture
def prom() -> Iterator[PromStub]:
    stub = PromStub()
    handler = type("Handler", (_Handler,), {"stub": stub})
    server = _QuietServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    stub.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield stub
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


# kured's TestActiveAlerts runs on a real Prometheus: tests/e2e/test_blockers.py.


# -- the wire protocol ------------------------------------------------------------------------------------


def test_instant_query_is_a_form_post(prom: PromStub) -> None:
    blockers.PrometheusAlertBlocker(prom.url).check(now=NOW)
    assert prom.seen == [
        Seen(
            "POST",
            "/api/v1/query",
            "application/x-www-form-urlencoded",
            {"query": ["ALERTS"], "time": ["1767225600.5"]},
        )
    ]


@pytest.mark.parametrize("status", [405, 501], ids=["405", "501"])
def test_get_fallback(prom: PromStub, status: int) -> None:
    prom.post_status = status
    reason = blockers.PrometheusAlertBlocker(prom.url).check(now=NOW)
    assert [(s.method, s.params) for s in prom.seen] == [
        ("POST", {"query": ["ALERTS"], "time": ["1767225600.5"]}),
        ("GET", {"query": ["ALERTS"], "time": ["1767225600.5"]}),
    ]
    assert reason is not None
    assert reason.message.startswith("5 active alerts:")


@pytest.mark.parametrize(
    ("status", "answer", "raw", "message"),
    [
        (
            400,
            {"status": "error", "errorType": "bad_data", "error": "parse error"},
            None,
            "prometheus query error: bad_data: parse error",
        ),
        (
            422,
            {"status": "error", "errorType": "execution", "error": "boom"},
            None,
            "prometheus query error: execution: boom",
        ),
        (
            503,
            {"status": "error", "errorType": "unavailable", "error": "down"},
            None,
            "prometheus query error: unavailable: down",
        ),
        (500, None, b"oops", "prometheus query error: server returned HTTP status 500 Internal Server Error"),
        (
            200,
            {"status": "success", "data": {"resultType": "matrix", "result": []}},
            None,
            "prometheus query error: Unexpected value type: matrix",
        ),
        (
            200,
            {"status": "success", "data": {"resultType": "scalar", "result": [1, "1"]}},
            None,
            "prometheus query error: Unexpected value type: scalar",
        ),
        (200, None, b"not json", "prometheus query error: cannot decode Prometheus answer"),
        (
            200,
            {"status": "success", "data": {"resultType": "vector", "result": ["x"]}},
            None,
            "prometheus query error: malformed vector sample",
        ),
    ],
    ids=["400-bad-data", "422-execution", "503", "500-text", "matrix", "scalar", "not-json", "bad-sample"],
)
def test_query_errors_block(
    prom: PromStub, status: int, answer: Any, raw: bytes | None, message: str
) -> None:
    prom.status, prom.answer, prom.raw = status, answer, raw
    reason = blockers.PrometheusAlertBlocker(prom.url).check(now=NOW)
    assert reason is not None
    assert reason.kind == "prometheus"
    assert reason.message.startswith(message)


@pytest.mark.parametrize(
    "url",
    ["not a url", "ftp://127.0.0.1/", "http://", "http://127.0.0.1:notaport", "http://127.0.0.1:1"],
    ids=["garbage", "wrong-scheme", "no-host", "bad-port", "connection-refused"],
)
def test_broken_url_blocks_every_time(url: str) -> None:
    blocker = blockers.PrometheusAlertBlocker(url, timeout=5)
    for _ in range(2):
        reason = blocker.check(now=NOW)
        assert reason is not None
        assert reason.message.startswith("prometheus query error: ")


# -- credentials in the URL: basic auth, never shown ------------------------------------------------------

SECRET = "s3cr%3At-pw"  # percent-encoded in the URL: the password is "s3cr:t-pw"


def with_userinfo(url: str, userinfo: str = f"alice:{SECRET}") -> str:
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{userinfo}@{rest}"


def basic(pair: str) -> str:
    return "Basic " + base64.b64encode(pair.encode()).decode()


@pytest.mark.parametrize(
    ("userinfo", "pair"),
    [(f"alice:{SECRET}", "alice:s3cr:t-pw"), ("bob", "bob:"), ("b%40b:p%40ss@w", "b@b:p@ss@w")],
    ids=["user-and-password", "user-only", "escaped-and-at-in-password"],
)
def test_userinfo_is_sent_as_basic_auth_and_not_in_the_request_url(
    prom: PromStub, userinfo: str, pair: str
) -> None:
    prom.require_auth = basic(pair)
    reason = blockers.PrometheusAlertBlocker(with_userinfo(prom.url, userinfo)).check(now=NOW)
    assert reason is not None
    assert reason.message.startswith("5 active alerts:")
    assert [(s.path, s.authorization) for s in prom.seen] == [("/api/v1/query", basic(pair))]


def test_no_userinfo_sends_no_authorization(prom: PromStub) -> None:
    blockers.PrometheusAlertBlocker(prom.url).check(now=NOW)
    assert [s.authorization for s in prom.seen] == [None]


def test_a_wrong_password_blocks_with_the_status_and_no_password(prom: PromStub) -> None:
    prom.require_auth = basic("alice:other")
    reason = blockers.PrometheusAlertBlocker(with_userinfo(prom.url)).check(now=NOW)
    assert reason == Reason(
        "prometheus", "prometheus query error: server returned HTTP status 401 Unauthorized"
    )


def test_a_redirect_does_not_carry_the_credentials_on(prom: PromStub) -> None:
    target = PromStub()
    handler = type("Handler", (_Handler,), {"stub": target})
    server = _QuietServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        prom.redirect = f"http://127.0.0.1:{server.server_address[1]}/api/v1/query"
        reason = blockers.PrometheusAlertBlocker(with_userinfo(prom.url)).check(now=NOW)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert prom.seen[0].authorization == basic("alice:s3cr:t-pw")
    assert [s.authorization for s in target.seen] == [None]
    assert reason is not None


@pytest.mark.parametrize(
    "scene",
    ["refused", "bad-port", "not-json", "too-deep", "too-large", "500", "400-error", "wrong-password"],
)
def test_no_failure_message_carries_the_password(prom: PromStub, scene: str) -> None:
    url = with_userinfo(prom.url)
    if scene == "refused":
        url = with_userinfo("http://127.0.0.1:1")
    elif scene == "bad-port":
        url = with_userinfo("http://127.0.0.1:port")
    elif scene == "not-json":
        prom.raw = b"<html>" + SECRET.encode()
    elif scene == "too-deep":
        prom.raw = b"[" * 100 + b"]" * 100
    elif scene == "too-large":
        prom.raw = b" " * (blockers.MAX_ANSWER + 1)
    elif scene == "500":
        prom.status, prom.raw = 500, b"boom"
    elif scene == "400-error":
        prom.status = 400
        prom.answer = {"status": "error", "errorType": "bad_data", "error": "x"}
    else:
        prom.require_auth = basic("alice:other")
    reasons = [
        blockers.PrometheusAlertBlocker(url, timeout=5).check(now=NOW),
        gates_settle.PromQueryGate(url, "up", timeout=5).check({}, NOW),
    ]
    for reason in reasons:
        assert reason is not None
        assert "prometheus query error" in reason.message
        assert "s3cr" not in reason.message
        assert "alice" not in reason.message


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"[" * 17 + b"]" * 17, "nested deeper than 16"),
        (b'{"status": "success", "data": {"resultType": "vector", "result": [NaN]}}', "NaN is not JSON"),
        (b"\xff", "not UTF-8"),
        (json.dumps(vector({"metric": {"alertname": ["A"]}, "value": [0, "1"]})).encode(),
         "malformed vector sample"),
        (json.dumps({"status": "error", "errorType": "x" * 2000, "error": 5}).encode(), "x" * 512 + ": "),
    ],
    ids=["deep", "nan", "not-utf8", "non-string-label", "long-error-cut"],
)  # fmt: skip
def test_hostile_answers_block_with_one_bounded_message(prom: PromStub, raw: bytes, message: str) -> None:
    prom.raw = raw
    reason = blockers.PrometheusAlertBlocker(prom.url).check(now=NOW)
    assert reason is not None
    assert message in reason.message
    assert len(reason.message) < 700


def test_a_large_answer_is_refused_by_its_content_length(prom: PromStub) -> None:
    prom.raw = b" " * (blockers.MAX_ANSWER + 1)
    reason = blockers.PrometheusAlertBlocker(prom.url).check(now=NOW)
    assert reason is not None
    assert reason.message.endswith(f"larger than {blockers.MAX_ANSWER} bytes")


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://alice:pw@prom:9090/prometheus?x=1", "http://prom:9090/prometheus"),
        ("http://prom:9090", "http://prom:9090"),
        ("https://a:b@c@prom", "https://prom"),
        ("http://[::1", "<invalid URL>"),
    ],
    ids=["userinfo-and-query-dropped", "plain", "at-in-password", "invalid"],
)
def test_shown_url(url: str, shown: str) -> None:
    assert blockers.shown_url(url) == shown


def test_the_query_target_holds_no_userinfo_and_does_not_show_the_auth() -> None:
    target = blockers.query_endpoint("http://alice:pw@prom:9090/p/")
    assert target.endpoint == "http://prom:9090/p/api/v1/query"
    assert target.authorization == basic("alice:pw")
    assert "pw" not in repr(target)
    assert "cHc" not in repr(target)


def test_no_output_path_carries_the_password(prom: PromStub, caplog: pytest.LogCaptureFixture) -> None:
    """One daemon pass blocked by a failing query with a password in the URL: the log, the Event, the
    Node's annotations (the status ``pykured status``/``plan`` read), the metrics and ``--dump-config``."""
    from pykured.config.startup import parse
    from tests.agent.test_daemon import make_rig

    prom.raw = b"not json"
    url = with_userinfo(prom.url)
    rig = make_rig()
    rig.blocker.check = blockers.PrometheusAlertBlocker(url).check  # type: ignore[method-assign]
    caplog.set_level(logging.DEBUG)
    rig.daemon.run_once()
    assert rig.kube.event_reasons() == ["RebootBlocked"]
    assert prom.seen[0].authorization == basic("alice:s3cr:t-pw")
    outputs = {
        "log": caplog.text,
        "events": json.dumps(rig.kube.events),
        "node": json.dumps(rig.kube.nodes),
        "metrics": rig.metrics.render()[0].decode(),
        "dump-config": json.dumps(
            parse([f"--prometheus-url={url}"], {"KURED_NODE_ID": "n1"}).to_public_dict()
        ),
    }
    assert "prometheus query error" in outputs["events"]
    for where, text in outputs.items():
        for secret in ("s3cr", "t-pw", basic("alice:s3cr:t-pw").split()[1]):
            assert secret not in text, where


# -- pure pieces ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("samples", "regexp", "match_only", "firing_only", "expected"),
    [
        ([alert("A", value="0")], None, False, False, []),
        ([{"metric": {"__name__": "ALERTS"}, "value": [0, "1"]}], None, False, False, []),
        ([alert("B"), alert("A"), alert("B", severity="x")], None, False, False, ["A", "B"]),
        ([alert("A", value="NaN")], None, False, False, ["A"]),
        ([alert("PrometheusTargetDown")], "Down", True, False, ["PrometheusTargetDown"]),
        ([alert("PrometheusTargetDown")], "^Down$", True, False, []),
        ([alert("A", "pending"), alert("A")], None, False, True, ["A"]),
        ([alert("A", value="-1")], None, False, False, ["A"]),
    ],
    ids=[
        "zero-value-ignored",
        "no-alertname-ignored",
        "distinct-sorted",
        "nan-counts",
        "unanchored-search",
        "anchored",
        "firing-only-any-sample",
        "negative-counts",
    ],
)
def test_filter_alerts(
    samples: list[dict[str, Any]],
    regexp: str | None,
    match_only: bool,
    firing_only: bool,
    expected: list[str],
) -> None:
    pattern = compile_re2(regexp) if regexp is not None else None
    got = blockers.filter_alerts(samples, regexp=pattern, match_only=match_only, firing_only=firing_only)
    assert got == expected


@pytest.mark.parametrize(
    ("count", "message"),
    [
        (1, "1 active alerts: [a00]"),
        (10, "10 active alerts: [a00 a01 a02 a03 a04 a05 a06 a07 a08 a09]"),
        (12, "12 active alerts: [a00 a01 a02 a03 a04 a05 a06 a07 a08 a09 ...]"),
    ],
    ids=["one", "ten", "twelve-truncated"],
)
def test_alerts_message(count: int, message: str) -> None:
    assert blockers.alerts_message([f"a{i:02d}" for i in range(count)]) == message


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1767225600.0, "1767225600"),
        (1767225600.5, "1767225600.5"),
        (1.5, "1.5"),
        (1e-7, "0.0000001"),
        (0.0, "0"),
    ],
    ids=["whole", "half", "small", "tiny-no-exponent", "zero"],
)
def test_go_float(value: float, text: str) -> None:
    assert blockers.go_float(value) == text


@pytest.mark.parametrize(
    ("expression", "name", "matches"),
    [
        ("^RebootRequired$", "RebootRequired", True),
        ("(?i)reboot", "RebootRequired", True),
        (r"Required\z", "RebootRequired", True),
        (r"Reboot\z", "RebootRequired", False),
    ],
    ids=["anchored", "case-insensitive-flag", "re2-end-of-text", "re2-end-of-text-no-match"],
)
def test_compile_alert_filter(expression: str, name: str, matches: bool) -> None:
    assert (blockers.compile_alert_filter(expression).search(name) is not None) is matches


@pytest.mark.parametrize(
    "expression",
    ["*", "(?=x)", "(?!x)", "(?<=x)y", r"(a)\1", "("],
    ids=["star", "la", "nla", "lb", "backref", "paren"],
)
def test_compile_alert_filter_rejects_what_re2_rejects(expression: str) -> None:
    with pytest.raises(ConfigError, match="--alert-filter-regexp"):
        blockers.compile_alert_filter(expression)


# -- kured's Test_rebootBlocked -----------------------------------------------------------------------------


@dataclass
class FixedBlocker:
    blocked: bool
    name: str = "fixed"
    calls: list[datetime.datetime] = field(default_factory=list)

    def check(self, *, now: datetime.datetime) -> Reason | None:
        self.calls.append(now)
        return Reason(self.name, f"{self.name} blocks") if self.blocked else None


@pytest.mark.parametrize(
    ("make", "expected_kind"),
    [
        (list, None),
        (lambda: [FixedBlocker(True)], "fixed"),
        (lambda: [FixedBlocker(False)], None),
        (lambda: [FixedBlocker(False), FixedBlocker(True, "second")], "second"),
        (lambda: [blockers.PrometheusAlertBlocker("http://127.0.0.1:1/broken", timeout=5)], "prometheus"),
    ],
    ids=["no-blockers", "blocker", "non-blocker", "one-of-two", "prometheus-broken-url"],
)
def test_reboot_blocked(make: Callable[[], list[blockers.Blocker]], expected_kind: str | None) -> None:
    reason = blockers.first_block(make(), now=NOW)
    assert (reason.kind if reason else None) == expected_kind


def test_first_block_wins_and_stops() -> None:
    first, second = FixedBlocker(True, "first"), FixedBlocker(True, "second")
    assert blockers.first_block([first, second], now=NOW) == Reason("first", "first blocks")
    assert (len(first.calls), len(second.calls)) == (1, 0)


# -- PodBlocker: the query, without a cluster ---------------------------------------------------------------


@dataclass
class ListingKube:
    answers: list[Any]
    calls: list[dict[str, Any]] = field(default_factory=list)

    def list_pods(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def pods(*names: str, more: bool = False) -> dict[str, Any]:
    return {
        "items": [{"metadata": {"name": n}} for n in names],
        "metadata": {"continue": "t" if more else ""},
    }


def test_pod_query_parameters() -> None:
    kube = ListingKube([pods(), pods()])
    assert (
        blockers.PodBlocker(cast(Kube, kube), node="n1", selectors=["app=a", "app=b,tier=x"]).check(now=NOW)
        is None
    )
    field_selector = "spec.nodeName=n1,status.phase!=Succeeded,status.phase!=Failed,status.phase!=Unknown"
    assert kube.calls == [
        {"field_selector": field_selector, "label_selector": "app=a", "limit": 10},
        {"field_selector": field_selector, "label_selector": "app=b,tier=x", "limit": 10},
    ]


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        ([pods("p1", "p2")], "matching pods: [p1 p2]"),
        (
            [pods(*(f"p{i}" for i in range(10)), more=True)],
            "matching pods: [p0 p1 p2 p3 p4 p5 p6 p7 p8 p9 ...]",
        ),
        ([pods(), pods("late")], "matching pods: [late]"),
        (
            [KubeError("pods is forbidden (HTTP 403)", status=403)],
            "pod query error: pods is forbidden (HTTP 403)",
        ),
    ],
    ids=["two-pods", "continue-token", "second-selector", "error-blocks"],
)
def test_pod_blocker_messages(answers: list[Any], message: str) -> None:
    reason = blockers.PodBlocker(cast(Kube, ListingKube(answers)), node="n1", selectors=["a=1", "b=2"]).check(
        now=NOW
    )
    assert reason == Reason("pods", message)


# -- NodeMarkBlocker: the pure check ------------------------------------------------------------------------

HOLD = blockers.NodeMark("example.com/hold")
TIER_DB = blockers.NodeMark("tier", "db")


@pytest.mark.parametrize(
    ("labels", "annotations", "message"),
    [
        ({}, {}, None),
        ({"example.com/hold": ""}, {}, "node has blocking label example.com/hold"),
        ({"example.com/hold": "anything"}, {}, "node has blocking label example.com/hold"),
        ({"tier": "db"}, {}, "node has blocking label tier=db"),
        ({"tier": "web"}, {}, None),
        ({}, {"example.com/hold": "x"}, None),  # a label mark does not match an annotation
        ({}, {"ops/why": "disk"}, "node has blocking annotation ops/why=disk"),
        ({}, {"ops/why": "other"}, None),
        ({"tier": "db"}, {"ops/why": "disk"}, "node has blocking label tier=db"),
    ],
    ids=["none", "key-empty-value", "key-any-value", "key-value", "value-mismatch", "wrong-kind",
         "annotation", "annotation-mismatch", "label-first"],
)  # fmt: skip
def test_node_marks_block(labels: dict[str, str], annotations: dict[str, str], message: str | None) -> None:
    reason = blockers.node_marks_block(
        labels=labels,
        annotations=annotations,
        blocking_labels=[HOLD, TIER_DB],
        blocking_annotations=[blockers.NodeMark("ops/why", "disk")],
    )
    assert reason == (Reason("node", message) if message else None)


@pytest.mark.parametrize(
    ("text", "flag", "mark"),
    [
        ("hold", "blocking-node-label", blockers.NodeMark("hold")),
        ("example.com/hold=yes", "blocking-node-label", blockers.NodeMark("example.com/hold", "yes")),
        ("hold=", "blocking-node-label", blockers.NodeMark("hold", "")),
        ("ops/why=a=b c", "blocking-node-annotation", blockers.NodeMark("ops/why", "a=b c")),
    ],
)
def test_node_mark_parse(text: str, flag: str, mark: blockers.NodeMark) -> None:
    assert blockers.NodeMark.parse(text, flag=flag) == mark
    assert str(mark) == text


@pytest.mark.parametrize(
    "text",
    [
        "",
        "=v",
        "/k",
        "a/b/c",
        "UPPER.com/k",
        "k_",
        "-k",
        "k" * 64,
        ("a" * 254) + "/k",
        "k=v/w",
        "k=-v",
        "k=a b",
    ],
)
def test_node_mark_parse_refuses(text: str) -> None:
    with pytest.raises(ConfigError, match=r"^invalid --blocking-node-label ") as info:
        blockers.NodeMark.parse(text, flag="blocking-node-label")
    assert info.value.exit_code == 1


class _Kube:
    def __init__(self, obj: Any = None, error: KubeError | None = None) -> None:
        self.obj, self.error, self.gets = obj, error, 0

    def get_node(self, name: str) -> Any:
        self.gets += 1
        if self.error is not None:
            raise self.error
        return self.obj


def test_node_mark_blocker_reads_the_view_it_is_given_else_gets() -> None:
    node = {"metadata": {"name": "n1", "labels": {"example.com/hold": "1"}}}
    kube = _Kube(obj={"metadata": {"labels": {}}})
    viewed = blockers.NodeMarkBlocker(
        cast(Kube, kube), "n1", labels=[HOLD], annotations=[], read=lambda: node
    )
    assert viewed.check(now=NOW) == Reason("node", "node has blocking label example.com/hold")
    assert kube.gets == 0
    fetched = blockers.NodeMarkBlocker(cast(Kube, kube), "n1", labels=[HOLD], annotations=[])
    assert fetched.check(now=NOW) is None and kube.gets == 1


@pytest.mark.parametrize(
    "obj",
    [
        {},
        {"metadata": None},
        {"metadata": {"labels": ["example.com/hold"]}},
        {"metadata": {"labels": {"example.com/hold": 1}}},
    ],
)
def test_node_mark_blocker_reads_a_malformed_node_as_unmarked(obj: Any) -> None:
    blocker = blockers.NodeMarkBlocker(
        cast(Kube, _Kube()), "n1", labels=[HOLD], annotations=[], read=lambda: obj
    )
    assert blocker.check(now=NOW) is None


def test_node_mark_blocker_blocks_when_the_node_cannot_be_read() -> None:
    kube = _Kube(error=KubeError("forbidden"))
    blocker = blockers.NodeMarkBlocker(cast(Kube, kube), "n1", labels=[HOLD], annotations=[])
    reason = blocker.check(now=NOW)
    assert reason is not None and reason.kind == "node"
    assert reason.message == "cannot read node n1 to check its blocking labels: forbidden"
