"""Tests for pykured.alertmanager.api against a loopback HTTP server that answers what a test tells it:
the requests sent (paths, filters, basic auth, bodies) and hostile answers, each an error (the real
Alertmanager: tests/e2e/alertmanager/)."""

from __future__ import annotations

import base64
import datetime
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from pykured.alertmanager import api, matchers
from pykured.alerts.client import MAX_ANSWER


@dataclass
class Peer:
    url: str
    status: int = 200
    body: bytes = b"[]"
    seen: list[tuple[str, str, str | None, Any]] = field(default_factory=list)

    def answer(self, value: Any, status: int = 200) -> None:
        self.status, self.body = status, value if isinstance(value, bytes) else json.dumps(value).encode()


@pytest.fixture
def peer() -> Iterator[Peer]:
    found = Peer("")

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            found.seen.append((self.command, self.path, self.headers.get("Authorization"), body))
            self.send_response(found.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(found.body)))
            self.end_headers()
            self.wfile.write(found.body)

        do_GET = do_POST = do_DELETE = _answer

        def log_message(self, fmt: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    found.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield found
    finally:
        server.shutdown()
        server.server_close()


def alert(name: str, state: str = "active", **labels: str) -> dict[str, Any]:
    return {"labels": {"alertname": name, **labels}, "status": {"state": state, "silencedBy": []}}


def test_the_query_and_basic_auth(peer: Peer) -> None:
    peer.answer([alert("A", node="n"), alert("B", "unprocessed")])
    url = peer.url.replace("http://", "http://us%40er:p%3Ass@") + "/am/"
    found = api.active_alerts(url)
    assert [(a.name, a.state) for a in found] == [("A", "active"), ("B", "unprocessed")]
    ((method, path, auth, _),) = peer.seen
    assert method == "GET"
    assert path == "/am/api/v2/alerts?active=true&silenced=false&inhibited=false"
    assert auth == "Basic " + base64.b64encode(b"us@er:p:ss").decode()


@pytest.mark.parametrize(
    ("answer", "status", "error"),
    [
        ({"alerts": []}, 200, "not a list"),
        ([1], 200, "malformed alert"),
        ([{"labels": {"alertname": 1}, "status": {"state": "active"}}], 200, "malformed alert"),
        ([{"labels": {"alertname": "A"}}], 200, "malformed alert"),
        ([{"labels": {"alertname": "A"}, "status": {"state": None}}], 200, "malformed alert"),
        (b"[" * 40 + b"]" * 40, 200, "nested deeper"),
        (b"not json", 200, "cannot decode"),
        (b"x" * (MAX_ANSWER + 1), 200, "larger than"),
        ("boom", 500, "HTTP 500: boom"),
        ({"alerts": []}, 302, "HTTP 302"),
    ],
)
def test_a_hostile_answer_is_an_error(peer: Peer, answer: Any, status: int, error: str) -> None:
    peer.answer(answer, status)
    with pytest.raises(api.AlertmanagerError, match=error):
        api.active_alerts(peer.url)


def test_a_silence_is_posted_and_deleted(peer: Peer) -> None:
    ident = "6f9b4e2a-0b1c-4d5e-8f90-123456789abc"
    peer.answer({"silenceID": ident})
    now = datetime.datetime(2026, 1, 1, 12, tzinfo=datetime.UTC)
    spec = api.SilenceSpec(
        matchers.parse('node="n1"'), starts=now, ends=now + datetime.timedelta(hours=2), comment="c"
    )
    assert api.create_silence(peer.url, spec) == ident
    _, path, _, body = peer.seen[-1]
    assert path == "/api/v2/silences"
    assert body == {
        "matchers": [{"name": "node", "value": "n1", "isRegex": False, "isEqual": True}],
        "startsAt": "2026-01-01T12:00:00.000Z",
        "endsAt": "2026-01-01T14:00:00.000Z",
        "createdBy": "pykured",
        "comment": "c",
    }
    peer.answer(b"")
    assert api.expire_silence(peer.url, ident) is True
    assert peer.seen[-1][:2] == ("DELETE", f"/api/v2/silence/{ident}")
    peer.answer(b"", 404)
    assert api.expire_silence(peer.url, ident) is False
    peer.answer("oops", 500)
    with pytest.raises(api.AlertmanagerError, match="HTTP 500"):
        api.expire_silence(peer.url, ident)
    with pytest.raises(api.AlertmanagerError, match="not a silence id"):
        api.expire_silence(peer.url, "../alerts")


@pytest.mark.parametrize("answer", [{}, {"silenceID": 7}, {"silenceID": "a/b"}, {"silenceID": "x" * 65}, []])
def test_a_new_silence_without_a_valid_id_is_an_error(peer: Peer, answer: Any) -> None:
    peer.answer(answer)
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    spec = api.SilenceSpec(matchers.parse("a=b"), starts=now, ends=now, comment="c")
    with pytest.raises(api.AlertmanagerError, match="silenceID"):
        api.create_silence(peer.url, spec)


def test_the_silenced_alerts_with_their_silences(peer: Peer) -> None:
    ident = "6f9b4e2a-0b1c-4d5e-8f90-123456789abc"
    under = alert("Down", "suppressed", node="n1")
    under["status"]["silencedBy"] = [ident]
    peer.answer([under, alert("Disk")])
    found = api.active_alerts(peer.url, silenced=True)
    assert [(a.name, a.silenced_by) for a in found] == [("Down", (ident,)), ("Disk", ())]
    assert peer.seen[-1][1] == "/api/v2/alerts?active=true&silenced=true&inhibited=false"
    no_field = {"labels": {"alertname": "Old"}, "status": {"state": "active"}}  # an Alertmanager without it
    peer.answer([no_field])
    assert api.active_alerts(peer.url)[0].silenced_by == ()


def silence(ident: str, created_by: str = "pykured", comment: str = "c", state: str = "active") -> Any:
    return {"id": ident, "createdBy": created_by, "comment": comment, "status": {"state": state},
            "matchers": [{"name": "node", "value": "n1", "isRegex": False, "isEqual": True}]}  # fmt: skip


def test_the_silences(peer: Peer) -> None:
    peer.answer([silence("a"), silence("b", "ops", "known", "expired")])
    assert api.list_silences(peer.url) == [
        api.Silence("a", "pykured", "c", "active"), api.Silence("b", "ops", "known", "expired"),
    ]  # fmt: skip
    assert peer.seen[-1][:2] == ("GET", "/api/v2/silences")


@pytest.mark.parametrize(
    ("answer", "status", "error"),
    [
        ({"silences": []}, 200, "not a list"),
        ([1], 200, "malformed silence"),
        ([{**silence("a"), "id": 7}], 200, "malformed silence"),
        ([{**silence("a"), "comment": None}], 200, "malformed silence"),
        ([{**silence("a"), "status": {}}], 200, "malformed silence"),
        ([{"id": "a"}], 200, "malformed silence"),
        ("boom", 500, "HTTP 500: boom"),
    ],
)
def test_a_hostile_silences_answer_is_an_error(peer: Peer, answer: Any, status: int, error: str) -> None:
    peer.answer(answer, status)
    with pytest.raises(api.AlertmanagerError, match=error):
        api.list_silences(peer.url)


@pytest.mark.parametrize("silenced_by", ["x", [1], None])
def test_a_malformed_silenced_by_is_an_error(peer: Peer, silenced_by: Any) -> None:
    bad = alert("A")
    bad["status"]["silencedBy"] = silenced_by
    peer.answer([bad])
    with pytest.raises(api.AlertmanagerError, match="malformed alert"):
        api.active_alerts(peer.url, silenced=True)
