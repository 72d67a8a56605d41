# ruff: noqa: E501  (request tables keep one URL per line)
"""Notifier: real HTTP to loopback receivers, transport-level interception for fixed-host services, SMTP
against aiosmtpd on loopback, and failure handling (500, hang, invalid URL). Nothing leaves the machine: an
autouse guard refuses every non-loopback connection."""

from __future__ import annotations

import base64
import io
import json
import logging
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests

from pykured.core.errors import ConfigError
from pykured.notify import KuredMessages, Notifier, notify_test

ROOT = Path(__file__).resolve().parents[2]
# apprise's e-mail plugin imports the stdlib imghdr module, deprecated in Python 3.11.
pytestmark = pytest.mark.filterwarnings("ignore:'imghdr' is deprecated:DeprecationWarning")
_real_connect = socket.socket.connect


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Refuse any connection that is not to 127.0.0.1/::1 (a safety net under the transport patches)."""

    def guarded(self: socket.socket, address: Any) -> None:
        host = address[0] if isinstance(address, tuple) else address
        if host not in ("127.0.0.1", "::1", "localhost"):
            raise ConnectionRefusedError(f"test guard: no network beyond loopback ({host})")
        _real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)


# --- loopback HTTP receiver ---------------------------------------------------------------------------------


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    port: int
    seen: list[Seen] = field(default_factory=list)
    status: int = 200
    delay: float = 0.0
    reply: bytes = b"{}"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    state = Receiver(port=0)

    class Handler(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            state.seen.append(Seen(self.command, self.path, dict(self.headers.items()), body))
            if state.delay:
                time.sleep(state.delay)
            self.send_response(state.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(state.reply)))
            self.end_headers()
            self.wfile.write(state.reply)

        do_POST = do_PUT = do_GET = _handle

        def log_message(self, fmt: str, *args: Any) -> None:
            pass

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        block_on_close = False

    server = Server(("127.0.0.1", 0), Handler)
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()
    thread.join(5)


def _json(seen: Seen) -> Any:
    return json.loads(seen.body)


LOOPBACK_CASES = [
    (
        "generic-json",
        "generic://127.0.0.1:{port}/hook?template=json&disabletls=yes&@acceptLanguage=en&$env=prod&foo=bar",
        "POST",
        "/hook?foo=bar",
        {"Content-Type": "application/json", "Accept-Language": "en"},
        {"message": "Rebooting node n1", "env": "prod"},
    ),
    (
        "generic-json-keys-title",
        "generic+http://u:pw@127.0.0.1:{port}/x?template=json&messagekey=text&titlekey=subject&title=kured&method=put",
        "PUT",
        "/x",
        {"Authorization": "Basic " + base64.b64encode(b"u:pw").decode()},
        {"subject": "kured", "text": "Rebooting node n1"},
    ),
    (
        "ntfy-http",
        "ntfy://127.0.0.1:{port}/reboots?scheme=http&priority=4&tags=warning&title=kured",
        "POST",
        "/",
        {"X-Priority": "high", "X-Tags": "warning"},
        {"topic": "reboots", "title": "kured", "message": "Rebooting node n1"},
    ),
    (
        "gotify-disabletls",
        "gotify://127.0.0.1:{port}/gotify/Aaaaaaaaaaaaaaa?disabletls=yes&priority=5",
        "POST",
        "/gotify/message",
        {"X-Gotify-Key": "Aaaaaaaaaaaaaaa"},
        {"priority": 5, "title": "Shoutrrr notification", "message": "Rebooting node n1"},
    ),
    (
        "mattermost-disabletls",
        "mattermost://kured@127.0.0.1:{port}/tok3n/town?disabletls=yes",
        "POST",
        "/hooks/tok3n",
        {"Content-Type": "application/json"},
        {"text": "Rebooting node n1", "username": "kured", "channel": "town"},
    ),
    (
        "rocketchat-disabletls",
        "rocketchat://127.0.0.1:{port}/TokA/TokB/general?disabletls=yes",
        "POST",
        "/hooks/TokA/TokB",
        {"Content-Type": "application/json"},
        {"text": "Rebooting node n1", "channel": "#general"},
    ),
    (
        "apprise-json-passthrough",
        "json://127.0.0.1:{port}/native?:version=&:attachments=&:type=&:title=",
        "POST",
        "/native",
        {"Content-Type": "application/json", "User-Agent": "Apprise"},
        {"message": "Rebooting node n1"},
    ),
]


@pytest.mark.parametrize(
    ("url", "method", "path", "headers", "body"),
    [c[1:] for c in LOOPBACK_CASES],
    ids=[c[0] for c in LOOPBACK_CASES],
)
def test_loopback_delivery(
    receiver: Receiver, url: str, method: str, path: str, headers: dict[str, str], body: dict[str, Any]
) -> None:
    notifier = Notifier(urls=[url.format(port=receiver.port)], timeout=5)
    assert notifier.send("Rebooting node n1") is True
    assert len(receiver.seen) == 1
    seen = receiver.seen[0]
    assert (seen.method, seen.path) == (method, path)
    assert {k: seen.headers.get(k) for k in headers} == headers
    assert _json(seen) == body


def test_generic_raw_is_sent_natively_like_shoutrrr(receiver: Receiver) -> None:
    url = f"generic+http://kured:s3cret@127.0.0.1:{receiver.port}/raw?@xApiKey=abc&q=1"
    assert Notifier(urls=[url], timeout=5).send("Draining node n1") is True
    seen = receiver.seen[0]
    assert (seen.method, seen.path, seen.body) == ("POST", "/raw?q=1", b"Draining node n1")
    assert seen.headers["Content-Type"] == "application/json"
    assert seen.headers["Accept"] == "application/json"
    assert seen.headers["X-Api-Key"] == "abc"
    assert seen.headers["Authorization"] == "Basic " + base64.b64encode(b"kured:s3cret").decode()


# --- fixed-host services, intercepted at the requests transport ---------------------------------------------


@pytest.fixture
def transport(monkeypatch: pytest.MonkeyPatch) -> list[requests.PreparedRequest]:
    sent: list[requests.PreparedRequest] = []

    def fake_send(self: Any, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
        sent.append(request)
        response = requests.Response()
        response.status_code = 200
        hook = (request.url or "").startswith("https://hooks.slack.com/")
        response._content = b"ok" if hook else b'{"ok": true, "requestId": "r1", "result": {}}'
        response.request = request
        response.url = request.url or ""
        return response

    monkeypatch.setattr(requests.adapters.HTTPAdapter, "send", fake_send)
    return sent


SLACK_C = "XXXXXXXXXXXXXXXXXXXXXXXX"
ZKEY = "abcdefghijklmnopqrstuvwxyz012345"
FIXED_CASES = [
    (
        "slack-legacy",
        f"slack://T00000000/B00000000/{SLACK_C}",
        [("POST", f"https://hooks.slack.com/services/T00000000/B00000000/{SLACK_C}")],
        {},
        {"text": "Rebooting node n1"},
    ),
    (
        "slack-hook-channel-botname",
        "slack://hook:WNA3PBYV6-F20DUQND3RQ-Webc4MAvoacrpPakR8phF0zi@C0123ABCD?botname=kured",
        [("POST", "https://hooks.slack.com/services/WNA3PBYV6/F20DUQND3RQ/Webc4MAvoacrpPakR8phF0zi")],
        {},
        {"text": "Rebooting node n1", "channel": "C0123ABCD", "username": "kured"},
    ),
    (
        "slack-bot",
        "slack://xoxb:123456789012-1234567890123-4mt0t4l1YL3g1T5L4cK70k3N@C001CH4NN3L",
        [("POST", "https://slack.com/api/chat.postMessage")],
        {"Authorization": "Bearer xoxb-123456789012-1234567890123-4mt0t4l1YL3g1T5L4cK70k3N"},
        {"text": "Rebooting node n1", "channel": "C001CH4NN3L"},
    ),
    (
        "discord",
        "discord://tok3n@123456789?username=kured",
        [("POST", "https://discord.com/api/webhooks/123456789/tok3n")],
        {},
        {"content": "Rebooting node n1", "username": "kured"},
    ),
    (
        "telegram-two-chats",
        "telegram://110201543:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw@telegram?chats=@chan,-100123",
        [("POST", "https://api.telegram.org/bot110201543:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/sendMessage")]
        * 2,
        {},
        {"text": "Rebooting node n1", "disable_web_page_preview": False, "disable_notification": False},
    ),
    (
        "googlechat",
        "googlechat://chat.googleapis.com/v1/spaces/FOO/messages?key=bar&token=baz",
        [("POST", "https://chat.googleapis.com/v1/spaces/FOO/messages?token=baz&key=bar")],
        {},
        {"text": "Rebooting node n1"},
    ),
    (
        "opsgenie",
        "opsgenie://api.eu.opsgenie.com/ap1k3y?responders=team:ops&priority=P2",
        [("POST", "https://api.eu.opsgenie.com/v2/alerts")],
        {"Authorization": "GenieKey ap1k3y"},
        {"message": "Rebooting node n1", "priority": "P2", "responders": [{"type": "team", "name": "ops"}]},
    ),
]


def _body(request: requests.PreparedRequest) -> dict[str, Any]:
    raw = request.body or b"{}"
    assert isinstance(raw, (bytes, str))
    data = json.loads(raw)
    assert isinstance(data, dict)
    return data


def _flatten_text(body: dict[str, Any]) -> dict[str, Any]:
    """apprise's slack puts the text in an attachment; shoutrrr sends it top-level. Compare the content."""
    if "attachments" in body and "text" not in body:
        body = {**body, "text": body["attachments"][0]["text"]}
    return body


