"""HTTP listeners that a client cannot exhaust: a cap on connections and a deadline on each request.

Concept: ``ThreadingHTTPServer`` gives every connection a thread for as long as the client keeps it, and its
socket timeout is per read, so idle sockets or a byte-a-second trickle hold threads (and memory) without
end. :class:`BoundedHTTPServer` keeps the one-thread-per-request model (a FleetLock long-poll must not block
another node) within bounds:

* At most ``max_connections`` connections have a thread. A connection still waiting for its request head
  is *evictable*: when a new one arrives at the cap, the oldest evictable connection is closed to make room,
  so a flood of idle sockets cannot keep a real client (a Prometheus scrape, a Zincati call) out. When no
  connection is evictable (all are being answered) the new one is closed at once.
* Every request must arrive whole within ``request_deadline`` seconds of the connection (or, on a kept-alive
  connection, of the previous answer): one reaper thread shuts down the sockets past their deadline,
  however slowly their bytes trickle in. A handler may lift the deadline once its request is read (a
  FleetLock long-poll); the metrics handler keeps it for the whole exchange.

:class:`BoundedHandler` is the request-handler side: it marks a connection evictable while it waits for a
request head and not after. Both are used by ``/metrics`` (:mod:`pykured.metrics`) and by the FleetLock
server (:mod:`pykured.fleetlock.server`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["BoundedHTTPServer", "BoundedHandler"]

logger = logging.getLogger(__name__)


@dataclasses.dataclass(slots=True)
class _Connection:
    """What the server knows of one open connection (mutable, guarded by the server's lock)."""

    opened: float
    deadline: float | None
    evictable: bool = True


class BoundedHTTPServer(ThreadingHTTPServer):
    """A ``ThreadingHTTPServer`` with a connection cap and a whole-request deadline (see the module)."""

    daemon_threads = True
    request_queue_size = 128  # the listen backlog (socketserver's 5 makes a burst of connects wait 1 s)
    max_connections = 64
    """The most connections that have a thread at once."""
    request_deadline = 10.0
    """Seconds a client has to send a whole request (head, and body where the handler reads one)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._open: dict[socket.socket, _Connection] = {}
        self._guard = threading.Condition()
        self._closing = False
        self.evicted = 0
        """Connections closed to make room, or refused at the cap (for tests and benchmarks)."""
        self.expired = 0
        """Connections shut down at their deadline."""
        super().__init__(*args, **kwargs)
        self._reaper = threading.Thread(target=self._reap, name=f"{type(self).__name__}-reaper", daemon=True)
        self._reaper.start()

    # -- the serve loop's side ------------------------------------------------------------------------------

    def process_request(self, request: Any, client_address: Any) -> None:
        """Admit the connection (evicting the oldest idle one at the cap) and give it a thread."""
        now = time.monotonic()
        with self._guard:
            if len(self._open) >= self.max_connections and not self._evict_oldest():
                self.evicted += 1
                logger.debug(
                    "%s: %d connections busy, closing %s",
                    type(self).__name__,
                    len(self._open),
                    client_address,
                )
                super().shutdown_request(request)
                return
            self._open[request] = _Connection(opened=now, deadline=now + self.request_deadline)
            self._guard.notify_all()
        super().process_request(request, client_address)

    def _evict_oldest(self) -> bool:
        waiting = [(c.opened, id(s), s) for s, c in self._open.items() if c.evictable]
        if not waiting:
            return False
        victim = min(waiting)[2]
        del self._open[victim]
        _hang_up(victim)
        self.evicted += 1
        return True

    def shutdown_request(self, request: Any) -> None:
        """The connection's thread is done with it: forget it, then close it."""
        with self._guard:
            self._open.pop(request, None)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (or was hung up on) is normal: debug level, no traceback."""
        exc = sys.exception()
        if isinstance(exc, OSError):
            logger.debug("%s: %s went away: %s", type(self).__name__, client_address, exc)
            return
        logger.error("%s: request from %s failed", type(self).__name__, client_address, exc_info=exc)

    def server_close(self) -> None:
        with self._guard:
            self._closing = True
            self._guard.notify_all()
        super().server_close()

    # -- the handlers' side ---------------------------------------------------------------------------------

    def awaiting_request(self, connection: socket.socket) -> None:
        """The connection waits for a request (head): evictable, with a fresh deadline."""
        with self._guard:
            entry = self._open.get(connection)
            if entry is not None:
                entry.evictable = True
                entry.deadline = time.monotonic() + self.request_deadline
                self._guard.notify_all()

    def request_started(self, connection: socket.socket) -> None:
        """The request head is in: no longer evictable (its deadline still runs)."""
        with self._guard:
            entry = self._open.get(connection)
            if entry is not None:
                entry.evictable = False

    def request_read(self, connection: socket.socket) -> None:
        """The whole request is in: the deadline is lifted (the handler bounds its own answer)."""
        with self._guard:
            entry = self._open.get(connection)
            if entry is not None:
                entry.evictable = False
                entry.deadline = None

    def open_connections(self) -> int:
        """Connections that have a thread now."""
        with self._guard:
            return len(self._open)

    # -- the reaper -----------------------------------------------------------------------------------------

    def _reap(self) -> None:
        with self._guard:
            while not self._closing:
                now = time.monotonic()
                deadlines = []
                for sock, entry in self._open.items():
                    if entry.deadline is None:
                        continue
                    if entry.deadline <= now:
                        entry.deadline = None
                        entry.evictable = False
                        _hang_up(sock)
                        self.expired += 1
                    else:
                        deadlines.append(entry.deadline)
                self._guard.wait(min(deadlines) - now if deadlines else None)


def _hang_up(sock: socket.socket) -> None:
    """End a connection another thread owns: its reads return at once, it closes the socket itself."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


class BoundedHandler(BaseHTTPRequestHandler):
    """The handler side of :class:`BoundedHTTPServer`: evictable only while waiting for a request head."""

    server: BoundedHTTPServer

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.request_deadline)  # a per-read guard as well

    def handle_one_request(self) -> None:
        self.server.awaiting_request(self.connection)
        super().handle_one_request()

    def parse_request(self) -> bool:
        parsed = super().parse_request()
        self.server.request_started(self.connection)
        return parsed
