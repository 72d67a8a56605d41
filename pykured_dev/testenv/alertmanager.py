"""A real Alertmanager on 127.0.0.1, built from its Go module (``tools/testenv-build alertmanager``).

``Alertmanager().start()`` writes a configuration (by default one route to a receiver that sends nothing),
starts the binary with a temporary storage directory and no cluster listener, and waits for ``/-/ready``;
``stop()`` ends it and removes its directory. Tests speak to it through its API v2 as Prometheus and an
operator do: :meth:`Alertmanager.fire` posts alerts (``POST /api/v2/alerts``), :meth:`Alertmanager.silence`
makes a silence, :meth:`Alertmanager.silences` lists them. ``port`` and ``config`` may be given, so another
fixture (a real Prometheus) can point its ``alertmanagers`` at a known address.
"""

from __future__ import annotations

import datetime
import json
import shutil
import tempfile
import time
import urllib.error
import urllib.request
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