@pytest.mark.parametrize(
    ("url", "calls", "headers", "body"), [c[1:] for c in FIXED_CASES], ids=[c[0] for c in FIXED_CASES]
)
def test_fixed_host_services(
    transport: list[requests.PreparedRequest],
    url: str,
    calls: list[tuple[str, str]],
    headers: dict[str, str],
    body: dict[str, Any],
) -> None:
    assert Notifier(urls=[url], timeout=5).send("Rebooting node n1") is True
    assert [(r.method, r.url) for r in transport] == calls
    for request in transport:
        assert {k: request.headers.get(k) for k in headers} == headers
        sent = _flatten_text(_body(request))
        assert {k: sent.get(k) for k in body} == body


def test_pushover_form(transport: list[requests.PreparedRequest]) -> None:
    url = "pushover://shoutrrr:apiTokenaaaaaaaaaaaaaaaaaaaaaaa@userKeyaaaaaaaaaaaaaaaaaaaaaa/?devices=d1&priority=1"
    assert Notifier(urls=[url], timeout=5).send("Rebooting node n1") is True
    [request] = transport
    assert (request.method, request.url) == ("POST", "https://api.pushover.net/1/messages.json")
    form = dict(pair.split("=", 1) for pair in str(request.body).split("&"))
    assert form["token"] == "apiTokenaaaaaaaaaaaaaaaaaaaaaaa"
    assert form["user"] == "userKeyaaaaaaaaaaaaaaaaaaaaaa"
    assert (form["device"], form["priority"], form["message"]) == ("d1", "1", "Rebooting+node+n1")


