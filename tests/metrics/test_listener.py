"""Listeners that cannot be exhausted: idle sockets are evicted for real clients, slow ones cut at a
whole-request deadline, threads and connections stay under the cap (in process, on loopback)."""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import ClassVar

from pykured.metrics import Metrics
from pykured.metrics import exposition as metrics_module
from pykured.metrics.listener import BoundedHandler, BoundedHTTPServer
from pykured_dev.eventually import eventually


class _Hold(BoundedHandler):
    """Reads a request, lifts its deadline, then holds the connection until released."""

    release = threading.Event()
    holding: ClassVar[list[int]] = []

    def do_GET(self) -> None:
        self.server.request_read(self.connection)
        self.holding.append(1)
        self.release.wait(10)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        return


class _Small(BoundedHTTPServer):
    max_connections = 4
    request_deadline = 0.5


@contextlib.contextmanager
def running(
    server_class: type[BoundedHTTPServer], handler: type[BaseHTTPRequestHandler]
) -> Iterator[BoundedHTTPServer]:
    server = server_class(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@contextlib.contextmanager
def serving(server_class: type[BoundedHTTPServer], handler: type[BaseHTTPRequestHandler]) -> Iterator[int]:
    with running(server_class, handler) as server:
        yield int(server.server_address[1])


def scrape(port: int) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/metrics")
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def request_threads(before: set[threading.Thread]) -> int:
    """The threads serving a connection that did not exist in ``before`` (a thread other tests of this worker
    left running, or start meanwhile, is not the listener's)."""
    return sum(1 for t in threading.enumerate() if t not in before and "process_request_thread" in t.name)


def open_idle(port: int, n: int) -> list[socket.socket]:
    return [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(n)]


def test_metrics_answer_with_a_thousand_idle_sockets_open() -> None:
    m = Metrics(process_collectors=False)
    m.set_reboot_required("n1", True)
    port = m.serve("127.0.0.1", 0)
    baseline = set(threading.enumerate())
    idle: list[socket.socket] = []
    try:
        idle = open_idle(port, 1000)
        started = time.monotonic()
        status, body = scrape(port)
        latency = time.monotonic() - started
        assert status == 200
        assert b'kured_reboot_required{node="n1"} 1.0' in body
        assert m._server is not None
        assert m._server.open_connections() <= metrics_module.MAX_CONNECTIONS
        # An evicted connection's thread is still ending for a moment after its socket closed: the cap holds
        # once it has, and the open connections (above) held it at once.
        assert eventually(lambda: request_threads(baseline) <= metrics_module.MAX_CONNECTIONS, timeout=5)
        print(f"1000 idle sockets: +{request_threads(baseline)} threads, /metrics in {latency:.3f} s")
    finally:
        for sock in idle:
            sock.close()
        m.close()


def test_the_oldest_idle_connection_is_closed_to_make_room() -> None:
    with serving(_Small, _Hold) as port:
        idle = open_idle(port, 4)
        try:
            newcomer = socket.create_connection(("127.0.0.1", port), timeout=10)
            assert idle[0].recv(1) == b""  # hung up: the oldest waiting connection made room
            newcomer.close()
        finally:
            for sock in idle:
                sock.close()


def test_a_slow_trickle_is_cut_at_the_whole_request_deadline() -> None:
    with serving(_Small, _Hold) as port, socket.create_connection(("127.0.0.1", port), timeout=10) as slow:
        started = time.monotonic()
        cut = None
        for byte in b"GET /metrics HTTP/1.1\r\nHost: x\r\n" * 10:  # a byte every 50 ms: no read ever idles
            try:
                slow.sendall(bytes([byte]))
            except OSError:
                cut = time.monotonic() - started
                break
            time.sleep(0.05)
        if cut is None:
            assert slow.recv(1) == b""
            cut = time.monotonic() - started
        assert cut < 5.0  # the deadline is 0.5 s; a per-read timeout would never have fired


def test_connections_being_answered_are_not_evicted_and_a_newcomer_is_refused() -> None:
    _Hold.release.clear()
    _Hold.holding.clear()
    with serving(_Small, _Hold) as port:
        holders = []
        try:
            for _ in range(4):
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                conn.request("GET", "/")
                holders.append(conn)
            assert eventually(lambda: len(_Hold.holding) == 4, timeout=10)
            with socket.create_connection(("127.0.0.1", port), timeout=10) as newcomer:
                assert newcomer.recv(1) == b""  # closed at once: nobody to evict
            _Hold.release.set()
            assert [c.getresponse().status for c in holders] == [204] * 4
        finally:
            _Hold.release.set()
            for conn in holders:
                conn.close()


def test_threads_come_back_after_the_deadline() -> None:
    with running(_Small, _Hold) as server:
        port = int(server.server_address[1])
        baseline = set(threading.enumerate())
        for _ in range(3):
            idle = open_idle(port, 20)
            try:
                # the cap is on connections that have a thread; an evicted one's thread may still be ending
                assert server.open_connections() <= _Small.max_connections
                assert [s.recv(1) for s in idle] == [b""] * 20  # evicted at once, or cut at the deadline
            finally:
                for sock in idle:
                    sock.close()
        assert eventually(lambda: request_threads(baseline) == 0, timeout=5)
