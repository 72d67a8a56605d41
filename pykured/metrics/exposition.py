"""``/metrics`` over HTTP: kured's ``promhttp.Handler()`` routing, on a listener that cannot be exhausted.

kured serves ``promhttp.Handler()`` on ``<--metrics-host>:<--metrics-port>`` with only ``/metrics`` routed
(everything else is 404); so does this server, for whatever renders the exposition (:class:`Exposed`: the
agent's :class:`~pykured.metrics.registry.Metrics`). Host ``""`` means all addresses, as in Go: a dual-stack
``::`` socket, falling back to ``0.0.0.0`` when IPv6 is unavailable. The listener cannot be exhausted: at
most :data:`MAX_CONNECTIONS` connections, each with :data:`REQUEST_DEADLINE` seconds for its whole exchange
(:mod:`pykured.metrics.listener`); kured's Go listener has neither.
"""

from __future__ import annotations

import logging
import socket
import socketserver
from typing import Any, Protocol

from pykured.metrics.listener import BoundedHandler, BoundedHTTPServer

logger = logging.getLogger(__name__)

MAX_CONNECTIONS = 16
"""Connections the metrics listener serves at once; idle ones are closed to make room (see
:mod:`pykured.metrics.listener`)."""
REQUEST_DEADLINE = 10.0
"""Seconds a metrics client has for its whole exchange, however slowly it sends or reads."""


class Exposed(Protocol):
    """What ``/metrics`` serves: the exposition body and its content type for an ``Accept`` header."""

    def render(self, accept: str = "") -> tuple[bytes, str]: ...


class _Handler(BoundedHandler):
    server: MetricsServer

    def do_GET(self) -> None:
        self._answer(body=True)

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def _answer(self, *, body: bool) -> None:
        if self.path.split("?", 1)[0] != "/metrics":
            payload, content_type, status = b"404 page not found\n", "text/plain; charset=utf-8", 404
        else:
            payload, content_type = self.server.metrics.render(self.headers.get("Accept", ""))
            status = 200
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if body:
            self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - BaseHTTPRequestHandler's name
        logger.debug("metrics: " + format, *args)


class MetricsServer(BoundedHTTPServer):
    """``/metrics`` (everything else 404), bound without a reverse DNS lookup."""

    max_connections = MAX_CONNECTIONS
    request_deadline = REQUEST_DEADLINE
    metrics: Exposed

    def server_bind(self) -> None:
        # HTTPServer.server_bind resolves the bind address with getfqdn (a reverse DNS lookup): skip that.
        socketserver.TCPServer.server_bind(self)
        self.server_name = str(self.server_address[0])
        self.server_port = int(self.server_address[1])


class _Server6(MetricsServer):
    address_family = socket.AF_INET6

    def server_bind(self) -> None:
        self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)  # dual-stack, like Go's ":port"
        super().server_bind()


def poke(address: Any) -> None:
    """Connect to the metrics server once (and hang up), so its serve loop wakes from its poll."""
    host, port = str(address[0]), int(address[1])
    host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)  # noqa: S104
    try:
        with socket.create_connection((host, port), timeout=1.0):
            pass
    except OSError:
        pass


def bind(host: str, port: int, metrics: Exposed) -> MetricsServer:
    """A server for ``metrics`` on ``host:port`` (not serving yet); ``""`` and ``::``: every address."""
    server: MetricsServer
    if host in ("", "::"):
        try:
            server = _Server6(("::", port), _Handler)
        except OSError:
            logger.debug("IPv6 unavailable, metrics listen on 0.0.0.0")
            server = MetricsServer(("0.0.0.0", port), _Handler)  # noqa: S104 - "": all interfaces in kured
    else:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        server_class = type("_ServerFamily", (MetricsServer,), {"address_family": family})
        server = server_class((host, port), _Handler)
    server.metrics = metrics
    return server
