"""``pykured unquarantine NODE...``: end the quarantine of nodes whose drain would not finish.

The work is in :mod:`pykured.fleet.quarantine`; ``pykured status`` and ``pykured plan`` show which nodes are
quarantined and why (docs/maintenance-policy.md, "Drain escalation").
"""

from __future__ import annotations

import argparse
import sys

from pykured.cli import options
from pykured.core import errors
from pykured.gocompat import logrus


def unquarantine_main(argv: list[str]) -> int:
    """``pykured unquarantine``; returns the exit code (1: a node could not be unquarantined)."""
    parser = argparse.ArgumentParser(
        prog="pykured unquarantine",
        description="End the quarantine of each NODE (--drain-escalation=quarantine): remove its "
        "pykured.dev/quarantined record and uncordon it if pykured cordoned it. Its agent may then take the "
        "lock again.",
    )
    parser.add_argument("nodes", nargs="+", metavar="NODE", help="the quarantined nodes")
    options.add(parser, options.CLUSTER)
    opts = parser.parse_args(argv)
    logrus.configure("text", "warning")
    from pykured.fleet.quarantine import unquarantine

    code = 0
    try:
        kube = options.kube(opts)
    except errors.PykuredError as exc:
        print(f"pykured unquarantine: {exc}", file=sys.stderr)
        return 1
    for node in opts.nodes:
        try:
            print(unquarantine(kube, node).describe())
        except errors.PykuredError as exc:
            print(f"pykured unquarantine: node {node}: {exc}", file=sys.stderr)
            code = 1
    return code
