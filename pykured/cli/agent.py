"""The composition root: parse kured's flags, build the agent and run it; plus pykured's subcommands.

``kured [flags]`` (also ``pykured``, ``python -m pykured``) runs the node agent exactly where kured's
manifests call ``/usr/bin/kured``; ``kured --help`` is kured's usage text, ``pykured --help`` adds the
subcommands (:data:`COMMANDS`). Subcommands, which kured does not have:

* ``pykured lock status`` / ``pykured lock release NODE`` — see and fix the lock (kured #137's runbook);
* ``pykured notify-test --notify-url URL [--message TEXT]`` — send one notification and print the outcome;
* ``pykured request-reboot NODE… --reason TEXT`` / ``pykured rollout`` / ``pykured status`` / ``pykured
  plan`` — reboot requests bound to a boot, rollouts, the fleet's reboot state and the roll's plan
  (:mod:`pykured.cli.requests`);
* ``pykured freeze --reason R [--until T]``, ``pykured freeze --status``, ``pykured unfreeze`` — the
  cluster-wide freeze switch in the policy ConfigMap (docs/maintenance-policy.md).

Two environment hooks exist for tests and the demo (``pykured_dev``) only: ``PYKURED_NSENTER`` (a shim used
instead of ``/usr/bin/nsenter``) and ``PYKURED_SIGNAL_PID`` (the pid the signal method targets instead of 1).
In safe mode (``PYKURED_SAFE_MODE``) pykured refuses the real nsenter and PID 1 whatever they say.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pykured import __version__
from pykured.cli.output import safe_stdio
from pykured.config import Config, usage
from pykured.config.reader import log_format_hint, read_flags
from pykured.config.startup import lock_records, settle
from pykured.core import errors
from pykured.gocompat import logrus

if TYPE_CHECKING:
    from pykured.kube.client import Kube

logger = logging.getLogger("pykured")


def main(argv: Sequence[str], *, prog: str = "kured") -> int:
    """Dispatch; returns the exit code. ``prog`` is the name run: ``kured`` or ``pykured`` (``--help``)."""
    args = list(argv)
    subcommand = _SUBCOMMANDS.get(args[0]) if args else None
    if subcommand is not None:
        with safe_stdio():  # a command prints values read from the cluster: terminal-safe
            return subcommand(args[1:])
    return _agent(args, os.environ, prog=prog)


COMMANDS = (
    ("status", "every node's reboot state: needs a reboot and why, what blocks it, the lock, the roll"),
    ("plan", "what the roll will do: per node why it needs a reboot, what holds it, its place, an end"),
    ("request-reboot", "reboot nodes once, bound to their current boot: NODE... --reason TEXT [--cancel]"),
    ("rollout", "request a reboot of a set of nodes, paced by the lock; rollout status | rollout cancel ID"),
    ("freeze", "stop every new reboot now: --reason TEXT [--until T] [NODE...]; --status shows it"),
    ("unfreeze", "lift the freeze (or a node's pause: NODE...)"),
    ("lock", "the reboot lock: lock status | lock release NODE"),
    ("notify-test", "send one test notification: --notify-url URL"),
)
"""pykured's subcommands with one line each, as ``pykured --help`` lists them after kured's flags."""


def commands_help(prog: str = "pykured") -> str:
    """The subcommands section of ``pykured --help``."""
    width = max(len(name) for name, _ in COMMANDS)
    lines = [
        "",
        f"Commands ({prog} COMMAND --help for each; without a command, {prog} runs the node agent with the",
        "flags above):",
        *(f"  {name.ljust(width)}   {text}" for name, text in COMMANDS),
    ]
    return "\n".join(lines) + "\n"


def _usage(prog: str) -> str:
    """kured's usage text; under another name than ``kured``, followed by pykured's subcommands."""
    return usage() if prog == "kured" else usage(prog) + commands_help(prog)


def _log(level: int, message: str) -> None:
    logger.log(level, "%s", message)


def _agent(args: list[str], env: Mapping[str, str], *, prog: str = "kured") -> int:
    """kured's start-up in kured's order, then the agent. Every failure is one line and an exit code."""
    try:
        flags = read_flags(args, env)
    except errors.ConfigError as exc:
        if exc.exit_code in (0, 2):  # --help, or a flag error: pflag's usage, then its error, on stderr
            sys.stderr.write(_usage(prog) if exc.exit_code == 0 else f"{_usage(prog)}{exc}\n")
            return exc.exit_code
        logrus.configure(log_format_hint(args, env))
        logger.critical("%s", exc)  # a KURED_* value kured's LoadFromEnv rejects
        return exc.exit_code
    for line in flags.printed:  # kured's fmt.Printf lines (stderr for --dump-config, whose stdout is JSON)
        print(line, file=sys.stderr if flags.values["dump-config"] else sys.stdout, flush=True)
    if flags.values["dump-config"]:
        try:
            cfg = settle(flags, env)
        except errors.ConfigError as exc:
            print(str(exc), file=sys.stderr)
            return exc.exit_code
        print(json.dumps(cfg.to_public_dict(), indent=2, sort_keys=True))
        return 0
    log_format, level = flags.values["log-format"], flags.values["log-level"]
    logrus.configure("text", level)
    logger.info("Kubernetes Reboot Daemon: %s", __version__)  # before kured switches to JSON, as kured
    logrus.configure(log_format, level)
    try:
        cfg = settle(flags, env, log=_log)
    except errors.ConfigError as exc:
        logger.critical("%s", exc)
        return exc.exit_code
    for warning in cfg.warnings:
        logger.warning("%s", warning)
    return run_agent(cfg)


def _request_command(argv: list[str], name: str) -> int:
    from pykured.cli import requests as requestcli

    commands = {
        "request-reboot": requestcli.request_reboot_main,
        "rollout": requestcli.rollout_main,
        "plan": requestcli.plan_main,
    }
    return commands.get(name, requestcli.status_main)(argv, out=sys.stdout, err=sys.stderr)


def run_agent(cfg: Config) -> int:
    """Connect to the API server as kured does, log the lock settings, build the agent and run it."""
    from pykured.kube.client import Kube

    try:
        kube = Kube.from_kubeconfig(cfg.kubeconfig) if cfg.kubeconfig else Kube.in_cluster()
    except errors.PykuredError as exc:
        logger.critical("%s", exc)
        return 1
    for level, line in lock_records(cfg):
        logger.log(level, "%s", line)
    from pykured.wiring import build

    try:
        agent = build(cfg, kube=kube)
    except (errors.PykuredError, OSError) as exc:
        logger.critical("%s", exc)
        kube.close()
        return 1

    def _stop(signum: int, _frame: object) -> None:
        logger.info("Received %s, stopping", signal.Signals(signum).name)
        agent.stop()
        _exit_after(STOP_DEADLINE)

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        agent.run()
    finally:
        agent.close()
    return 0


STOP_DEADLINE = 20.0
"""Seconds from SIGTERM to a forced exit: inside the pod's default 30 s grace period."""


