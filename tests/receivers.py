"""A notification receiver on 127.0.0.1: what shoutrrr's generic service posts, kept for the test to read."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclasses.dataclass
class Receiver:
    """A notification endpoint on 127.0.0.1 (shoutrrr's generic service posts here)."""

    port: int = 0
    bodies: list[str] = dataclasses.field(default_factory=list)

    @property
    def url(self) -> str:
        return f"generic+http://127.0.0.1:{self.port}/notify"

    @property
    def json_url(self) -> str:
        """The same receiver, each message posted as JSON (``{"message": …}``)."""
        return f"generic://127.0.0.1:{self.port}/hook?template=json&disabletls=yes"


def serve_receiver() -> tuple[Receiver, Callable[[], None]]:
    receiver = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            receiver.bodies.append(self.rfile.read(length).decode(errors="replace"))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, fmt: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    receiver.port = int(server.server_address[1])
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def stop() -> None:
        server.shutdown()
        server.server_close()

    return receiver, stop
