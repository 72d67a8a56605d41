"""What an agent's start-up costs before pykured's own code: CPU and resident memory of a fresh interpreter
that imports nothing, then only the libraries an agent in a pod loads (urllib3 with ssl, prometheus-client,
watchdog's inotify observer, ConfigArgParse, google-re2), then the agent itself (``pykured.agent.wiring``
and the in-cluster client). Median of N runs each; the byte-code of the tree is compiled first, as the
image's is.

    PYTHONPATH=. .venv/bin/python benchmarks/import_floor.py [--runs 9]
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEPS = {
    "the interpreter alone": "pass",
    "the libraries alone": (
        "import ssl, urllib3, prometheus_client, watchdog.observers, configargparse, re2, json, logging, "
        "dataclasses"
    ),
    "the agent (pykured.agent.wiring, the in-cluster client)": (
        "import urllib3, pykured.agent.wiring, pykured.kube.client"
    ),
}
RSS = "\nprint(open('/proc/self/status').read().split('VmRSS:')[1].split()[0])"


def measure(code: str, runs: int) -> tuple[float, float]:
    """(median CPU seconds, median resident KiB) of ``python -c code``."""
    cpu, rss = [], []
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run(
            [sys.executable, "-c", code + RSS], env=env, cwd=ROOT, check=True, capture_output=True, text=True
        )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        rss.append(int(done.stdout.split()[-1]))
    return statistics.median(cpu), statistics.median(rss)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    opts = parser.parse_args()
    compileall.compile_dir(ROOT / "pykured", quiet=1)
    for name, code in STEPS.items():
        cpu, rss = measure(code, opts.runs)
        print(f"{name:<58} {cpu * 1000:6.0f} ms CPU  {rss / 1024:5.1f} MiB resident")


if __name__ == "__main__":
    main()
