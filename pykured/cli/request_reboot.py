"""``pykured request-reboot NODE... --reason TEXT [--cancel]``: ask the agents to reboot nodes once.

Each request is bound to its node's current bootID; ``--cancel`` withdraws it. The work is in
:mod:`pykured.fleet.requester`. The exit code: 0 done, 1 a failure told in one line on stderr (no
traceback), 2 a usage error (argparse).
"""

from __future__ import annotations

import argparse
import datetime
from collections.abc import Sequence
from typing import TextIO

from pykured.cli import options
from pykured.cli.output import run, streams
from pykured.fleet import requester
from pykured.gocompat import logrus


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def request_reboot_main(argv: Sequence[str], *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out, err = streams(out, err)
    prog = "pykured request-reboot"
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Ask pykured to reboot nodes once: a request bound to each node's current bootID.",
    )
    parser.add_argument(
        "nodes",
        nargs="*",
        metavar="NODE",
        help=f"default inside an agent's pod: {options.env_var('node-id')}",
    )
    parser.add_argument("--selector", "-l", default="", help="a label selector")
    parser.add_argument("--all", action="store_true", dest="all_nodes", help="every node")
    parser.add_argument("--reason", default="", help="why (shown in Events, notifications and status)")
    parser.add_argument("--cancel", action="store_true", help="withdraw the request instead")
    options.add(parser, options.CLUSTER)
    opts = parser.parse_args(list(argv))
    names = list(opts.nodes)
    here = options.agent_value("node-id")  # inside an agent's pod: its own node
    if not names and not opts.selector and not opts.all_nodes and here:
        names = [here]
    if sum(bool(x) for x in (names, opts.selector, opts.all_nodes)) != 1:
        parser.error("give NODE..., --selector SELECTOR or --all (exactly one)")
    if not opts.cancel and not opts.reason.strip():
        parser.error("--reason TEXT is required")
    logrus.configure("text", "warning")

    def body() -> int:
        kube = options.kube(opts)
        views = requester.nodes(kube, names=names, selector=opts.selector, all_nodes=opts.all_nodes)
        if opts.cancel:
            outcomes = requester.cancel(kube, views)
        else:
            who = requester.whoami(kube)
            outcomes = requester.request_reboot(kube, views, reason=opts.reason, requested_by=who, now=_now())
        for o in outcomes:
            out.write(requester.describe(o, opts.reason) + "\n")
        return 0

    return run(prog, err, body)
