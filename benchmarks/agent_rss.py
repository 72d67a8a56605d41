"""Resident memory of a running pykured agent, with and without a notification URL.

Starts the local test control plane and one real agent process (``python -m pykured``) per configuration,
lets it settle (lock, sentinel watch, metrics server up), then reads ``VmRSS`` from ``/proc/<pid>/status``.
With a URL the agent also completes a reboot cycle, so the notification code path has run.

    PYTHONPATH=. .venv/bin/python benchmarks/agent_rss.py
"""

from __future__ import annotations

import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from pykured_dev.testenv import Cluster
from pykured_dev.testenv.fleet import Fleet


class _Sink(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    sink = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    url = f"generic+http://127.0.0.1:{sink.server_port}/hook?template=json"
    cluster = Cluster().start()
    try:
        for label, extra in (
            ("no notify URL", []),
            ("--notify-url (generic json, apprise plugin)", [f"--notify-url={url}"]),
        ):
            ns = cluster.new_namespace("rss")
            cluster.create_daemonset(ns, "kured")
            node = cluster.add_nodes(cluster.unique("rss"))[0]
            with Fleet(
                cluster,
                workdir=Path(tempfile.mkdtemp()),
                spawn="exec",  # each agent pays its own start-up, as in a pod
                args=[f"--ds-namespace={ns}", "--lock-backend=lease", *extra],
            ) as fleet:
                fleet.add(node)
                if extra:
                    fleet.touch(node)

                    def rebooted(name: str = node) -> bool:
                        return fleet.slots[name].reboots == 1

                    fleet.wait_for(rebooted, timeout=60)
                time.sleep(5)
                proc = fleet.slots[node].proc
                assert proc is not None
                print(f"{label:48s} VmRSS {rss_mb(proc.pid):6.1f} MB")
    finally:
        cluster.stop()
        sink.shutdown()


if __name__ == "__main__":
    main()
