"""The fault proxy moves bytes, resets on ``drop``, holds them on ``stall`` and lets them flow again."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

import pytest

from pykured_dev.soak.proxy import FaultProxy


@pytest.fixture
def echo() -> Iterator[tuple[str, int]]:
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return

            def pump(c: socket.socket = conn) -> None:
                with c, contextlib.suppress(OSError):  # the proxy resets connections on purpose
                    while data := c.recv(1024):
                        c.sendall(data)

            threading.Thread(target=pump, daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()
    stop.set()
    thread.join(timeout=2)
    server.close()


def _roundtrip(port: int, payload: bytes, timeout: float = 5.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(payload)
        return sock.recv(1024)


def test_pass_forwards_both_ways(echo: tuple[str, int]) -> None:
    proxy = FaultProxy(echo).start()
    try:
        assert _roundtrip(proxy.port, b"hello") == b"hello"
    finally:
        proxy.close()


def test_drop_resets_open_and_new_connections(echo: tuple[str, int]) -> None:
    proxy = FaultProxy(echo).start()
    try:
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as sock:
            sock.sendall(b"a")
            assert sock.recv(16) == b"a"
            proxy.set_mode("drop")
            with pytest.raises(OSError):
                sock.sendall(b"b")
                if not sock.recv(16):
                    raise ConnectionResetError
        with pytest.raises(OSError):
            if not _roundtrip(proxy.port, b"c"):
                raise ConnectionResetError
        proxy.set_mode("pass")
        assert _roundtrip(proxy.port, b"d") == b"d"
    finally:
        proxy.close()


def test_stall_holds_bytes_until_pass(echo: tuple[str, int]) -> None:
    proxy = FaultProxy(echo).start()
    try:
        proxy.set_mode("stall")
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=0.5) as sock:
            sock.sendall(b"held")
            with pytest.raises(TimeoutError):
                sock.recv(16)
            proxy.set_mode("pass")
            sock.settimeout(5)
            assert sock.recv(16) == b"held"
    finally:
        proxy.close()


def test_unknown_mode_is_refused(echo: tuple[str, int]) -> None:
    proxy = FaultProxy(echo)
    with pytest.raises(ValueError, match="flaky"):
        proxy.set_mode("flaky")
    proxy.close()