def test_zulip_form_with_topic(transport: list[requests.PreparedRequest]) -> None:
    url = f"zulip://kured-bot%40zulip.example.com:{ZKEY}@zulip.example.com/?stream=ops&topic=reboots"
    assert Notifier(urls=[url], timeout=5).send("Rebooting node n1") is True
    [request] = transport
    assert (request.method, request.url) == ("POST", "https://zulip.example.com/api/v1/messages")
    form = dict(pair.split("=", 1) for pair in str(request.body).split("&"))
    assert (form["type"], form["to"], form["topic"], form["content"]) == (
        "stream",
        "ops",
        "reboots",
        "Rebooting+node+n1",
    )
    expected = "Basic " + base64.b64encode(f"kured-bot@zulip.example.com:{ZKEY}".encode()).decode()
    assert request.headers["Authorization"] == expected


@dataclass
class FakeResponse:
    def read(self) -> bytes:
        return b"1"

    def __enter__(self) -> FakeResponse:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def test_teams_legacy_messagecard(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[urllib.request.Request] = []

    def fake_urlopen(request: urllib.request.Request, timeout: float) -> FakeResponse:
        sent.append(request)
        return FakeResponse()

    monkeypatch.setattr(urllib.request, "urlopen", fake_urlopen)
    group, tenant = "11111111-2222-3333-4444-555555555555", "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
    owner, alt = "99999999-8888-7777-6666-555555555555", "0123456789abcdef0123456789abcdef"
    url = f"teams://{group}@{tenant}/{alt}/{owner}?host=org.webhook.office.com"
    assert Notifier(urls=[url], timeout=5).send("Rebooting node n1") is True
    [request] = sent
    assert request.get_method() == "POST"
    assert (
        request.full_url
        == f"https://org.webhook.office.com/webhookb2/{group}@{tenant}/IncomingWebhook/{alt}/{owner}"
    )
    assert request.get_header("Content-type") == "application/json"
    assert isinstance(request.data, bytes)
    assert json.loads(request.data) == {
        "@type": "MessageCard",
        "@context": "http://schema.org/extensions",
        "markdown": True,
        "summary": "Rebooting node n1",
        "sections": [{"text": "Rebooting node n1"}],
    }


# --- SMTP against a real server on loopback ------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_smtp_to_aiosmtpd() -> None:
    from aiosmtpd.controller import Controller

    received: list[Any] = []

    class Handler:
        async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
            received.append(envelope)
            return "250 OK"

    port = _free_port()
    controller = Controller(Handler(), hostname="127.0.0.1", port=port)
    controller.start()
    try:
        url = f"smtp://127.0.0.1:{port}/?fromAddress=kured@example.com&toAddresses=ops@example.com,b@example.com&encryption=None"
        assert Notifier(urls=[url], timeout=10).send("Rebooting node n1") is True
    finally:
        controller.stop()
    assert sorted(rcpt for env in received for rcpt in env.rcpt_tos) == ["b@example.com", "ops@example.com"]
    text = received[0].content.decode()
    assert "Subject: Shoutrrr Notification" in text
    assert "Rebooting node n1" in text
    assert received[0].mail_from == "kured@example.com"


# --- failures --------------------------------------------------------------------------------------------------


FAIL_CASES = [
    ("native-500", "generic+http://127.0.0.1:{port}/hook", "got unexpected HTTP status: 500"),
    ("apprise-500", "generic://127.0.0.1:{port}/hook?template=json&disabletls=yes", "generic:"),
]


@pytest.mark.parametrize(("url", "reason"), [c[1:] for c in FAIL_CASES], ids=[c[0] for c in FAIL_CASES])
def test_receiver_500_is_a_warning(
    receiver: Receiver, caplog: pytest.LogCaptureFixture, url: str, reason: str
) -> None:
    receiver.status = 500
    failures: list[str] = []
    notifier = Notifier(urls=[url.format(port=receiver.port)], timeout=5, on_failure=failures.append)
    with caplog.at_level(logging.WARNING, logger="pykured.notify"):
        assert notifier.send("Rebooting node n1") is False
    assert failures == ["generic"]
    [record] = [r for r in caplog.records if r.name == "pykured.notify"]
    assert record.levelname == "WARNING"
    assert record.getMessage().startswith("Error notifying: ")
    assert reason in record.getMessage()


def test_hanging_receiver_is_bounded_and_redacted(
    receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    receiver.delay = 30.0
    url = f"generic+http://kured:SeCrEtPw@127.0.0.1:{receiver.port}/hook/TOKEN12345?key=APIKEY999"
    notifier = Notifier(urls=[url], timeout=0.5)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="pykured.notify"):
        assert notifier.send("Rebooting node n1") is False
    # bounded by the notifier's 0.5 s timeout, not the receiver's 30 s answer (a bound from the wait itself)
    assert time.monotonic() - started < receiver.delay
    assert "Error notifying: " in caplog.text
    for secret in ("SeCrEtPw", "TOKEN12345", "APIKEY999"):
        assert secret not in caplog.text
    for thread in threading.enumerate():  # let the abandoned worker finish before the receiver goes away
        if thread.name == "pykured-notify":
            thread.join(5)
    assert not any(t.name == "pykured-notify" for t in threading.enumerate())


def test_connection_refused(caplog: pytest.LogCaptureFixture) -> None:
    url = f"generic+http://127.0.0.1:{_free_port()}/hook"
    with caplog.at_level(logging.WARNING, logger="pykured.notify"):
        assert Notifier(urls=[url], timeout=5).send("x") is False
    assert "Error notifying: generic:" in caplog.text


def test_invalid_url_warns_on_every_send_like_kured(caplog: pytest.LogCaptureFixture) -> None:
    failures: list[str] = []
    with caplog.at_level(logging.WARNING, logger="pykured.notify"):
        notifier = Notifier(urls=["matrix://u:p@matrix.example.com/"], on_failure=failures.append)
        assert notifier.send("a") is False
        assert notifier.send("b") is False
    assert failures == ["invalid", "invalid"]
    assert caplog.text.count("Error notifying: ") == 2
    assert "rooms" in notifier.last_error


def test_strict_raises() -> None:
    with pytest.raises(ConfigError, match="rooms"):
        Notifier(urls=["matrix://u:p@matrix.example.com/"], strict=True)


# --- configuration from kured's flags --------------------------------------------------------------------------


FLAG_CASES = [
    ("nothing", "", "", ()),
    ("notify-url", "'json://127.0.0.1:1/x'", "", ("json://127.0.0.1:1/REDACTED",)),
    ("slack-hook", "", "https://hooks.slack.com/services/T0/B0/XX", ("slack://T0/REDACTED/REDACTED",)),
    (
        "both-notify-wins",
        "json://127.0.0.1:1/x",
        "https://hooks.slack.com/services/T0/B0/XX",
        ("json://127.0.0.1:1/REDACTED",),
    ),
    ("bad-slack-hook", "", "https://hooks.slack.com/services/T0/B0", ()),
]


@pytest.mark.parametrize(
    ("notify_url", "slack_hook", "expected"), [c[1:] for c in FLAG_CASES], ids=[c[0] for c in FLAG_CASES]
)
def test_from_urls(notify_url: str, slack_hook: str, expected: tuple[str, ...]) -> None:
    notifier = Notifier.from_urls(notify_url=notify_url, slack_hook_url=slack_hook)
    assert notifier.destinations == expected
    assert notifier.enabled is bool(expected)


def test_disabled_notifier_sends_nothing_and_succeeds() -> None:
    assert Notifier.from_urls().send("x") is True


MESSAGE_CASES = [
    ("defaults", KuredMessages(), ("Draining node n1", "Rebooting node n1", "Node n1 rebooted & uncordoned successfully!")),
    ("no-verb", KuredMessages(drain="Draining", reboot="R %s %s", uncordon="%d"),
     ("Draining%!(EXTRA string=n1)", "R n1 %!s(MISSING)", "%!d(string=n1)")),
]  # fmt: skip


@pytest.mark.parametrize(
    ("messages", "expected"), [c[1:] for c in MESSAGE_CASES], ids=[c[0] for c in MESSAGE_CASES]
)
def test_kured_messages(messages: KuredMessages, expected: tuple[str, str, str]) -> None:
    assert (messages.for_drain("n1"), messages.for_reboot("n1"), messages.for_uncordon("n1")) == expected


def test_notify_drain_reboot_uncordon_use_templates(receiver: Receiver) -> None:
    url = f"generic+http://127.0.0.1:{receiver.port}/m"
    notifier = Notifier(urls=[url], messages=KuredMessages(drain="D %s", reboot="R %s", uncordon="U %s"))
    assert notifier.notify_drain("n1") and notifier.notify_reboot("n1") and notifier.notify_uncordon("n1")
    assert [s.body for s in receiver.seen] == [b"D n1", b"R n1", b"U n1"]


# --- notify-test subcommand -------------------------------------------------------------------------------------


def test_notify_test_success(receiver: Receiver) -> None:
    out = io.StringIO()
    assert notify_test(f"generic+http://u:SECRETPW@127.0.0.1:{receiver.port}/hook", "hello", out=out) == 0
    assert out.getvalue() == f"destination: native POST http://127.0.0.1:{receiver.port}/REDACTED\nsent\n"
    assert receiver.seen[0].body == b"hello"


def test_notify_test_failure(receiver: Receiver) -> None:
    receiver.status = 500
    out = io.StringIO()
    assert notify_test(f"generic+http://127.0.0.1:{receiver.port}/hook", "hello", out=out) == 1
    assert (
        out.getvalue().splitlines()[-1]
        == "failed: generic: got unexpected HTTP status: 500 Internal Server Error"
    )


def test_notify_test_unconvertible() -> None:
    out = io.StringIO()
    assert notify_test("msteams://a/b/c", "hello", out=out) == 1
    assert "Workflows" in out.getvalue()


# --- lazy apprise imports (fresh interpreter) -------------------------------------------------------------------


LAZY_SCRIPT = """
import sys
from pykured.notify import Notifier
Notifier.from_urls().send("x")
print("apprise" in sys.modules)
Notifier.from_urls(notify_url="generic+http://127.0.0.1:9/x")
print("apprise" in sys.modules)
n = Notifier.from_urls(notify_url="generic://127.0.0.1:9/x?template=json&disabletls=yes", timeout=2)
n.send("x")
print("apprise.plugins.custom_json" in sys.modules, "apprise.plugins.slack" in sys.modules)
"""


def test_apprise_is_imported_lazily_one_plugin_only() -> None:
    result = subprocess.run(
        [sys.executable, "-c", LAZY_SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.split("\n")[:3] == ["False", "False", "True False"]


# --- SMTP over real TLS (STARTTLS and implicit TLS) with a self-signed loopback certificate -------------------


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    folder = tmp_path_factory.mktemp("tls")
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_file, key_file


TLS_CASES = [
    (
        "explicit-starttls",
        "smtp://kured:pw@127.0.0.1:{port}/?from=kured@example.com&to=ops@example.com",
        False,
    ),
    (
        "implicit-tls",
        "smtp://kured:pw@127.0.0.1:{port}/?from=kured@example.com&to=ops@example.com&encryption=ImplicitTLS",
        True,
    ),
]


@pytest.mark.parametrize(("url", "implicit"), [c[1:] for c in TLS_CASES], ids=[c[0] for c in TLS_CASES])
def test_smtp_tls_and_login(
    monkeypatch: pytest.MonkeyPatch, tls_files: tuple[Path, Path], url: str, implicit: bool
) -> None:
    import ssl

    from aiosmtpd.controller import Controller
    from aiosmtpd.smtp import AuthResult

    cert_file, key_file = tls_files
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(cert_file, key_file)
    create_default_context = ssl.create_default_context

    def trusting_context(*args: Any, **kwargs: Any) -> ssl.SSLContext:  # trust only our test CA
        return create_default_context(cafile=str(cert_file))

    monkeypatch.setattr(ssl, "create_default_context", trusting_context)
    received: list[Any] = []
    logins: list[tuple[bytes, bytes]] = []

    class Handler:
        async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
            implicit_tls = server.transport.get_extra_info("ssl_object") is not None
            received.append((envelope, session.ssl is not None or implicit_tls))
            return "250 OK"

    def authenticator(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
        logins.append((data.login, data.password))
        return AuthResult(success=True)

    port = _free_port()
    # aiosmtpd does not see implicit TLS as "TLS" for auth_require_tls; the socket is TLS from the first byte.
    options: dict[str, Any] = {"authenticator": authenticator, "auth_require_tls": not implicit}
    if implicit:
        controller = Controller(
            Handler(), hostname="127.0.0.1", port=port, ssl_context=server_context, **options
        )
    else:
        controller = Controller(
            Handler(),
            hostname="127.0.0.1",
            port=port,
            tls_context=server_context,
            require_starttls=True,
            **options,
        )
    controller.start()
    try:
        assert Notifier(urls=[url.format(port=port)], timeout=10).send("Rebooting node n1") is True
    finally:
        controller.stop()
    assert logins == [(b"kured", b"pw")]
    [(envelope, encrypted)] = received
    assert encrypted is True
    assert envelope.rcpt_tos == ["ops@example.com"]
    assert "Rebooting node n1" in envelope.content.decode()
