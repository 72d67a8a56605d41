"""``pykured freeze`` / ``pykured unfreeze``: set, show or clear the cluster-wide freeze, or pause nodes.

``pykured freeze --reason R [--until T] [NODE...]``, ``pykured freeze --status [--json]``, ``pykured
unfreeze [NODE...]``. The freeze lives in the policy ConfigMap the agents watch (docs/maintenance-policy.md);
``unfreeze`` also lifts a halt an agent set there. The work is in :mod:`pykured.fleet.freeze`. Exit 3: the
freeze was set but no agent honours it.
"""

from __future__ import annotations

import argparse
import datetime
import sys

from pykured.cli import options
from pykured.core import errors
from pykured.core.printable import one_line
from pykured.gocompat import logrus


def freeze_main(argv: list[str]) -> int:
    """``pykured freeze``; returns the exit code."""
    return _freeze_command("freeze", argv)


def unfreeze_main(argv: list[str]) -> int:
    """``pykured unfreeze``; returns the exit code."""
    return _freeze_command("unfreeze", argv)


def _freeze_command(command: str, argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog=f"pykured {command}",
        description="Stop (or allow again) every new reboot, or those of the NODEs named; a node already "
        "rebooting finishes. Exit 3: the freeze was set but no agent honours it.",
    )
    parser.add_argument("nodes", nargs="*", metavar="NODE", help="pause only these nodes (the fleet goes on)")
    if command == "freeze":
        parser.add_argument("--reason", default="", help="why (an incident id), recorded with the freeze")
        parser.add_argument("--until", default="", help="RFC 3339 time (local to --time-zone) or +DURATION")
        parser.add_argument("--status", action="store_true", help="show the freeze instead of setting it")
        parser.add_argument("--json", action="store_true", help="with --status: print JSON")
        options.add_agent_flag(parser, "time-zone", text="the time zone of --until (the agents' --time-zone)")
    options.add(parser, options.CLUSTER, options.POLICY)
    opts = parser.parse_args(argv)
    logrus.configure("text", "warning")
    from pykured.fleet import freeze as freezecmd

    where = {"namespace": opts.ds_namespace, "name": opts.policy_configmap}
    shown = f"{opts.ds_namespace}/{opts.policy_configmap}"
    now = datetime.datetime.now(datetime.UTC)
    try:
        kube = options.kube(opts)
        if command == "unfreeze":
            if opts.nodes:
                freezecmd.unpause_nodes(kube, opts.nodes)
                print(f"unpaused {', '.join(opts.nodes)}")
                return 0
            lifted = freezecmd.unfreeze(kube, **where)
            print(f"unfrozen ({shown})")
            if lifted is not None:
                print(f"lifted the halt: {one_line(lifted.describe())}")
            return 0
        if opts.status:
            return freezecmd.print_status(kube, now=now, out=sys.stdout, as_json=opts.json, **where)
        if not opts.reason:
            parser.error("--reason is required (e.g. an incident id)")
        until = None
        if opts.until:
            until = freezecmd.until(opts.until, now=now, time_zone=opts.time_zone)
        if opts.nodes:
            record = freezecmd.pause_nodes(kube, opts.nodes, reason=opts.reason, until=until, now=now)
            text = record.describe().removeprefix("frozen")
            print(f"{', '.join(opts.nodes)}: paused{text}")
            return 0
        record = freezecmd.freeze(kube, reason=opts.reason, until=until, now=now, **where)
    except (errors.PykuredError, ValueError) as exc:  # a FreezeError is a ValueError
        print(f"pykured {command}: {exc}", file=sys.stderr)
        return 1
    print(f"{record.describe()} ({shown})")
    return _honoured(kube, where)


def _honoured(kube: options.Kube, where: dict[str, str]) -> int:
    """After a freeze: how many agents honour it; exit 3 (a warning) when none does."""
    from pykured.fleet import freeze

    try:
        honour, agents, others = freeze.honouring(kube, **where)
    except errors.PykuredError as exc:
        print(f"warning: cannot tell which agents honour the freeze: {exc}", file=sys.stderr)
        return 0
    print(freeze.honour_line(honour, agents, others))
    if honour == 0:
        print(
            f"warning: no agent honours this freeze: reboots go on. Agents watch {where['namespace']}/"
            f"{where['name']} only with --policy-configmap set to it and RBAC get/list/watch on it "
            "(docs/maintenance-policy.md)",
            file=sys.stderr,
        )
        return 3
    return 0
