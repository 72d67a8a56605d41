"""pykured under faults, judged from the API server's history: prints a report, exit 1 on any violation.

    .venv/bin/python benchmarks/soak.py --minutes 30 --lock-backend lease
    .venv/bin/python benchmarks/soak.py --minutes 3 --lock-backend daemonset --seed 1234   # replay a run
    .venv/bin/python benchmarks/soak.py --minutes 10 --lock-backend lease --agent-arg=--resume-rolls

12 simulated nodes with real agents, needs at random, blockers, PodDisruptionBudgets, a window that closes
and opens, and faults (agent SIGKILL and SIGTERM, kube-apiserver restarts, an agent cut off from the API
server, foreign writes to the lock, evictions that keep failing, a lock holder's Node deleted). See
``pykured_dev.soak``.
"""

from __future__ import annotations

import argparse
import logging
import sys

from pykured_dev.soak.scenario import Options, run


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--minutes", type=float, default=3.0, help="how long faults are injected")
    parser.add_argument("--seed", type=int, default=None, help="replay a run (default: a random seed)")
    parser.add_argument("--lock-backend", choices=["lease", "daemonset"], default="lease")
    parser.add_argument("--nodes", type=int, default=12)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--fault-every", type=float, default=6.0, help="mean seconds between faults")
    parser.add_argument(
        "--no-requests", dest="requests", action="store_false", help="sentinels only, no reboot requests"
    )
    parser.add_argument(
        "--agent-arg",
        action="append",
        default=[],
        help="one more agent flag, e.g. --agent-arg=--resume-rolls (repeatable)",
    )
    opts = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    report = run(
        Options(
            minutes=opts.minutes,
            seed=opts.seed,
            backend=opts.lock_backend,
            nodes=opts.nodes,
            concurrency=opts.concurrency,
            fault_every=opts.fault_every,
            requests=opts.requests,
            extra_args=tuple(opts.agent_arg),
        ),
        out=sys.stdout,
    )
    print(report.render(), flush=True)
    return 0 if report.ok else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
