"""A real Prometheus on loopback for the tests: it scrapes live agents' ``/metrics`` and evaluates rules.

``Prometheus(workdir, rule_files=...).start()`` runs the ``prometheus`` binary that ``tools/prometheus-build``
builds from the ``github.com/prometheus/prometheus`` Go module, with a generated configuration, a fresh TSDB
under ``workdir`` and its HTTP API on a free ``127.0.0.1`` port, and waits for ``/-/ready``. Scrape and
rule-evaluation intervals are short (1 s by default), so a test sees a change within seconds.

Targets come from a ``file_sd`` file the fixture rewrites (:meth:`Prometheus.scrape`): agents that start
later are added without a restart (Prometheus reads the file on change, and every second).
:meth:`Prometheus.reload` rereads the rule files (``/-/reload``); ``route_prefix`` serves it all under a
path, as behind a reverse proxy; ``basic_auth`` asks every client for a password; ``alertmanagers``
(``host:port`` of Alertmanagers) fills the configuration's ``alerting.alertmanagers``;
:meth:`Prometheus.queries` reads the server's query log. :class:`Exporter` is a ``/metrics`` target the test
controls: the value a test sets is what the rules see at the next scrape, so an alert fires from
Prometheus's own rule evaluation, not from a canned answer.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import threading
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from pykured_dev.eventually import eventually
from pykured_dev.testenv.procs import Proc, TestEnvError, cache_dir, free_port, run_build

READY_TIMEOUT = 60.0
SEEN_WITHIN = 90.0
"""How long a test waits for Prometheus to show a change: a new target's first sample, a rule's value or
an alert's state comes within a few of its 1 s intervals (the target file's refresh, the scrape, the rule
evaluation); on a 2-core machine that another suite loads ten to twenty times over, that is tens of seconds.
A wait returns as soon as the change shows, so the deadline costs only a failing test its time."""
BINARIES = ("prometheus", "promtool")


def find_prometheus() -> Path:
    """The directory holding ``prometheus`` and ``promtool``, building them first when they are missing
    (``PYKURED_TESTENV_BIN``, when set, is used as it is)."""
    override = os.environ.get("PYKURED_TESTENV_BIN")
    bindir = Path(override) if override else cache_dir() / "bin" / "current"
    missing = [n for n in BINARIES if not (bindir / n).exists()]
    if missing and not override:
        run_build("prometheus-build", [], missing=f"Prometheus binaries missing ({', '.join(missing)})")
        missing = [n for n in BINARIES if not (bindir / n).exists()]
    if missing:
        raise TestEnvError(f"Prometheus binaries missing in {bindir}: {', '.join(missing)}")
    return bindir


def _yaml(value: Any) -> str:
    """JSON is YAML: the configuration is written without a YAML library."""
    return json.dumps(value, indent=2) + "\n"


class Prometheus:
    """One Prometheus server; see the module docstring."""

    def __init__(
        self,
        workdir: Path,
        *,
        rule_files: Sequence[Path] = (),
        scrape_interval: str = "1s",
        evaluation_interval: str = "1s",
        alertmanagers: Sequence[str] = (),
        route_prefix: str = "",
        basic_auth: tuple[str, str, str] | None = None,
    ) -> None:
        self.workdir = workdir
        self.route_prefix = route_prefix.rstrip("/")
        """Serve everything under this path (``--web.route-prefix``), as behind a reverse proxy."""
        self.basic_auth = basic_auth
        """``(user, password, bcrypt hash of the password)``: every request needs HTTP basic authentication
        (``--web.config.file``'s ``basic_auth_users``); the fixture's own requests send it."""
        self.rule_files = list(rule_files)
        self.scrape_interval = scrape_interval
        self.evaluation_interval = evaluation_interval
        self.alertmanagers = list(alertmanagers)
        self.bindir = find_prometheus()
        self.port = 0
        self.proc: Proc | None = None
        self._targets: dict[str, list[dict[str, Any]]] = {}
        self._targets_lock = threading.Lock()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.targets_file = workdir / "targets.json"
        self.query_log = workdir / "queries.log"
        """Every query the server answered, one JSON line each (``query_log_file``): who asked what."""
        self.config_file = workdir / "prometheus.yml"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.route_prefix}"

    # -- lifecycle -----------------------------------------------------------------------------------------

    def config(self) -> dict[str, Any]:
        """The generated configuration: one file_sd scrape job (each target group names its own ``job``)."""
        config: dict[str, Any] = {
            "global": {
                "scrape_interval": self.scrape_interval,
                "scrape_timeout": self.scrape_interval,
                "evaluation_interval": self.evaluation_interval,
                "query_log_file": str(self.query_log),
            },
            "rule_files": [str(p) for p in self.rule_files],
            "scrape_configs": [
                {
                    "job_name": "file",
                    "honor_labels": True,
                    "file_sd_configs": [{"files": [str(self.targets_file)], "refresh_interval": "1s"}],
                }
            ],
        }
        if self.alertmanagers:
            config["alerting"] = {
                "alertmanagers": [{"api_version": "v2", "static_configs": [{"targets": self.alertmanagers}]}]
            }
        return config

    def start(self) -> Prometheus:
        """Write the configuration, start the server and wait until it is ready (a port clash: again)."""
        self._write_targets()
        self.config_file.write_text(_yaml(self.config()))
        web: tuple[str, ...] = ()
        if self.basic_auth is not None:
            user, _password, hashed = self.basic_auth
            web_config = self.workdir / "web.yml"
            web_config.write_text(_yaml({"basic_auth_users": {user: hashed}}))
            web = (f"--web.config.file={web_config}",)
        for attempt in range(3):
            self.port = free_port()
            tsdb = self.workdir / "tsdb"
            shutil.rmtree(tsdb, ignore_errors=True)
            self.proc = Proc(
                "prometheus",
                [
                    str(self.bindir / "prometheus"),
                    f"--config.file={self.config_file}",
                    f"--storage.tsdb.path={tsdb}",
                    "--storage.tsdb.retention.time=1d",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--web.enable-lifecycle",
                    *((f"--web.route-prefix={self.route_prefix}",) if self.route_prefix else ()),
                    *web,
                    "--log.level=warn",
                ],
                log_dir=self.workdir,
            )
            if eventually(self._ready, timeout=READY_TIMEOUT, every=0.1):
                return self
            log = self.proc.tail()
            self.stop()
            if attempt == 2 or "address already in use" not in log:
                raise TestEnvError(f"Prometheus did not become ready:\n{log}")
        raise AssertionError("unreachable")

    def _ready(self) -> bool:
        if self.proc is None or not self.proc.alive():
            return True  # stop looking: start() sees it died
        try:
            with urllib.request.urlopen(self._http("GET", "/-/ready"), timeout=2) as answer:  # noqa: S310
                return bool(answer.status == 200)
        except OSError:
            return False

    def _http(self, method: str, path: str, data: bytes | None = None) -> urllib.request.Request:
        request = urllib.request.Request(f"{self.url}{path}", data=data, method=method)  # noqa: S310
        if self.basic_auth is not None:
            user, password, _ = self.basic_auth
            token = base64.b64encode(f"{user}:{password}".encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        return request

    def stop(self) -> None:
        """SIGTERM (Prometheus closes its TSDB), SIGKILL if it has not ended within 10 s."""
        if self.proc is not None:
            self.proc.stop(timeout=10.0)
            self.proc = None

    def __enter__(self) -> Prometheus:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def reload(self) -> None:
        """Reread the configuration and the rule files (``POST /-/reload``)."""
        self._request("POST", "/-/reload")

    # -- targets -------------------------------------------------------------------------------------------

    def scrape(self, job: str, address: str, labels: Mapping[str, str] | None = None) -> None:
        """Scrape ``address`` (``host:port``) as ``job`` from now on, with these target labels."""
        with self._targets_lock:
            self._targets.setdefault(job, []).append({"targets": [address], "labels": dict(labels or {})})
            self._write_targets()

    def _write_targets(self) -> None:
        groups = [
            {"targets": g["targets"], "labels": {**g["labels"], "job": job}}
            for job, job_groups in self._targets.items()
            for g in job_groups
        ]
        tmp = self.targets_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(groups))
        tmp.replace(self.targets_file)  # Prometheus never reads a half-written file

    # -- the HTTP API --------------------------------------------------------------------------------------

    def _request(self, method: str, path: str, params: Mapping[str, str] | None = None) -> Any:
        data = urllib.parse.urlencode(params or {}).encode() if method == "POST" else None
        query = "?" + urllib.parse.urlencode(params) if params and method == "GET" else ""
        with urllib.request.urlopen(self._http(method, f"{path}{query}", data), timeout=10) as answer:  # noqa: S310
            body = answer.read()
        return json.loads(body) if body.strip().startswith(b"{") else body

    def api(self, path: str, **params: str) -> Any:
        """``GET /api/v1/<path>``'s ``data`` (raises on a status other than ``success``)."""
        answer = self._request("GET", f"/api/v1/{path}", params)
        if answer.get("status") != "success":
            raise TestEnvError(f"Prometheus {path}: {answer}")
        return answer["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result (a vector's samples; ``[]`` for none)."""
        data = self.api("query", query=expr)
        result = data["result"]
        return list(result) if isinstance(result, list) else [result]

    def alerts(self) -> list[dict[str, Any]]:
        """The alerts the rules currently hold (pending and firing)."""
        return list(self.api("alerts")["alerts"])

    def alert_state(self, name: str) -> str | None:
        """``pending``, ``firing`` or ``None`` (inactive) for the alert named ``name``, as the rules hold it;
        its ``ALERTS`` sample (what a query sees) is committed a moment later."""
        states = {a["state"] for a in self.alerts() if a["labels"].get("alertname") == name}
        return "firing" if "firing" in states else "pending" if "pending" in states else None

    def queries(self) -> list[str]:
        """The expressions of the API queries answered so far (the rules' own evaluations are not logged)."""
        if not self.query_log.exists():
            return []
        lines = self.query_log.read_text(errors="replace").splitlines()
        return [str(json.loads(line).get("params", {}).get("query", "")) for line in lines if line.strip()]

    def targets_up(self, job: str) -> int:
        """How many of ``job``'s targets were scraped successfully last time."""
        active = self.api("targets", state="active")["activeTargets"]
        return sum(1 for t in active if t["labels"].get("job") == job and t["health"] == "up")


class Exporter:
    """A ``/metrics`` target whose gauges the test sets (the text exposition format, untyped samples)."""

    def __init__(self) -> None:
        self._values: dict[str, float] = {}
        self._lock = threading.Lock()
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = exporter.render().encode()
                self.send_response(200 if self.path.split("?")[0] == "/metrics" else 404)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="exporter", daemon=True)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self._server.server_port}"

    def set(self, name: str, value: float) -> None:
        """Expose ``name`` (a gauge without labels) with ``value`` from the next scrape on."""
        with self._lock:
            self._values[name] = value

    def render(self) -> str:
        with self._lock:
            return "".join(f"# TYPE {n} gauge\n{n} {v!r}\n" for n, v in sorted(self._values.items()))

    def __enter__(self) -> Exporter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
