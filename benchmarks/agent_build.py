"""CPU time of an agent's start-up on pykured's side: a fresh interpreter that imports the agent and builds it
from ``kustomize/base``'s flags (on an in-memory API, so neither the network nor the Kubernetes client's own
import is counted), and how many modules it then holds. Median of N runs; ``--tree`` names another checkout's
directory to measure it the same way (e.g. a ``git worktree`` of an earlier commit), for a before and after.

    PYTHONPATH=. .venv/bin/python benchmarks/agent_build.py [--runs 15] [--tree DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

BUILD = """
import sys
from typing import cast
from pykured.agent import wiring
from pykured.config.startup import parse
from pykured.kube.client import Kube
from tests.fakes import FakeKube
kube = FakeKube()
kube.add_node("n1")
agent = wiring.build(parse(sys.argv[1:], {}), kube=cast(Kube, kube))
agent.metrics.close()
print(len(sys.modules))
"""


def measure(tree: Path, runs: int) -> tuple[float, float, int]:
    """(median, lowest) CPU seconds of building the agent from ``tree``, and the modules then held."""
    with tempfile.TemporaryDirectory() as scratch:
        argv = ["--node-id=n1", "--metrics-host=127.0.0.1", "--metrics-port=0", "--lock-backend=lease",
                "--reboot-deadline=1h", f"--reboot-sentinel={scratch}/reboot-required"]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(tree)}
        cpu, modules = [], 0
        for _ in range(runs):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            done = subprocess.run(  # in the tree: ``-c`` puts the working directory first on the path
                [sys.executable, "-c", BUILD, *argv],
                env=env,
                cwd=tree,
                check=True,
                capture_output=True,
                text=True,
            )
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
            modules = int(done.stdout.split()[-1])
    return statistics.median(cpu), min(cpu), modules


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--tree", type=Path, action="append", default=[])
    opts = parser.parse_args()
    for tree in [Path(__file__).resolve().parents[1], *opts.tree]:
        median, lowest, modules = measure(tree, opts.runs)
        print(f"{tree}: {median * 1000:.0f} ms CPU (median of {opts.runs}; lowest {lowest * 1000:.0f}), "
              f"{modules} modules")  # fmt: skip


if __name__ == "__main__":
    main()
