"""The command lines of ``pykured request-reboot``, ``rollout``, ``status`` and ``plan``.

Each returns an exit code: 0 done, 1 a failure told in one line on stderr (no traceback), 2 a usage error
(argparse). The work is in :mod:`pykured.fleet.requester`; rendering in :mod:`pykured.fleet.view`,
:mod:`pykured.fleet.plan` and :mod:`pykured.fleet.rollout`.
"""

from __future__ import annotations

import argparse
import datetime
import json
import secrets
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TextIO

from pykured.cli import options
from pykured.cli.output import control
from pykured.core import errors
from pykured.core.printable import one_line
from pykured.fleet import canary, plan, requester, rollout
from pykured.fleet import view as fleetview
from pykured.fleet.freeze import read_freeze, read_policy
from pykured.gocompat import logrus
from pykured.gocompat.goflags import GoValueError, format_duration, parse_duration
from pykured.lock.budget import Budget, BudgetError
from pykured.policy.document import PolicyDoc, PolicyMapError
from pykured.policy.freeze import FreezeRecord
from pykured.requests import record as rebootrequest
from pykured.roll import order as roll

if TYPE_CHECKING:
    from pykured.cycle.state import NodeState
    from pykured.kube.client import Kube


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _fail(prog: str, message: str, err: TextIO) -> int:
    err.write(f"{prog}: error: {message}\n")
    return 1


def _run(prog: str, err: TextIO, body: Callable[[], int]) -> int:
    try:
        return body()
    except KeyboardInterrupt:
        return 130
    except errors.PykuredError as exc:
        return _fail(prog, str(exc), err)


# -- request-reboot ------------------------------------------------------------------------------------------


def _streams(out: TextIO | None, err: TextIO | None) -> tuple[TextIO, TextIO]:
    """The streams a command prints to: those given, else ``sys.stdout``/``sys.stderr`` as they are when it
    runs (the terminal-safe writers :func:`pykured.cli.output.safe_stdio` puts in place), never as they were
    when this module was imported."""
    return out or sys.stdout, err or sys.stderr


