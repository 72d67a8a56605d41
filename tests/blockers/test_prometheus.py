"""Tests for pykured.blockers.prometheus: the Prometheus wire protocol against a real loopback HTTP server
(kured's TestActiveAlerts on a real Prometheus: ``tests/e2e/test_blockers.py``)."""

from __future__ import annotations

import base64
import datetime
import json
import logging
import sys
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from pykured.alerts.client import MAX_ANSWER
from pykured.blockers.prometheus import PrometheusAlertBlocker
from pykured.core.model import Reason
from pykured.gates import settle as gates_settle

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
    PrometheusAlertBlocker(prom.url).check(now=NOW)
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
    reason = PrometheusAlertBlocker(prom.url).check(now=NOW)
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
    reason = PrometheusAlertBlocker(prom.url).check(now=NOW)
    assert reason is not None
    assert reason.kind == "prometheus"
    assert reason.message.startswith(message)


@pytest.mark.parametrize(
    "url",
    ["not a url", "ftp://127.0.0.1/", "http://", "http://127.0.0.1:notaport", "http://127.0.0.1:1"],
    ids=["garbage", "wrong-scheme", "no-host", "bad-port", "connection-refused"],
)
def test_broken_url_blocks_every_time(url: str) -> None:
    blocker = PrometheusAlertBlocker(url, timeout=5)
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
    reason = PrometheusAlertBlocker(with_userinfo(prom.url, userinfo)).check(now=NOW)
    assert reason is not None
    assert reason.message.startswith("5 active alerts:")
    assert [(s.path, s.authorization) for s in prom.seen] == [("/api/v1/query", basic(pair))]


def test_no_userinfo_sends_no_authorization(prom: PromStub) -> None:
    PrometheusAlertBlocker(prom.url).check(now=NOW)
    assert [s.authorization for s in prom.seen] == [None]


def test_a_wrong_password_blocks_with_the_status_and_no_password(prom: PromStub) -> None:
    prom.require_auth = basic("alice:other")
    reason = PrometheusAlertBlocker(with_userinfo(prom.url)).check(now=NOW)
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
        reason = PrometheusAlertBlocker(with_userinfo(prom.url)).check(now=NOW)
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
        prom.raw = b" " * (MAX_ANSWER + 1)
    elif scene == "500":
        prom.status, prom.raw = 500, b"boom"
    elif scene == "400-error":
        prom.status = 400
        prom.answer = {"status": "error", "errorType": "bad_data", "error": "x"}
    else:
        prom.require_auth = basic("alice:other")
    reasons = [
        PrometheusAlertBlocker(url, timeout=5).check(now=NOW),
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
    reason = PrometheusAlertBlocker(prom.url).check(now=NOW)
    assert reason is not None
    assert message in reason.message
    assert len(reason.message) < 700


def test_a_large_answer_is_refused_by_its_content_length(prom: PromStub) -> None:
    prom.raw = b" " * (MAX_ANSWER + 1)
    reason = PrometheusAlertBlocker(prom.url).check(now=NOW)
    assert reason is not None
    assert reason.message.endswith(f"larger than {MAX_ANSWER} bytes")


def test_no_output_path_carries_the_password(prom: PromStub, caplog: pytest.LogCaptureFixture) -> None:
    """One daemon pass blocked by a failing query with a password in the URL: the log, the Event, the
    Node's annotations (the status ``pykured status``/``plan`` read), the metrics and ``--dump-config``."""
    from pykured.config.startup import parse
    from tests.agent.test_daemon import make_rig

    prom.raw = b"not json"
    url = with_userinfo(prom.url)
    rig = make_rig()
    rig.blocker.check = PrometheusAlertBlocker(url).check  # type: ignore[method-assign]
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
