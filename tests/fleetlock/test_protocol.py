"""FleetLock wire protocol: routing, header, body parsing, replies — pure, and over a real loopback socket."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pykured.fleetlock import protocol as p
from pykured.fleetlock.server import _Server, is_loopback

# The body exactly as Zincati serializes it (serde_json::to_string_pretty, id then group): §1.3.
ZINCATI_BODY = (
    b'{\n  "client_params": {\n    "id": "e0f3745b108f471cbd4883c6fbed8cdd",\n'
    b'    "group": "mock-workers"\n  }\n}'
)
EXAMPLE_BODY = b'{"client_params":{"id":"c988d2509fdf5cdcbed39037c56406fb","group":"default"}}'


# -- pure ------------------------------------------------------------------------------------------------

ROUTES = [
    ("root-pre", "POST", "/v1/pre-reboot", "/", p.Api.PRE_REBOOT),
    ("root-steady", "POST", "/v1/steady-state", "/", p.Api.STEADY_STATE),
    ("trailing-slash", "POST", "/v1/pre-reboot/", "/", p.Api.PRE_REBOOT),
    ("query", "POST", "/v1/steady-state?x=1", "/", p.Api.STEADY_STATE),
    ("prefix", "POST", "/fleet_lock/v1/pre-reboot", "/fleet_lock/", p.Api.PRE_REBOOT),
    ("prefix-no-slash-config", "POST", "/fleet_lock/v1/pre-reboot", "fleet_lock", p.Api.PRE_REBOOT),
    ("group-prefix", "POST", "/workers/v1/steady-state", "/workers", p.Api.STEADY_STATE),
    ("missing-prefix", "POST", "/v1/pre-reboot", "/fleet_lock/", p.NOT_FOUND),
    ("base-url-without-slash", "POST", "/v1/pre-reboot", "/fleet_lock", p.NOT_FOUND),
    ("unknown-endpoint", "POST", "/v1/reboot", "/", p.NOT_FOUND),
    ("v2", "POST", "/v2/pre-reboot", "/", p.NOT_FOUND),
    ("get", "GET", "/v1/pre-reboot", "/", p.METHOD_NOT_ALLOWED),
    ("put", "PUT", "/v1/steady-state", "/", p.METHOD_NOT_ALLOWED),
    ("lowercase-post", "post", "/v1/steady-state", "/", p.METHOD_NOT_ALLOWED),
]


@pytest.mark.parametrize(
    ("method", "target", "base", "expected"), [r[1:] for r in ROUTES], ids=[r[0] for r in ROUTES]
)
def test_route(method: str, target: str, base: str, expected: object) -> None:
    routed = p.route(method, target, base=base)
    if isinstance(expected, p.Api):
        assert routed is expected
    else:
        assert isinstance(routed, p.Reply) and routed.kind == expected


@pytest.mark.parametrize(
    ("base", "expected"),
    [("", "/"), ("/", "/"), ("a", "/a/"), ("/a/b/", "/a/b/"), ("//a//", "/a/")],
    ids=["empty", "slash", "bare", "nested", "doubled"],
)
def test_normalize_base(base: str, expected: str) -> None:
    assert p.normalize_base(base) == expected


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("true", True),
        ("True", True),
        (" true ", True),
        ("false", False),
        ("", False),
        ("1", False),
        (None, False),
    ],
    ids=["true", "True", "spaces", "false", "empty", "one", "absent"],
)
def test_header(value: str | None, ok: bool) -> None:
    reply = p.check_header(value)
    assert (reply is None) is ok
    if reply is not None:
        assert reply.kind == p.MISSING_HEADER and reply.status == 400


BODIES = [
    ("zincati-pretty", ZINCATI_BODY, ("e0f3745b108f471cbd4883c6fbed8cdd", "mock-workers")),
    ("example", EXAMPLE_BODY, ("c988d2509fdf5cdcbed39037c56406fb", "default")),
    ("group-first", b'{"client_params":{"group":"a.b-1","id":"x"}}', ("x", "a.b-1")),
    ("extra-keys", b'{"client_params":{"id":"x","group":"g","z":1},"more":[]}', ("x", "g")),
    ("bom-less-utf8-id", '{"client_params":{"id":"é","group":"g"}}'.encode(), ("é", "g")),
    ("empty", b"", p.INVALID_REQUEST),
    ("not-json", b"id=x&group=g", p.INVALID_REQUEST),
    ("latin1", b'{"client_params":{"id":"\xe9","group":"g"}}', p.INVALID_REQUEST),
    ("array", b"[]", p.INVALID_REQUEST),
    ("no-params", b'{"id":"x","group":"g"}', p.INVALID_REQUEST),
    ("params-string", b'{"client_params":"x"}', p.INVALID_REQUEST),
    ("id-missing", b'{"client_params":{"group":"g"}}', p.INVALID_REQUEST),
    ("id-empty", b'{"client_params":{"id":"","group":"g"}}', p.INVALID_REQUEST),
    ("id-number", b'{"client_params":{"id":1,"group":"g"}}', p.INVALID_REQUEST),
    ("group-empty", b'{"client_params":{"id":"x","group":""}}', p.INVALID_REQUEST),
    ("group-slash", b'{"client_params":{"id":"x","group":"a/b"}}', p.INVALID_REQUEST),
    ("group-space", b'{"client_params":{"id":"x","group":"a b"}}', p.INVALID_REQUEST),
    ("group-underscore", b'{"client_params":{"id":"x","group":"a_b"}}', p.INVALID_REQUEST),
    ("group-newline", b'{"client_params":{"id":"x","group":"ab\\n"}}', p.INVALID_REQUEST),
    ("group-unicode-digit", '{"client_params":{"id":"x","group":"a١"}}'.encode(), p.INVALID_REQUEST),
    (
        "id-too-long",
        json.dumps({"client_params": {"id": "x" * 300, "group": "g"}}).encode(),
        p.INVALID_REQUEST,
    ),
    ("deep", b"[" * 100_000 + b"]" * 100_000, p.REQUEST_TOO_LARGE),
    ("deep-small", b'{"client_params":' + b"[" * 30_000 + b"]" * 30_000 + b"}", p.INVALID_REQUEST),
    ("five-levels", b'{"client_params":{"id":"x","group":"g","z":[[[1]]]}}', p.INVALID_REQUEST),
    ("four-levels", b'{"client_params":{"id":"x","group":"g","z":[[1]]}}', ("x", "g")),
    ("nan", b'{"client_params":{"id":"x","group":"g","z":NaN}}', p.INVALID_REQUEST),
]


@pytest.mark.parametrize(("body", "expected"), [b[1:] for b in BODIES], ids=[b[0] for b in BODIES])
def test_parse_body(body: bytes, expected: object) -> None:
    parsed = p.parse_body(p.Api.PRE_REBOOT, body)
    if isinstance(expected, tuple):
        assert parsed == p.Request(p.Api.PRE_REBOOT, *expected)
    else:
        assert isinstance(parsed, p.Reply) and parsed.kind == expected and 400 <= parsed.status < 500


@given(st.binary(max_size=512))
def test_parse_body_never_raises(body: bytes) -> None:
    parsed = p.parse_body(p.Api.STEADY_STATE, body)
    assert isinstance(parsed, p.Request) or 400 <= parsed.status < 500


@pytest.mark.parametrize(
    ("length", "kind"),
    [
        (None, p.INVALID_REQUEST),
        ("x", p.INVALID_REQUEST),
        ("-1", p.INVALID_REQUEST),
        ("٣", p.INVALID_REQUEST),
        (str(p.MAX_BODY + 1), p.REQUEST_TOO_LARGE),
        (str(p.MAX_BODY), None),
        ("0", None),
    ],
    ids=["absent", "text", "negative", "arabic-digit", "too-large", "max", "zero"],
)
def test_check_length(length: str | None, kind: str | None) -> None:
    reply = p.check_length(length)
    assert (reply.kind if reply else None) == kind


def test_reply_kinds_are_bounded_and_mapped() -> None:
    assert set(p.STATUS) == p.KINDS
    assert all(
        status < 500
        for kind, status in p.STATUS.items()
        if kind not in (p.DRAIN_FAILED, p.NODE_NOT_READY, p.INTERNAL_ERROR)
    )
    assert {p.STATUS[k] for k in (p.DRAIN_IN_PROGRESS, p.LOCK_HELD, p.OUTSIDE_WINDOW, p.BLOCKED)} == {423}
    assert [k for k, s in p.STATUS.items() if 200 <= s < 300] == [p.OK]
    with pytest.raises(ValueError):
        p.Reply("made_up", "x")


def test_reply_body_is_kind_value_json() -> None:
    reply = p.Reply(p.LOCK_HELD, "reboot lock held by: n1")
    assert json.loads(reply.body()) == {"kind": "lock_held", "value": "reboot lock held by: n1"}
    assert json.loads(p.Reply(p.INTERNAL_ERROR, "").body())["value"] == "internal_error"


@pytest.mark.parametrize(
    ("served", "group", "ok"),
    [("default", "default", True), ("default", "workers", False), ("", "workers", True), ("*", "x", True)],
    ids=["same", "other", "any-empty", "any-star"],
)
def test_check_group(served: str, group: str, ok: bool) -> None:
    reply = p.check_group(p.Request(p.Api.PRE_REBOOT, "x", group), served=served)
    assert (reply is None) is ok
    if reply is not None:
        assert reply.kind == p.UNKNOWN_GROUP and reply.status == 400


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.1.2.3", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("", False),
        ("10.0.0.1", False),
        ("::", False),
        ("example.com", False),
    ],
    ids=["v4", "v4-net", "v6", "v6-brackets", "name", "any", "empty", "private", "v6-any", "dns"],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


# -- over a socket ---------------------------------------------------------------------------------------


class RecordingService:
    """Stands in for FleetLockService: records parsed requests, answers ``reply``."""

    def __init__(self) -> None:
        self.requests: list[p.Request] = []
        self.peers: list[str] = []
        self.reply = p.ok("done")

    def handle(self, request: p.Request, *, peer: str) -> p.Reply:
        self.requests.append(request)
        self.peers.append(peer)
        return self.reply


class Counting:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def fleetlock_request(self, api: str, kind: str) -> None:
        self.seen.append((api, kind))


Served = tuple[_Server, RecordingService, Counting]


@pytest.fixture
def served() -> Iterator[Served]:
    service = RecordingService()
    metrics = Counting()
    server = _Server(("127.0.0.1", 0), service=service, base="/base/", metrics=metrics)  # type: ignore[arg-type]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server, service, metrics
    finally:
        server.shutdown()
        server.server_close()


def raw_request(port: int, data: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send raw bytes, read one HTTP response."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        response = http.client.HTTPResponse(sock)
        response.begin()
        return response.status, dict(response.getheaders()), response.read()


def zincati_request(path: str, body: bytes = ZINCATI_BODY, *, header: bool = True) -> bytes:
    """The request as reqwest sends it for Zincati: POST, the header, a body, no Content-Type."""
    lines = [f"POST {path} HTTP/1.1", "host: 127.0.0.1", "accept: */*"]
    if header:
        lines.append("fleet-lock-protocol: true")
    lines.append(f"content-length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


@pytest.mark.parametrize("api", ["pre-reboot", "steady-state"], ids=["pre-reboot", "steady-state"])
def test_zincati_request_exact_bytes(served: Served, api: str) -> None:
    server, service, metrics = served
    status, headers, body = raw_request(server.server_address[1], zincati_request(f"/base/v1/{api}"))
    assert status == 200
    assert headers["Content-Type"] == "application/json"
    assert json.loads(body)["kind"] == "ok"
    assert service.requests == [p.Request(p.Api(api), "e0f3745b108f471cbd4883c6fbed8cdd", "mock-workers")]
    assert service.peers == ["127.0.0.1"]  # the TCP peer, for the service's address check
    assert metrics.seen == [(api, "ok")]


def test_a_refusal_is_403_and_echoes_nothing(served: Served) -> None:
    server, service, metrics = served
    service.reply = p.Reply(p.FORBIDDEN, "the caller's address is not an address of the node it names")
    status, _, body = raw_request(server.server_address[1], zincati_request("/base/v1/steady-state"))
    assert status == 403
    assert json.loads(body)["kind"] == "forbidden"
    assert b"e0f3745b" not in body and b"mock-workers" not in body
    assert metrics.seen == [("steady-state", "forbidden")]


def test_service_error_is_passed_through(served: Served) -> None:
    server, service, _ = served
    service.reply = p.Reply(p.DRAIN_IN_PROGRESS, "node n is draining")
    status, _, body = raw_request(server.server_address[1], zincati_request("/base/v1/pre-reboot"))
    assert status == 423
    assert json.loads(body) == {"kind": "drain_in_progress", "value": "node n is draining"}


POST_HEAD = b"POST /base/v1/pre-reboot HTTP/1.1\r\nfleet-lock-protocol: true\r\n"
HTTP_ERRORS = [
    ("missing-header", zincati_request("/base/v1/pre-reboot", header=False), 400, p.MISSING_HEADER),
    ("wrong-prefix", zincati_request("/v1/pre-reboot"), 404, p.NOT_FOUND),
    ("get", b"GET /base/v1/pre-reboot HTTP/1.1\r\nhost: x\r\n\r\n", 405, p.METHOD_NOT_ALLOWED),
    ("delete", b"DELETE /base/v1/steady-state HTTP/1.1\r\nhost: x\r\n\r\n", 405, p.METHOD_NOT_ALLOWED),
    ("options", b"OPTIONS /base/v1/steady-state HTTP/1.1\r\nhost: x\r\n\r\n", 405, p.METHOD_NOT_ALLOWED),
    ("no-length", POST_HEAD + b"\r\n", 400, p.INVALID_REQUEST),
    ("oversized", POST_HEAD + b"content-length: 10000000\r\n\r\n", 413, p.REQUEST_TOO_LARGE),
    (
        "chunked",
        POST_HEAD + b"content-length: 5\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n",
        400,
        p.INVALID_REQUEST,
    ),
    ("malformed-json", zincati_request("/base/v1/pre-reboot", b"{not json"), 400, p.INVALID_REQUEST),
    (
        "bad-group",
        zincati_request("/base/v1/pre-reboot", b'{"client_params":{"id":"x","group":"a/b"}}'),
        400,
        p.INVALID_REQUEST,
    ),
]


@pytest.mark.parametrize(
    ("data", "status", "kind"), [e[1:] for e in HTTP_ERRORS], ids=[e[0] for e in HTTP_ERRORS]
)
def test_http_errors(served: Served, data: bytes, status: int, kind: str) -> None:
    server, service, metrics = served
    got, headers, body = raw_request(server.server_address[1], data)
    assert got == status
    assert json.loads(body)["kind"] == kind
    assert service.requests == []
    assert metrics.seen[-1][1] == kind
    if status == 405:
        assert headers["Allow"] == "POST"


def test_head_gets_no_body(served: Served) -> None:
    server, _, _ = served
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
    conn.request("HEAD", "/base/v1/pre-reboot")
    response = conn.getresponse()
    assert response.status == 405 and response.read() == b""
    conn.close()


def test_keep_alive_serves_several_requests(served: Served) -> None:
    server, service, _ = served
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
    for api in ("steady-state", "pre-reboot", "pre-reboot"):
        conn.request("POST", f"/base/v1/{api}", body=EXAMPLE_BODY, headers={"fleet-lock-protocol": "true"})
        assert conn.getresponse().read()
    conn.close()
    assert [r.api.value for r in service.requests] == ["steady-state", "pre-reboot", "pre-reboot"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    method=st.sampled_from(["POST", "GET", "PUT", "PATCH", "DELETE"]),
    path=st.sampled_from(["/base/v1/pre-reboot", "/base/v1/steady-state", "/base/v1/x", "/", "/base/v1/y/"]),
    header=st.sampled_from([None, "true", "false", ""]),
    body=st.one_of(
        st.binary(max_size=300),
        st.just(ZINCATI_BODY),
        st.builds(
            lambda i, g: json.dumps({"client_params": {"id": i, "group": g}}).encode(),
            st.text(max_size=20),
            st.text(max_size=20),
        ),
    ),
)
def test_fuzz_no_5xx_for_bad_input(
    served: Served, method: str, path: str, header: str | None, body: bytes
) -> None:
    server, _, _ = served
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
    headers = {} if header is None else {"fleet-lock-protocol": header}
    conn.request(method, path, body=body, headers=headers)
    response = conn.getresponse()
    data = response.read()
    conn.close()
    assert response.status < 500
    decoded = json.loads(data)
    assert decoded["kind"] in p.KINDS and decoded["value"]


def test_a_body_trickled_past_the_deadline_is_cut_without_reaching_the_service(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_Server, "request_deadline", 0.5)
    service = RecordingService()
    server = _Server(("127.0.0.1", 0), service=service, base="/", metrics=None)  # type: ignore[arg-type]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        request = zincati_request("/v1/pre-reboot")
        head, body = request.split(b"\r\n\r\n", 1)
        with socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=10) as sock:
            sock.sendall(head + b"\r\n\r\n")
            sent = 0
            with contextlib.suppress(OSError):
                for byte in body:  # one byte every 50 ms: each read is quick, the whole is too slow
                    sock.sendall(bytes([byte]))
                    sent += 1
                    time.sleep(0.05)
            try:
                answer = sock.recv(4096)
            except ConnectionResetError:  # closed with the trickled bytes unread
                answer = b""
            assert answer == b""
            # counted, not timed: the server cut the connection before the trickle ended (a send to it failed)
            assert sent < len(body), (sent, len(body))
        assert service.requests == []
    finally:
        server.shutdown()
        server.server_close()
