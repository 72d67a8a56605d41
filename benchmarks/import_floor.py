"""What an agent's start-up costs before pykured's own code: CPU and resident memory of a fresh interpreter
that imports nothing, then only the libraries an agent in a pod loads (urllib3 with ssl, prometheus-client,
watchdog's inotify observer, ConfigArgParse, google-re2), then the agent itself (``pykured.agent.wiring``
and the in-cluster client), and how much of the agent's own import is the standard library's dataclass
decorator writing each class's methods. Median of N runs each; the byte-code of the tree is compiled first,
as the image's is, by the interpreter measured.

    PYTHONPATH=. .venv/bin/python benchmarks/import_floor.py [--runs 9] [--python PATH]

``--python`` measures another interpreter (a virtualenv with the agent's dependencies installed: for the
libraries alone ``pip install urllib3 prometheus-client watchdog ConfigArgParse google-re2``, for the agent
also ``python-dateutil``); run it from a directory with few entries (the interpreter's path starts with it).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
AGENT = "import urllib3, pykured.agent.wiring, pykured.kube.client"
STEPS = {
    "the interpreter alone": "pass",
    "the libraries alone": (
        "import ssl, urllib3, prometheus_client, watchdog.observers, configargparse, re2, json, logging, "
        "dataclasses"
    ),
    "the agent (pykured.agent.wiring, the in-cluster client)": AGENT,
}
RSS = "\nprint(open('/proc/self/status').read().split('VmRSS:')[1].split()[0])"
DATACLASSES = f"""
import dataclasses, time
import ssl, urllib3, prometheus_client, watchdog.observers, configargparse, re2, json, logging
spent, made, original = [0.0], [0], dataclasses._process_class
def timed(*args, **kwargs):
    began = time.process_time()
    try:
        return original(*args, **kwargs)
    finally:
        spent[0] += time.process_time() - began
        made[0] += 1
dataclasses._process_class = timed
began = time.process_time()
{AGENT}
print(time.process_time() - began, spent[0], made[0])
"""


def measure(python: str, code: str, runs: int) -> tuple[float, float]:
    """(median CPU seconds, median resident KiB) of ``python -c code``."""
    cpu, rss = [], []
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run(
            [python, "-c", code + RSS], env=env, cwd=ROOT, check=True, capture_output=True, text=True
        )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        rss.append(int(done.stdout.split()[-1]))
    return statistics.median(cpu), statistics.median(rss)


def dataclass_share(python: str, runs: int) -> tuple[float, float, int]:
    """(median CPU seconds of pykured's import after the libraries, of them in the dataclass decorator, the
    number of classes it made)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    rows = []
    for _ in range(runs):
        done = subprocess.run(
            [python, "-c", DATACLASSES], env=env, cwd=ROOT, check=True, capture_output=True, text=True
        )
        total, spent, made = done.stdout.split()
        rows.append((float(total), float(spent), int(made)))
    return (
        statistics.median(r[0] for r in rows),
        statistics.median(r[1] for r in rows),
        rows[0][2],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--python", default=sys.executable, help="the interpreter to measure")
    opts = parser.parse_args()
    subprocess.run([opts.python, "-m", "compileall", "-q", str(ROOT / "pykured")], check=True)
    asked = [opts.python, "-c", "import sys; print(sys.version.split()[0])"]
    version = subprocess.run(asked, check=True, capture_output=True, text=True).stdout.strip()
    print(f"Python {version} ({opts.python})")
    for name, code in STEPS.items():
        cpu, rss = measure(opts.python, code, opts.runs)
        print(f"{name:<58} {cpu * 1000:6.0f} ms CPU  {rss / 1024:5.1f} MiB resident")
    total, spent, made = dataclass_share(opts.python, opts.runs)
    print(
        f"{'pykured after the libraries':<58} {total * 1000:6.0f} ms CPU, of it the dataclass decorator "
        f"{spent * 1000:.0f} ms ({made} classes)"
    )


if __name__ == "__main__":
    main()
