"""``pykured status [NODE...] [-l SELECTOR] [-o json] [--watch]``: the fleet's reboot state.

One row per node (:mod:`pykured.fleet.view`), read from what the agents publish, the lock holders and the
freeze (:mod:`pykured.fleet.freeze`), with the lock's limit under the agents' ``--max-unavailable``; with
nodes named, each one's running drain follows: the pods it waits on, for how long and why. The
exit code: 0 done, 1 a failure told in one line on stderr (no traceback), 2 a usage error (argparse).
"""

from __future__ import annotations

import argparse
import datetime
import json
import time
from collections.abc import Callable, Sequence
from typing import TextIO

from pykured.cli import options
from pykured.cli.output import control, run, streams
from pykured.fleet import freeze, requester
from pykured.fleet import view as fleetview
from pykured.gocompat import logrus


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def status_main(
    argv: Sequence[str],
    *,
    out: TextIO | None = None,
    err: TextIO | None = None,
    now: Callable[[], datetime.datetime] = _now,
) -> int:
    out, err = streams(out, err)
    prog = "pykured status"
    parser = argparse.ArgumentParser(
        prog=prog, description="The fleet's reboot state, read from the API server."
    )
    parser.add_argument("nodes", nargs="*", metavar="NODE", help="only these (get, not list: kured's RBAC)")
    parser.add_argument("--selector", "-l", default="")
    parser.add_argument("-o", "--output", choices=["text", "json"], default="text")
    parser.add_argument("--watch", "-w", action="store_true", help="refresh every --interval seconds")
    parser.add_argument("--interval", type=float, default=2.0)
    options.add(parser, options.LOCK, options.POLICY)
    options.add_limit_flags(parser)
    options.add(parser, options.CLUSTER)
    opts = parser.parse_args(list(argv))
    logrus.configure("text", "error")

    def body() -> int:
        kube = options.kube(opts)
        while True:
            frozen = freeze.in_force(kube, namespace=opts.ds_namespace, name=opts.policy_configmap, now=now())
            views, locks = requester.fleet(
                kube, names=opts.nodes, selector=opts.selector, **options.lock_place(opts)
            )
            limit = requester.limit(
                kube, namespace=opts.ds_namespace, ds_name=opts.ds_name, concurrency=opts.concurrency,
                budget=opts.max_unavailable,
            )  # fmt: skip
            moment = now()
            table = fleetview.rows(views, locks, now=moment)
            if opts.output == "json":
                data = fleetview.to_json(table, locks, limit=limit, now=moment)
                if frozen is not None:
                    data["freeze"] = json.loads(frozen.to_json())
                out.write(json.dumps(data, sort_keys=True) + "\n")
            else:
                if opts.watch:
                    control(out, "\x1b[H\x1b[2J")  # the screen clear is meant; the values below are not
                if frozen is not None:
                    out.write(freeze.freeze_line(frozen))
                out.write(fleetview.render_table(table, locks, now=moment, limit=limit))
                if opts.nodes:
                    out.write(fleetview.render_drains(table, now=moment))
            out.flush()
            if not opts.watch:
                return 0
            time.sleep(opts.interval)

    return run(prog, err, body)
