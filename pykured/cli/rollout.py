"""``pykured rollout``: request a reboot of a set of nodes, paced by the lock; ``rollout status [ID]`` and
``rollout cancel ID``.

With ``--canary N`` the first ``N`` nodes go alone and the rest once they passed
(:mod:`pykured.fleet.canaryrun`, which sets the halt when a canary fails). The work is in
:mod:`pykured.fleet.requester`, the progress in :mod:`pykured.fleet.rollout`. The exit code: 0 done, 1 a
failure told in one line on stderr (no traceback), 2 a usage error (argparse).
"""

from __future__ import annotations

import argparse
import datetime
import json
import secrets
import time
from collections.abc import Sequence
from typing import TextIO

from pykured.cli import options
from pykured.cli.output import run, streams
from pykured.fleet import requester, rollout
from pykured.fleet.canaryrun import canary_rollout
from pykured.gocompat import logrus
from pykured.gocompat.goflags import GoValueError, parse_duration


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def rollout_main(argv: Sequence[str], *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out, err = streams(out, err)
    args = list(argv)
    if args and args[0] == "status":
        return _rollout_status(args[1:], out=out, err=err)
    if args and args[0] == "cancel":
        return _rollout_cancel(args[1:], out=out, err=err)
    prog = "pykured rollout"
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Request a reboot of every matching node; the lock's concurrency paces them. "
        "Subcommands: 'rollout status [ID]', 'rollout cancel ID'.",
    )
    parser.add_argument("--selector", "-l", default="", help="a label selector (or --all)")
    parser.add_argument("--all", action="store_true", dest="all_nodes")
    parser.add_argument("--reason", required=True)
    parser.add_argument("--id", default="", help="the rollout id (default: r<UTC date>-<time>-<random>)")
    parser.add_argument(
        "--canary",
        type=int,
        default=0,
        metavar="N",
        help="request the first N nodes alone; the rest once they came back, passed their gates and soaked",
    )
    parser.add_argument("--canary-soak", default="30m", help="how long each canary stays Ready (Go duration)")
    parser.add_argument("--canary-timeout", default="1h", help="a canary not through by then fails it all")
    parser.add_argument("--interval", type=float, default=5.0, help=argparse.SUPPRESS)
    options.add(parser, options.LOCK, options.POLICY, options.CLUSTER)
    opts = parser.parse_args(args)
    if bool(opts.selector) == bool(opts.all_nodes):
        parser.error("give --selector SELECTOR or --all (exactly one)")
    if opts.id and not rollout.valid_id(opts.id):
        parser.error(f"invalid --id {opts.id!r}: lower-case letters, digits, '-' and '.', at most 63")
    try:
        soak, timeout = _duration(opts.canary_soak), _duration(opts.canary_timeout)
    except GoValueError as exc:
        parser.error(f"invalid --canary-soak or --canary-timeout: {exc}")
    if opts.canary < 0:
        parser.error("--canary must be 0 (off) or more")
    logrus.configure("text", "warning")

    def body() -> int:
        kube = options.kube(opts)
        now = _now()
        rid = opts.id or rollout.new_id(now, secrets.token_hex(2))
        views = requester.nodes(kube, selector=opts.selector, all_nodes=opts.all_nodes)
        who = requester.whoami(kube)
        if opts.canary > 0:
            passed = canary_rollout(
                kube, views, canaries=opts.canary, reason=opts.reason, rid=rid, who=who, soak=soak,
                timeout=timeout, interval=opts.interval, namespace=opts.ds_namespace, ds_name=opts.ds_name,
                annotation=opts.lock_annotation, lease_prefix=options.lease_prefix(opts),
                policy_configmap=opts.policy_configmap, out=out,
            )  # fmt: skip
            return 0 if passed else 1
        outcomes = requester.request_reboot(
            kube, views, reason=opts.reason, requested_by=who, now=now, rollout_id=rid
        )
        out.write(f"rollout {rid}: reboot requested on {len(outcomes)} node(s)\n")
        for o in outcomes:
            out.write(requester.describe(o, opts.reason) + "\n")
        out.write(f"follow it with: pykured rollout status {rid} --watch\n")
        return 0

    return run(prog, err, body)


def _duration(text: str) -> datetime.timedelta:
    return datetime.timedelta(microseconds=parse_duration(text) // 1000)


def _rollout_status(argv: list[str], *, out: TextIO, err: TextIO) -> int:
    prog = "pykured rollout status"
    parser = argparse.ArgumentParser(prog=prog, description="A rollout's progress (the newest by default).")
    parser.add_argument("id", nargs="?", default="")
    parser.add_argument("--selector", "-l", default="")
    parser.add_argument("-o", "--output", choices=["text", "json"], default="text")
    parser.add_argument("--watch", "-w", action="store_true", help="refresh until every node rebooted")
    parser.add_argument("--interval", type=float, default=2.0)
    options.add(parser, options.CLUSTER)
    opts = parser.parse_args(argv)
    logrus.configure("text", "warning")

    def body() -> int:
        kube = options.kube(opts)
        while True:
            prog_ = requester.rollout_progress(kube, opts.id, opts.selector)
            if opts.output == "json":
                out.write(json.dumps(rollout.to_json(prog_), sort_keys=True) + "\n")
            else:
                out.write(rollout.render(prog_))
            out.flush()
            if not opts.watch or prog_.complete:
                return 0
            time.sleep(opts.interval)

    return run(prog, err, body)


def _rollout_cancel(argv: list[str], *, out: TextIO, err: TextIO) -> int:
    prog = "pykured rollout cancel"
    parser = argparse.ArgumentParser(prog=prog, description="Withdraw a rollout's pending requests.")
    parser.add_argument("id")
    options.add(parser, options.CLUSTER)
    opts = parser.parse_args(argv)
    logrus.configure("text", "warning")

    def body() -> int:
        kube = options.kube(opts)
        prog_ = requester.rollout_progress(kube, opts.id)
        pending = [n.node for n in prog_.nodes if n.progress is rollout.Progress.PENDING]
        if not pending:
            out.write(f"rollout {opts.id}: nothing pending\n")
            return 0
        for o in requester.cancel(kube, requester.nodes(kube, names=pending)):
            out.write(requester.describe(o, "") + "\n")
        return 0

    return run(prog, err, body)
