"""``pykured plan [NODE...] [-l SELECTOR] [-o json]``: what the roll will do, read only.

Per node whether it needs a reboot and why, what holds it, its place in the order, and when the roll should
end (:mod:`pykured.fleet.plan`), from what the agents publish, the lock holders and the policy ConfigMap.
The exit code: 0 done, 1 a failure told in one line on stderr (no traceback), 2 a usage error (argparse).
"""

from __future__ import annotations

import argparse
import datetime
import json
from collections.abc import Callable, Sequence
from typing import TextIO

from pykured.cli import options
from pykured.cli.output import run, streams
from pykured.fleet import plan, requester
from pykured.fleet.freeze import policy_or_why
from pykured.gocompat import logrus


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def plan_main(
    argv: Sequence[str],
    *,
    out: TextIO | None = None,
    err: TextIO | None = None,
    now: Callable[[], datetime.datetime] = _now,
) -> int:
    """``pykured plan [NODE…] [-l SELECTOR] [-o json]``: read-only; what the roll will do, what holds it."""
    out, err = streams(out, err)
    prog = "pykured plan"
    parser = argparse.ArgumentParser(
        prog=prog,
        description="What the roll will do: per node whether it needs a reboot and why, what holds it, its "
        "place in the order, and when the roll should end. Reads only.",
    )
    parser.add_argument("nodes", nargs="*", metavar="NODE", help="only these (get, not list: kured's RBAC)")
    parser.add_argument("--selector", "-l", default="")
    parser.add_argument("-o", "--output", choices=["text", "json"], default="text")
    options.add(parser, options.LOCK, options.POLICY)
    options.add_limit_flags(parser)
    options.add(parser, options.CLUSTER)
    opts = parser.parse_args(list(argv))
    logrus.configure("text", "error")

    def body() -> int:
        kube = options.kube(opts)
        views, locks = requester.fleet(
            kube, names=opts.nodes, selector=opts.selector, **options.lock_place(opts)
        )
        doc, unreadable = policy_or_why(kube, namespace=opts.ds_namespace, name=opts.policy_configmap)
        moment = now()
        result = plan.build(
            views,
            locks,
            freeze=doc.in_force(moment),
            unreadable=[unreadable] if unreadable else [],
            concurrency=opts.concurrency,
            blackouts=doc.blackouts,
            limit=requester.limit(
                kube,
                namespace=opts.ds_namespace,
                ds_name=opts.ds_name,
                concurrency=opts.concurrency,
                budget=opts.max_unavailable,
            ),
            now=moment,
        )
        if opts.output == "json":
            out.write(json.dumps(plan.to_json(result), sort_keys=True) + "\n")
        else:
            out.write(plan.render_table(result))
        return 0

    return run(prog, err, body)
