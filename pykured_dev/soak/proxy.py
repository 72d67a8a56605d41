"""A TCP proxy on 127.0.0.1 in front of the API server, one per agent, that can cut the agent off.

``pass`` forwards bytes both ways. ``drop`` resets every open connection and every new one at once (the
API server is unreachable: connection reset / refused). ``stall`` stops forwarding without closing
anything, and new connections are accepted but never reach the API server (a black hole: requests hang
until the client's own timeout). Back to ``pass``, stalled connections flow again. TLS is end to end: the
proxy only moves bytes, so the agent still verifies the API server's certificate.
"""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import threading

MODES = ("pass", "drop", "stall")
_TICK = 0.1


def _reset(sock: socket.socket) -> None:
    """Close with RST (SO_LINGER 0), as a dropped network path looks to the client."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


class FaultProxy:
    """One listening port forwarding to ``upstream``; see the module docstring."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.mode = "pass"
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, name=f"proxy-{self.port}", daemon=True)
        self.connections = 0

    def start(self) -> FaultProxy:
        """Start accepting."""
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop accepting; open connections end within a tick."""
        self._stop.set()
        with contextlib.suppress(OSError):
            self._listener.close()

    def set_mode(self, mode: str) -> None:
        """Switch to ``pass``, ``drop`` or ``stall``."""
        if mode not in MODES:
            raise ValueError(mode)
        self.mode = mode

    def _accept(self) -> None:
        self._listener.settimeout(_TICK * 5)
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if self.mode == "drop":
                _reset(client)
                continue
            self.connections += 1
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        upstream: socket.socket | None = None
        try:
            while self.mode == "stall" and not self._stop.is_set():
                self._stop.wait(_TICK)
            if self.mode == "drop" or self._stop.is_set():
                return
            upstream = socket.create_connection(self.upstream, timeout=5)
            upstream.settimeout(None)
            self._pump(client, upstream)
        except OSError:
            pass
        finally:
            _reset(client)
            if upstream is not None:
                _reset(upstream)

    def _pump(self, client: socket.socket, upstream: socket.socket) -> None:
        peer = {client: upstream, upstream: client}
        while not self._stop.is_set():
            if self.mode == "drop":
                return
            if self.mode == "stall":
                self._stop.wait(_TICK)
                continue
            readable, _, _ = select.select([client, upstream], [], [], _TICK)
            for sock in readable:
                data = sock.recv(65536)
                if not data:
                    return
                peer[sock].sendall(data)
