"""Process RSS with and without a notification URL configured (VmRSS of a fresh interpreter, before and
after).

Each scenario runs in a fresh interpreter (1 warm-up + N measured runs, median reported). A loopback HTTP
receiver is started in the same process before the measurement, so its cost is part of every scenario.
Run: .venv/bin/python benchmarks/notify_memory.py [runs]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PRELUDE = """
import http.server, threading, time, sys
def rss():
    for line in open('/proc/self/status'):
        if line.startswith('VmRSS:'):
            return int(line.split()[1]) / 1024
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get('Content-Length') or 0))
        self.send_response(200); self.send_header('Content-Length', '0'); self.end_headers()
    def log_message(self, *a): pass
srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), H)
threading.Thread(target=srv.serve_forever, daemon=True).start()
port = srv.server_address[1]
start = time.perf_counter()
"""

SCENARIOS = {
    "bare interpreter + loopback receiver": "",
    "notify imported, no URL configured": (
        "from pykured.notify import Notifier\nn = Notifier.from_urls()\nassert n.send('Rebooting node n1')\n"
    ),
    "generic raw (native urllib) sent to loopback": (
        "from pykured.notify import Notifier\n"
        "n = Notifier.from_urls(notify_url=f'generic+http://127.0.0.1:{port}/hook')\n"
        "assert n.send('Rebooting node n1')\n"
    ),
    "json:// sent to loopback (one apprise plugin)": (
        "from pykured.notify import Notifier\n"
        "n = Notifier.from_urls(notify_url=f'json://127.0.0.1:{port}/hook')\n"
        "assert n.send('Rebooting node n1')\n"
    ),
    "json:// via apprise.Apprise().add() (all plugins, for comparison)": (
        "import apprise\na = apprise.Apprise()\na.add(f'json://127.0.0.1:{port}/hook')\n"
        "assert a.notify(body='Rebooting node n1')\n"
    ),
    "metrics server started (prometheus-client, own registry)": (
        "from pykured.metrics import Metrics\nm = Metrics()\nm.serve('127.0.0.1', 0)\n"
        "m.set_reboot_required('n1', True)\n"
    ),
}

EPILOGUE = "\nprint(f'{rss():.1f} {len(sys.modules)} {(time.perf_counter() - start) * 1000:.0f}')\n"


def measure(code: str, runs: int) -> tuple[float, int, float]:
    results = []
    for attempt in range(runs + 1):
        out = subprocess.run(
            [sys.executable, "-c", PRELUDE + code + EPILOGUE],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        if attempt:  # the first run warms the page cache and .pyc files
            results.append((float(out[0]), int(out[1]), float(out[2])))
    return (
        statistics.median(r[0] for r in results),
        int(statistics.median(r[1] for r in results)),
        statistics.median(r[2] for r in results),
    )


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    print(f"Python {sys.version.split()[0]}, median of {runs} fresh processes")
    print(f"{'scenario':<66} {'VmRSS MB':>9} {'modules':>8} {'ms':>6}")
    for name, code in SCENARIOS.items():
        rss, modules, ms = measure(code, runs)
        print(f"{name:<66} {rss:>9.1f} {modules:>8} {ms:>6.0f}")


if __name__ == "__main__":
    main()