def request_reboot_main(argv: Sequence[str], *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out, err = _streams(out, err)
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
            out.write(_describe(o, opts.reason) + "\n")
        return 0

    return _run(prog, err, body)


def _describe(o: requester.Outcome, reason: str) -> str:
    if o.action == "requested":
        return f"{o.node}: reboot requested for bootID {o.boot_id}: {rebootrequest.clean_reason(reason)}"
    if o.action == "unchanged":
        return f"{o.node}: already requested for bootID {o.boot_id} (unchanged)"
    if o.action == "cancelled":
        return f"{o.node}: request withdrawn"
    return f"{o.node}: no request"


# -- rollout -------------------------------------------------------------------------------------------------


def rollout_main(argv: Sequence[str], *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out, err = _streams(out, err)
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
    if opts.id and not rebootrequest.valid_rollout_id(opts.id):
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
        rid = opts.id or rebootrequest.new_rollout_id(now, secrets.token_hex(2))
        views = requester.nodes(kube, selector=opts.selector, all_nodes=opts.all_nodes)
        who = requester.whoami(kube)
        if opts.canary > 0:
            return _canary_rollout(kube, opts, views, rid=rid, who=who, soak=soak, timeout=timeout, out=out)
        outcomes = requester.request_reboot(
            kube, views, reason=opts.reason, requested_by=who, now=now, rollout_id=rid
        )
        out.write(f"rollout {rid}: reboot requested on {len(outcomes)} node(s)\n")
        for o in outcomes:
            out.write(_describe(o, opts.reason) + "\n")
        out.write(f"follow it with: pykured rollout status {rid} --watch\n")
        return 0

    return _run(prog, err, body)


def _duration(text: str) -> datetime.timedelta:
    return datetime.timedelta(microseconds=parse_duration(text) // 1000)


def _in_roll_order(views: Sequence[NodeState], now: datetime.datetime) -> list[NodeState]:
    by_name = {v.name: v for v in views}
    rows = fleetview.rows(views, [], now=now)
    members = sorted((roll.Member(r.node, r.last_reboot, r.waiting_since) for r in rows), key=roll.order_key)
    return [by_name[m.node] for m in members]


def _canary_rollout(
    kube: Kube,
    opts: argparse.Namespace,
    views: Sequence[NodeState],
    *,
    rid: str,
    who: str,
    soak: datetime.timedelta,
    timeout: datetime.timedelta,
    out: TextIO,
) -> int:
    """Request the canaries, wait for them (:mod:`pykured.fleet.canary`), then the rest; a failure
    freezes."""
    ordered = _in_roll_order(views, _now())
    first, rest = ordered[: opts.canary], ordered[opts.canary :]
    started = _now()
    for o in requester.request_reboot(kube, first, reason=opts.reason, requested_by=who, now=started,
                                      rollout_id=rid):  # fmt: skip
        out.write(_describe(o, opts.reason) + " (canary)\n")
    soaked = format_duration(round(soak.total_seconds()) * 1_000_000_000)
    out.write(f"rollout {rid}: {len(first)} canary node(s) first; {len(rest)} after they soaked {soaked}\n")
    out.flush()
    names = [v.name for v in first]
    shown = ""
    while True:
        now = _now()
        locks = requester.lock_holders(
            kube, namespace=opts.ds_namespace, ds_name=opts.ds_name, annotation=opts.lock_annotation,
            lease_prefix=options.lease_prefix(opts),
        )  # fmt: skip
        holders = {h for info in locks for h in info.holders}
        frozen, _ = _read_freeze(kube, opts.ds_namespace, opts.policy_configmap)
        state = canary.check(
            requester.nodes(kube, names=names), rollout=rid, holders=holders, freeze=frozen, soak=soak,
            timeout=timeout, started=started, now=now,
        )  # fmt: skip
        if state.failed:
            return _canary_failed(kube, opts, state.failed, rid=rid, rest=len(rest), out=out)
        if state.done:
            break
        line = "waiting for " + ", ".join(f"{n}: {what}" for n, what in state.waiting)
        if line != shown:
            out.write(line + "\n")
            out.flush()
            shown = line
        time.sleep(opts.interval)
    out.write(f"rollout {rid}: canaries passed ({', '.join(names)}); requesting the rest\n")
    for o in requester.request_reboot(kube, rest, reason=opts.reason, requested_by=who, now=_now(),
                                      rollout_id=rid):  # fmt: skip
        out.write(_describe(o, opts.reason) + "\n")
    out.write(f"follow it with: pykured rollout status {rid} --watch\n")
    return 0


def _canary_failed(
    kube: Kube, opts: argparse.Namespace, why: str, *, rid: str, rest: int, out: TextIO
) -> int:
    """Freeze (unless a freeze is in force already), say so, exit 1."""
    from pykured.policy import writer

    now = _now()
    record = FreezeRecord(reason=f"rollout {rid}: {why}", by=requester.whoami(kube), at=now)
    where = {"namespace": opts.ds_namespace, "name": opts.policy_configmap}
    try:
        current = writer.set_unless_frozen(kube, record=record, now=now, **where)
    except (errors.KubeError, PolicyMapError) as exc:
        out.write(f"rollout {rid}: {why}; could not set the freeze: {exc}\n")
        return 1
    held = current.describe() if current is not None else record.describe()
    out.write(f"rollout {rid}: {why}; the other {rest} node(s) were not requested; {held}\n")
    out.write("after fixing it: pykured unfreeze, then run the rollout again\n")
    return 1


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

    return _run(prog, err, body)


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
            out.write(_describe(o, "") + "\n")
        return 0

    return _run(prog, err, body)


# -- status --------------------------------------------------------------------------------------------------


def _freeze_in_force(kube: Kube, namespace: str, name: str, now: datetime.datetime) -> FreezeRecord | None:
    """The active freeze of the policy ConfigMap (None: none, or the caller may not read it)."""
    try:
        record = read_freeze(kube, namespace=namespace, name=name)
    except errors.KubeError:
        return None
    except PolicyMapError as exc:  # refused whole, but the agents honour the freeze it sets
        record = exc.freeze
    return record if record is not None and record.active(now) else None


def _freeze_line(record: FreezeRecord) -> str:
    """The first line of ``pykured status`` while the fleet is frozen or halted."""
    if record.halted:
        return f"HALTED: {one_line(record.describe())}; no reboot starts until `pykured unfreeze`\n"
    return f"FROZEN: {one_line(record.describe())}; no new reboot starts\n"


def _budget(text: str) -> Budget | None:
    """``--max-unavailable`` of ``status`` and ``plan``: ``""`` is off."""
    try:
        return Budget.parse(text) if text else None
    except BudgetError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _limit_flags(parser: argparse.ArgumentParser) -> None:
    """The agents' ``--concurrency`` and ``--max-unavailable``, which the lock's limit comes from."""
    options.add_agent_flag(parser, "concurrency", convert=int, text="the agents' --concurrency")
    options.add_agent_flag(
        parser,
        "max-unavailable",
        convert=_budget,
        text="the agents' --max-unavailable: N or P% (default: off)",
    )


def _limit(kube: Kube, opts: argparse.Namespace) -> fleetview.LockLimit | None:
    """The lock's limit under the agents' ``--max-unavailable`` (``None`` when they have none)."""
    if opts.max_unavailable is None:
        return None
    return requester.lock_limit(
        kube,
        namespace=opts.ds_namespace,
        ds_name=opts.ds_name,
        concurrency=opts.concurrency,
        budget=opts.max_unavailable,
    )


def _fleet(kube: Kube, opts: argparse.Namespace) -> tuple[list[NodeState], list[fleetview.LockInfo]]:
    """The Nodes ``status`` and ``plan`` show (named, or by selector) and the lock holders they read."""
    views = (
        requester.nodes(kube, names=opts.nodes) if opts.nodes else requester.all_nodes(kube, opts.selector)
    )
    locks = requester.lock_holders(
        kube,
        namespace=opts.ds_namespace,
        ds_name=opts.ds_name,
        annotation=opts.lock_annotation,
        lease_prefix=options.lease_prefix(opts),
    )
    return views, locks


def status_main(
    argv: Sequence[str],
    *,
    out: TextIO | None = None,
    err: TextIO | None = None,
    now: Callable[[], datetime.datetime] = _now,
) -> int:
    out, err = _streams(out, err)
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
    _limit_flags(parser)
    options.add(parser, options.CLUSTER)
    opts = parser.parse_args(list(argv))
    logrus.configure("text", "error")

    def body() -> int:
        kube = options.kube(opts)
        while True:
            frozen = _freeze_in_force(kube, opts.ds_namespace, opts.policy_configmap, now())
            views, locks = _fleet(kube, opts)
            limit = _limit(kube, opts)
            moment = now()
            table = fleetview.rows(views, locks, now=moment)
            if opts.output == "json":
                data = fleetview.to_json(table, locks, limit=limit)
                if frozen is not None:
                    data["freeze"] = json.loads(frozen.to_json())
                out.write(json.dumps(data, sort_keys=True) + "\n")
            else:
                if opts.watch:
                    control(out, "\x1b[H\x1b[2J")  # the screen clear is meant; the values below are not
                if frozen is not None:
                    out.write(_freeze_line(frozen))
                out.write(fleetview.render_table(table, locks, now=moment, limit=limit))
            out.flush()
            if not opts.watch:
                return 0
            time.sleep(opts.interval)

    return _run(prog, err, body)


# -- plan ----------------------------------------------------------------------------------------------------


def _read_freeze(kube: Kube, namespace: str, name: str) -> tuple[FreezeRecord | None, str]:
    """The freeze record, or why it could not be read."""
    doc, why = _read_policy(kube, namespace, name)
    return doc.freeze, why


def _read_policy(kube: Kube, namespace: str, name: str) -> tuple[PolicyDoc, str]:
    """The policy ConfigMap (freeze and blackouts), or why it could not be read."""
    try:
        return read_policy(kube, namespace=namespace, name=name), ""
    except errors.ForbiddenError:
        why = "forbidden (403) for this user"
    except (errors.KubeError, PolicyMapError) as exc:
        why = str(exc)
    return PolicyDoc(), f"policy ConfigMap {namespace}/{name}: {why}: a freeze or a halt would not show here"


def plan_main(
    argv: Sequence[str],
    *,
    out: TextIO | None = None,
    err: TextIO | None = None,
    now: Callable[[], datetime.datetime] = _now,
) -> int:
    """``pykured plan [NODE…] [-l SELECTOR] [-o json]``: read-only; what the roll will do, what holds it."""
    out, err = _streams(out, err)
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
    _limit_flags(parser)
    options.add(parser, options.CLUSTER)
    opts = parser.parse_args(list(argv))
    logrus.configure("text", "error")

    def body() -> int:
        kube = options.kube(opts)
        views, locks = _fleet(kube, opts)
        doc, unreadable = _read_policy(kube, opts.ds_namespace, opts.policy_configmap)
        result = plan.build(
            views,
            locks,
            freeze=doc.freeze,
            unreadable=[unreadable] if unreadable else [],
            concurrency=opts.concurrency,
            blackouts=doc.blackouts,
            limit=_limit(kube, opts),
            now=now(),
        )
        if opts.output == "json":
            out.write(json.dumps(plan.to_json(result), sort_keys=True) + "\n")
        else:
            out.write(plan.render_table(result))
        return 0

    return _run(prog, err, body)
