"""The FleetLock HTTP server: bytes in, :mod:`protocol <pykured.fleetlock.protocol>`, the service, bytes out.

Concept: the only I/O edge of FleetLock. A ``ThreadingHTTPServer`` (one thread per request, so a long-poll
never blocks another node) routes, checks the header and the size, reads the body and hands a parsed
request to :class:`~pykured.fleetlock.service.FleetLockService`; a reconcile thread runs the service's
loop. :class:`FleetLockServer` is what the composition root builds, starts and stops.

Invariants:
* Node-local mode listens on loopback only (the DaemonSet pod with ``hostNetwork``); another address is a
  configuration error, as FleetLock has no authentication.
* Every answer is ``{"kind", "value"}`` JSON with a bounded ``kind``, counted in
  ``pykured_fleetlock_requests_total{api, kind}``; malformed requests are 4xx, never 5xx.
* A body is read only when its ``Content-Length`` is within :data:`~pykured.fleetlock.protocol.MAX_BODY`;
  after an answer that left the body unread the connection is closed.
* The listener cannot be exhausted: at most :data:`MAX_CONNECTIONS` connections, and each request must
  arrive whole within :data:`REQUEST_DEADLINE` seconds (a whole-request deadline, not a per-read timeout).
* A central-mode caller must be the node it names (its TCP peer address one of the Node's addresses,
  :meth:`~pykured.fleetlock.nodes.Resolver.admits`), or it gets 403 and changes nothing.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import sys
import threading
from typing import Any

from pykured.core import errors
from pykured.cycle.decide import CyclePolicy
from pykured.cycle.steps import Behaviour
from pykured.fleetlock import protocol as p
from pykured.fleetlock.nodes import LocalResolver, NodeIndex, Resolver
from pykured.fleetlock.service import Blockers, FleetLockService, HandsFactory
from pykured.kube.api import KubeApi
from pykured.lock.base import Lock
from pykured.metrics import Metrics
from pykured.metrics.listener import BoundedHandler, BoundedHTTPServer
from pykured.policy.maintenance import Window

logger = logging.getLogger(__name__)

MODES = ("node-local", "central")

MAX_CONNECTIONS = 128
"""Connections served at once (a long-polling Zincati holds one for up to the long-poll time); one still
sending its request is closed to make room for a new one (:mod:`pykured.metrics.listener`)."""
REQUEST_DEADLINE = 10.0
"""Seconds a client has to send its whole request, head and body, however slowly the bytes come."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (or ``localhost``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class _Handler(BoundedHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def _serve(self) -> None:
        routed = p.route(self.command, self.path, base=self.server.base)
        if isinstance(routed, p.Reply):
            api = "other" if routed.kind == p.NOT_FOUND else p.route("POST", self.path, base=self.server.base)
            self._answer(routed, api.value if isinstance(api, p.Api) else "other", close=True)
            return
        api = routed
        problem = p.check_header(self.headers.get(p.HEADER)) or p.check_length(
            self.headers.get("Content-Length")
        )
        if problem is None and self.headers.get("Transfer-Encoding"):
            problem = p.Reply(p.INVALID_REQUEST, "chunked request bodies are not supported")
        if problem is not None:
            self._answer(problem, api.value, close=True)
            return
        length = int(self.headers.get("Content-Length", "0"))
        try:
            body = self.rfile.read(length)
        except OSError:
            self.close_connection = True
            return
        if len(body) < length:
            self._answer(
                p.Reply(p.INVALID_REQUEST, "request body shorter than Content-Length"), api.value, close=True
            )
            return
        self.server.request_read(self.connection)  # read whole in time: a long-poll may now wait
        parsed = p.parse_body(api, body)
        peer = str(self.client_address[0])
        reply = parsed if isinstance(parsed, p.Reply) else self.server.service.handle(parsed, peer=peer)
        if isinstance(parsed, p.Request) and reply.kind != p.FORBIDDEN:  # the service logged a refusal
            logger.info(
                "FleetLock %s id=%s group=%s -> %d %s: %s",
                api.value, parsed.id, parsed.group, reply.status, reply.kind, reply.value,
            )  # fmt: skip
        self._answer(reply, api.value, close=False)

    def _answer(self, reply: p.Reply, api: str, *, close: bool) -> None:
        if self.server.metrics is not None:
            self.server.metrics.fleetlock_request(api, reply.kind)
        body = reply.body()
        self.send_response(reply.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if reply.status == 405:
            self.send_header("Allow", "POST")
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if self.command != "HEAD":
            try:
                self.wfile.write(body)
            except (ConnectionError, TimeoutError) as exc:  # the client left: nothing to answer to
                logger.debug("fleetlock http: %s left before its answer: %s", self.client_address, exc)
                self.close_connection = True

    do_POST = do_GET = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _serve

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - BaseHTTPRequestHandler's name
        logger.debug("fleetlock http: " + format, *args)


class _Server(BoundedHTTPServer):
    allow_reuse_address = True
    max_connections = MAX_CONNECTIONS
    request_deadline = REQUEST_DEADLINE

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that closes the connection after its answer is normal (Zincati does, without reading
        the body, after a 2xx): debug level, never a traceback; anything else is logged with its cause."""
        exc = sys.exception()
        if isinstance(exc, (ConnectionError, TimeoutError)):
            logger.debug("fleetlock http: %s closed the connection: %s", client_address, exc)
            return
        logger.error("fleetlock http: request from %s failed", client_address, exc_info=exc)

    def __init__(
        self, address: tuple[str, int], *, service: FleetLockService, base: str, metrics: Metrics | None
    ) -> None:
        self.service = service
        self.base = base
        self.metrics = metrics
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)


class FleetLockServer:
    """FleetLock for Zincati: build it, :meth:`start` it (background threads), :meth:`stop` it."""

    def __init__(
        self,
        *,
        kube: KubeApi,
        lock: Lock,
        host: str,
        port: int,
        mode: str,
        group: str,
        node_id: str,
        machine_id_file: str,
        hands: HandsFactory,
        policy: CyclePolicy,
        behaviour: Behaviour,
        blockers: Blockers,
        window: Window,
        metrics: Metrics | None,
        base_path: str = "/",
        long_poll_s: float = 25.0,
        reconcile_interval_s: float = 60.0,
        drain_retry_s: float = 300.0,
        resolver: Resolver | None = None,
    ) -> None:
        if mode not in MODES:
            raise errors.ConfigError(f"unknown FleetLock mode {mode!r}, expected node-local or central")
        if mode == "node-local" and not is_loopback(host):
            raise errors.ConfigError(
                f"FleetLock node-local mode listens on loopback only (127.0.0.1), not {host!r}"
            )
        if resolver is None:
            resolver = (
                LocalResolver(node=node_id, machine_id_file=machine_id_file)
                if mode == "node-local"
                else NodeIndex(kube)
            )
        self.mode = mode
        self.host = host
        self._requested_port = port
        self.base_path = p.normalize_base(base_path, group=group)
        self.metrics = metrics
        self.reconcile_interval_s = reconcile_interval_s
        self.service = FleetLockService(
            hands=hands, lock=lock, policy=policy, behaviour=behaviour, resolver=resolver, window=window,
            blockers=blockers, metrics=metrics, group=group, long_poll_s=long_poll_s,
            drain_retry_s=drain_retry_s,
        )  # fmt: skip
        self._server: _Server | None = None
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()

    @property
    def port(self) -> int:
        """The bound port (after :meth:`start`; port 0 picks a free one)."""
        if self._server is None:
            return self._requested_port
        return int(self._server.server_address[1])

    def start(self) -> FleetLockServer:
        """Bind, then serve and reconcile in daemon threads."""
        if self._server is not None:
            raise RuntimeError("FleetLock server already running")
        self.service.resolver.start()
        try:
            self._server = _Server(
                (self.host, self._requested_port),
                service=self.service,
                base=self.base_path,
                metrics=self.metrics,
            )
        except OSError as exc:
            self.service.resolver.stop()
            raise errors.ConfigError(
                f"FleetLock cannot listen on {self.host}:{self._requested_port}: {exc}"
            ) from exc
        self._stopping.clear()
        serve = threading.Thread(target=self._server.serve_forever, name="fleetlock-http", daemon=True)
        loop = threading.Thread(target=self._reconcile_loop, name="fleetlock-reconcile", daemon=True)
        self._threads = [serve, loop]
        for thread in self._threads:
            thread.start()
        logger.info(
            "Serving FleetLock (%s mode, group %s) on http://%s:%d%s",
            self.mode, self.service.group, self.host, self.port, self.base_path,
        )  # fmt: skip
        return self

    def _reconcile_loop(self) -> None:
        while not self._stopping.wait(self.reconcile_interval_s):
            self.service.reconcile_once()

    def stop(self) -> None:
        """Stop serving, cancel drains (resumed by the next start) and the reconcile loop."""
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        self.service.stop()
        self.service.resolver.stop()
        for thread in self._threads:
            thread.join(timeout=5)
        self._threads = []