def _exit_after(seconds: float) -> None:
    """Exit the process ``seconds`` from now if it has not ended by itself.

    A step can outlast a SIGTERM by far: a request to an API server that no longer answers (a black-holed
    connection) waits for its timeout on every retry. Every step is idempotent and the cycle's state lives
    on the Node and in the lock, so exiting mid-step is as safe as the kubelet's SIGKILL at the end of the
    grace period, and it comes first, with a log line (found by the soak: agents cut off from the API server
    outlived their 30 s grace period).
    """

    def _now() -> None:
        logger.warning("Still stopping %.0f s after the signal (a step is blocked): exiting now", seconds)
        logging.shutdown()
        os._exit(0)

    timer = threading.Timer(seconds, _now)
    timer.daemon = True
    timer.start()


def _kube(kubeconfig: str, context: str = "") -> Kube:
    from pykured.kube.client import Kube

    return Kube.auto(kubeconfig=kubeconfig or None, context=context or None)


def _lock_command(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="pykured lock", description="See and fix kured's reboot lock.")
    parser.add_argument("action", choices=["status", "release"])
    parser.add_argument("node", nargs="?", help="the holder to release (release only)")
    parser.add_argument("--kubeconfig", default=os.environ.get("KURED_KUBECONFIG", ""))
    parser.add_argument("--context", default="", help="the kubeconfig context (default: its current one)")
    parser.add_argument("--ds-namespace", default=os.environ.get("KURED_DS_NAMESPACE", "kube-system"))
    parser.add_argument("--ds-name", default=os.environ.get("KURED_DS_NAME", "kured"))
    parser.add_argument(
        "--lock-annotation", default=os.environ.get("KURED_LOCK_ANNOTATION", "weave.works/kured-node-lock")
    )
    parser.add_argument("--lease-prefix", default=os.environ.get("KURED_LEASE_PREFIX", ""))
    parser.add_argument("--lock-backend", choices=["daemonset", "lease", "both"], default="both")
    opts = parser.parse_args(argv)
    logrus.configure("text", "warning")
    from pykured.fleet import locks as admin

    kube = _kube(opts.kubeconfig, opts.context)
    prefix = opts.lease_prefix or f"{opts.ds_name}-lock"
    common = {
        "namespace": opts.ds_namespace,
        "ds_name": opts.ds_name,
        "annotation": opts.lock_annotation,
        "lease_prefix": prefix,
    }
    if opts.action == "status":
        return int(admin.lock_status(kube, out=sys.stdout, **common))
    if not opts.node:
        parser.error("release needs the NODE whose slot to free")
    backend = None if opts.lock_backend == "both" else opts.lock_backend
    return int(admin.lock_release(kube, opts.node, out=sys.stdout, backend=backend, **common))


