"""The agent's start-up: kured's flags read in kured's order, its configuration settled, the agent run.

``kured [flags]`` (also ``pykured``, ``python -m pykured``) runs the node agent exactly where kured's
manifests call ``/usr/bin/kured``: every failure before the agent runs is one line and an exit code, as
kured's; ``kured --help`` is kured's usage text (:mod:`pykured.cli.agent`, the command line, adds pykured's
subcommands under the name ``pykured``). A SIGTERM or SIGINT stops the agent, and the process exits
:data:`STOP_DEADLINE` seconds later if a step is still blocked.

Two environment hooks exist for tests and the demo (``pykured_dev``) only: ``PYKURED_NSENTER`` (a shim used
instead of ``/usr/bin/nsenter``) and ``PYKURED_SIGNAL_PID`` (the pid the signal method targets instead of 1).
In safe mode (``PYKURED_SAFE_MODE``) pykured refuses the real nsenter and PID 1 whatever they say.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Mapping

from pykured import __version__
from pykured.config import Config, usage
from pykured.config.reader import log_format_hint, read_flags
from pykured.config.startup import lock_records, settle
from pykured.core import errors
from pykured.gocompat import logrus

logger = logging.getLogger("pykured")


def _usage(prog: str, commands: str) -> str:
    """kured's usage text; under another name than ``kured``, followed by ``commands`` (pykured's)."""
    return usage() if prog == "kured" else usage(prog) + commands


def _log(level: int, message: str) -> None:
    logger.log(level, "%s", message)


def start(args: list[str], env: Mapping[str, str], *, prog: str = "kured", commands: str = "") -> int:
    """kured's start-up in kured's order, then the agent. Every failure is one line and an exit code.

    ``commands``: what ``--help`` adds under another name than ``kured`` (pykured's subcommands)."""
    try:
        flags = read_flags(args, env)
    except errors.ConfigError as exc:
        if exc.exit_code in (0, 2):  # --help, or a flag error: pflag's usage, then its error, on stderr
            text = _usage(prog, commands)
            sys.stderr.write(text if exc.exit_code == 0 else f"{text}{exc}\n")
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
    from pykured.agent.wiring import build

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
