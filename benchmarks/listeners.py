"""A real agent's ``/metrics`` listener under N idle and N slow-trickle sockets: threads, RSS, latency.

Starts the local test control plane and one real agent process (``python -m pykured``), waits for its
metrics listener on loopback, then opens N sockets that send nothing and N that send a request head one
byte at a time (a byte per socket every 0.5 s, so no single read ever idles long). While they are held
(reopened as the agent closes them) it samples, every two seconds, the agent's ``Threads`` and ``VmRSS``
(``/proc/<pid>/status``) and the latency of a real ``GET /metrics``. Everything is on 127.0.0.1 and stops by
itself after ``--seconds``.

    PYTHONPATH=. .venv/bin/python benchmarks/listeners.py [--sockets 1000] [--seconds 20]
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import resource
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path

from pykured_dev.testenv import Cluster
from pykured_dev.testenv.fleet import Fleet
from pykured_dev.testenv.procs import free_port

HEAD = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: " + b"x" * 200 + b"\r\n\r\n"


def proc_status(pid: int) -> tuple[int, float]:
    """``(Threads, VmRSS in MB)`` of a process."""
    threads, rss = 0, 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            threads = int(line.split()[1])
        elif line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
    return threads, rss


def scrape(port: int) -> float | None:
    """Seconds for one ``GET /metrics`` (None when it failed within 10 s)."""
    started = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/metrics")
        response = conn.getresponse()
        response.read()
        return time.monotonic() - started if response.status == 200 else None
    except OSError:
        return None
    finally:
        conn.close()


class Flood:
    """N idle and N trickling sockets against one port, reopened when the server closes them."""

    def __init__(self, port: int, n: int) -> None:
        self.port, self.n = port, n
        self.idle: list[socket.socket | None] = [None] * n
        self.slow: list[tuple[socket.socket, int] | None] = [None] * n
        self.reopened = 0
        self.refused = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _connect(self) -> socket.socket | None:
        try:
            sock = socket.create_connection(("127.0.0.1", self.port), timeout=2)
        except OSError:
            self.refused += 1
            return None
        sock.setblocking(False)
        return sock

    def _alive(self, sock: socket.socket) -> bool:
        try:
            return sock.recv(1, socket.MSG_PEEK) != b""
        except BlockingIOError:
            return True
        except OSError:
            return False

    def _run(self) -> None:
        while not self._stop.is_set():
            for i in range(self.n):
                sock = self.idle[i]
                if sock is None or not self._alive(sock):
                    if sock is not None:
                        sock.close()
                        self.reopened += 1
                    self.idle[i] = self._connect()
                entry = self.slow[i]
                if entry is not None:
                    slow, sent = entry
                    try:
                        slow.send(HEAD[sent : sent + 1])
                        entry = (slow, (sent + 1) % len(HEAD))
                    except OSError:
                        slow.close()
                        self.reopened += 1
                        entry = None
                if entry is None:
                    fresh = self._connect()
                    entry = (fresh, 0) if fresh is not None else None
                self.slow[i] = entry
                if self._stop.is_set():
                    return
            self._stop.wait(0.5)

    def __enter__(self) -> Flood:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        for sock in [*self.idle, *(e[0] for e in self.slow if e is not None)]:
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.close()


def sample(pid: int, port: int, label: str, rows: list[tuple[str, int, float, float | None]]) -> None:
    threads, rss = proc_status(pid)
    latency = scrape(port)
    rows.append((label, threads, rss, latency))
    shown = f"{latency * 1000:7.1f} ms" if latency is not None else "   failed"
    print(f"{label:>10s}  threads {threads:4d}  VmRSS {rss:6.1f} MB  GET /metrics {shown}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sockets", type=int, default=1000, help="N: idle sockets, and as many slow ones")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long the flood lasts")
    options = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 2 * options.sockets + 256
    if soft < wanted:  # this process holds 2N sockets
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))
    port = free_port()
    cluster = Cluster().start()
    try:
        ns = cluster.new_namespace("listen")
        cluster.create_daemonset(ns, "kured")
        node = cluster.add_nodes(cluster.unique("listen"))[0]
        args = [
            f"--ds-namespace={ns}",
            "--lock-backend=lease",
            "--metrics-host=127.0.0.1",
            f"--metrics-port={port}",
        ]
        with Fleet(cluster, workdir=Path(tempfile.mkdtemp()), spawn="exec", args=args) as fleet:
            fleet.add(node)
            assert fleet.wait_for(lambda: scrape(port) is not None, timeout=30), fleet.log_text(node)
            proc = fleet.slots[node].proc
            assert proc is not None
            rows: list[tuple[str, int, float, float | None]] = []
            for _ in range(3):
                sample(proc.pid, port, "before", rows)
                time.sleep(0.5)
            started = time.monotonic()
            with Flood(port, options.sockets) as flood:
                while time.monotonic() - started < options.seconds:
                    time.sleep(2.0)
                    sample(proc.pid, port, f"t+{time.monotonic() - started:4.0f}s", rows)
            time.sleep(2.0)
            sample(proc.pid, port, "after", rows)
            during = [r for r in rows if r[0].startswith("t+")]
            latencies = [r[3] for r in during if r[3] is not None]
            print(
                f"\n{options.sockets} idle + {options.sockets} trickling sockets, {options.seconds:.0f} s: "
                f"agent threads max {max(r[1] for r in during)} (before {rows[0][1]}), "
                f"VmRSS max {max(r[2] for r in during):.1f} MB (before {rows[0][2]:.1f}), "
                f"/metrics answered {len(latencies)}/{len(during)}, "
                f"median {statistics.median(latencies) * 1000 if latencies else float('nan'):.1f} ms, "
                f"max {max(latencies) * 1000 if latencies else float('nan'):.1f} ms; "
                f"client reconnects {flood.reopened}, connects refused {flood.refused}"
            )
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