def _notify_test(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="pykured notify-test", description="Send one test notification.")
    parser.add_argument("--notify-url", default=os.environ.get("KURED_NOTIFY_URL", ""), required=False)
    parser.add_argument("--message", default="pykured notify-test: notifications work")
    opts = parser.parse_args(argv)
    if not opts.notify_url:
        parser.error("--notify-url (or KURED_NOTIFY_URL) is required")
    logrus.configure("text", "info")
    from pykured.notify import notify_test

    return notify_test(opts.notify_url, opts.message, out=sys.stdout)


def _freeze_command(command: str, argv: list[str]) -> int:
    """``pykured freeze`` / ``pykured unfreeze``: set, show or clear the freeze, or pause nodes."""
    env = os.environ
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
        parser.add_argument("--time-zone", default=env.get("KURED_TIME_ZONE", "UTC"))
    parser.add_argument("--kubeconfig", default=env.get("KURED_KUBECONFIG", ""))
    parser.add_argument("--context", default="", help="the kubeconfig context (default: its current one)")
    parser.add_argument("--ds-namespace", default=env.get("KURED_DS_NAMESPACE", "kube-system"))
    parser.add_argument(
        "--policy-configmap",
        default=env.get("KURED_POLICY_CONFIGMAP") or "kured-policy",
        help="the ConfigMap the agents watch (their --policy-configmap)",
    )
    opts = parser.parse_args(argv)
    logrus.configure("text", "warning")
    import datetime

    from pykured.fleet import freeze as freezecmd
    from pykured.policy.freeze import FreezeError, parse_until
    from pykured.policy.weekly import load_location

    where = {"namespace": opts.ds_namespace, "name": opts.policy_configmap}
    shown = f"{opts.ds_namespace}/{opts.policy_configmap}"
    now = datetime.datetime.now(datetime.UTC)
    try:
        kube = _kube(opts.kubeconfig, opts.context)
        if command == "unfreeze":
            if opts.nodes:
                freezecmd.unpause_nodes(kube, opts.nodes)
                print(f"unpaused {', '.join(opts.nodes)}")
                return 0
            freezecmd.unfreeze(kube, **where)
            print(f"unfrozen ({shown})")
            return 0
        if opts.status:
            return freezecmd.print_status(kube, now=now, out=sys.stdout, as_json=opts.json, **where)
        if not opts.reason:
            parser.error("--reason is required (e.g. an incident id)")
        until = None
        if opts.until:
            until = parse_until(opts.until, now=now, zone=load_location(opts.time_zone))
        if opts.nodes:
            record = freezecmd.pause_nodes(kube, opts.nodes, reason=opts.reason, until=until, now=now)
            text = record.describe().removeprefix("frozen")
            print(f"{', '.join(opts.nodes)}: paused{text}")
            return 0
        record = freezecmd.freeze(kube, reason=opts.reason, until=until, now=now, **where)
    except (errors.PykuredError, FreezeError, ValueError) as exc:
        print(f"pykured {command}: {exc}", file=sys.stderr)
        return 1
    print(f"{record.describe()} ({shown})")
    return _honoured(kube, freezecmd, where)


def _honoured(kube: Kube, freezecmd: Any, where: dict[str, str]) -> int:
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


_SUBCOMMANDS: dict[str, Callable[[list[str]], int]] = {
    "lock": _lock_command,
    "notify-test": _notify_test,
    "request-reboot": lambda argv: _request_command(argv, "request-reboot"),
    "rollout": lambda argv: _request_command(argv, "rollout"),
    "status": lambda argv: _request_command(argv, "status"),
    "plan": lambda argv: _request_command(argv, "plan"),
    "freeze": lambda argv: _freeze_command("freeze", argv),
    "unfreeze": lambda argv: _freeze_command("unfreeze", argv),
}
"""pykured's subcommands (kured has none); anything else is the agent's flags."""
