"""A real Alertmanager on 127.0.0.1, built from its Go module (``tools/testenv-build alertmanager``).

``Alertmanager().start()`` writes a configuration (by default one route to a receiver that sends nothing),
starts the binary with a temporary storage directory and no cluster listener, and waits for ``/-/ready``;
``stop()`` ends it and removes its directory. Tests speak to it through its API v2 as Prometheus and an
operator do: :meth:`Alertmanager.fire` posts alerts (``POST /api/v2/alerts``), :meth:`Alertmanager.silence`
makes a silence, :meth:`Alertmanager.silences` lists them. ``port`` and ``config`` may be given, so another
fixture (a real Prometheus) can point its ``alertmanagers`` at a known address.

:class:`AlertmanagerProxy` stands in front of a real Alertmanager: it passes every request on, and can answer
``DELETE /api/v2/silence/{id}`` (a silence's expiry) with a 500 instead, as an Alertmanager behind a broken
proxy would; for each expiry it records what a test's hook saw at the moment the request arrived (who held the
reboot lock then, say).
"""

from __future__ import annotations

import dataclasses
import datetime
import http.server
import json
import shutil
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pykured_dev.testenv.procs import Proc, TestEnvError, find_binaries, free_port

NULL_CONFIG = """\
route:
  receiver: "null"
  group_wait: 1s
receivers:
  - name: "null"
"""
READY_TIMEOUT = 60.0


class Alertmanager:
    """One Alertmanager process; see the module docstring."""

    __test__ = False

    def __init__(
        self, *, port: int | None = None, config: str = NULL_CONFIG, workdir: str | None = None
    ) -> None:
        self.port = port or free_port()
        self.config = config
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="pykured-am-"))
        self.proc: Proc | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Alertmanager:
        binary = find_binaries(("alertmanager",)) / "alertmanager"
        (self.workdir / "data").mkdir(parents=True, exist_ok=True)
        config = self.workdir / "alertmanager.yml"
        config.write_text(self.config)
        argv = [
            str(binary),
            f"--config.file={config}",
            f"--storage.path={self.workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--cluster.listen-address=",  # no gossip port: a single Alertmanager
            "--log.level=warn",
        ]
        self.proc = Proc("alertmanager", argv, log_dir=self.workdir)
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if not self.proc.alive():
                raise TestEnvError(f"alertmanager exited:\n{self.proc.tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:  # noqa: S310
                    if response.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        self.stop()
        raise TestEnvError(f"alertmanager not ready in {READY_TIMEOUT} s")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()
            self.proc = None
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> Alertmanager:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the API, as Prometheus and an operator use it -----------------------------------------------------

    def call(self, method: str, path: str, body: Any = None) -> Any:
        """One API v2 call; the decoded answer (``None`` when empty)."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(  # noqa: S310 - http://127.0.0.1
            f"{self.url}/api/v2/{path}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            text = response.read()
        return json.loads(text) if text.strip() else None

    def fire(self, name: str, *, minutes: float = 30, **labels: str) -> None:
        """Post a firing alert (as Prometheus sends one: ``endsAt`` some time ahead, re-sent while firing)."""
        now = datetime.datetime.now(datetime.UTC)
        alert = {
            "labels": {"alertname": name, **labels},
            "startsAt": now.isoformat(),
            "endsAt": (now + datetime.timedelta(minutes=minutes)).isoformat(),
        }
        self.call("POST", "alerts", [alert])

    def resolve(self, name: str, **labels: str) -> None:
        """Post the alert resolved (``endsAt`` now), as Prometheus does when it stops firing."""
        now = datetime.datetime.now(datetime.UTC)
        alert = {
            "labels": {"alertname": name, **labels},
            "startsAt": now.isoformat(),
            "endsAt": now.isoformat(),
        }
        self.call("POST", "alerts", [alert])

    def silence(self, matchers: dict[str, str], *, minutes: float = 60, created_by: str = "operator") -> str:
        """Make a silence of equality matchers; its id."""
        now = datetime.datetime.now(datetime.UTC)
        body = {
            "matchers": [
                {"name": k, "value": v, "isRegex": False, "isEqual": True} for k, v in matchers.items()
            ],
            "startsAt": now.isoformat(),
            "endsAt": (now + datetime.timedelta(minutes=minutes)).isoformat(),
            "createdBy": created_by,
            "comment": "made by a test",
        }
        return str(self.call("POST", "silences", body)["silenceID"])

    def silences(self, *, state: str | None = None) -> list[dict[str, Any]]:
        """All silences (or those in ``state``: ``active``, ``pending``, ``expired``)."""
        found = self.call("GET", "silences") or []
        return [s for s in found if state is None or s["status"]["state"] == state]

    def alerts(self) -> list[dict[str, Any]]:
        """The alerts pykured's blocker sees: active, neither silenced nor inhibited."""
        return list(self.call("GET", "alerts?active=true&silenced=false&inhibited=false") or [])


@dataclasses.dataclass(frozen=True)
class Expiry:
    """One ``DELETE /api/v2/silence/{id}`` the proxy saw: the id, the status it answered, and what the
    test's hook returned when the request arrived (before it was passed on or refused)."""

    ident: str
    status: int
    seen: Any


class AlertmanagerProxy:
    """A loopback HTTP proxy to ``upstream`` (see the module docstring). ``refuse_expiry``: answer every
    expiry with a 500 (the silence stays active); ``on_expire(ident)``: called as each expiry arrives."""

    __test__ = False

    def __init__(self, upstream: str, *, on_expire: Callable[[str], Any] | None = None) -> None:
        self.upstream = upstream.rstrip("/")
        self.on_expire = on_expire
        self.refuse_expiry = False
        self.expiries: list[Expiry] = []
        self._server: http.server.ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> AlertmanagerProxy:
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _relay(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                prefix = "/api/v2/silence/"
                if self.command == "DELETE" and self.path.startswith(prefix):
                    ident = self.path[len(prefix) :]
                    seen = proxy.on_expire(ident) if proxy.on_expire is not None else None
                    if proxy.refuse_expiry:
                        proxy.expiries.append(Expiry(ident, 500, seen))
                        self._answer(500, b'"refused by the test proxy"')
                        return
                    status, answer = proxy._forward(self.command, self.path, body, self.headers)
                    proxy.expiries.append(Expiry(ident, status, seen))
                    self._answer(status, answer)
                    return
                self._answer(*proxy._forward(self.command, self.path, body, self.headers))

            def _answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_DELETE = _relay

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
                return None

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="am-proxy", daemon=True
        ).start()
        return self

    def _forward(self, method: str, path: str, body: bytes | None, headers: Any) -> tuple[int, bytes]:
        request = urllib.request.Request(  # noqa: S310 - http://127.0.0.1
            self.upstream + path, data=body, method=method,
            headers={k: v for k, v in headers.items() if k.lower() in ("content-type", "accept")},
        )  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
                return int(response.status), response.read()
        except urllib.error.HTTPError as exc:
            with exc:
                return int(exc.code), exc.read()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> AlertmanagerProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
