"""Agents forked from one warm interpreter: ``python -m pykured`` without paying its start-up each time.

A test run starts a few hundred agents, and in a short test most of an agent's CPU goes to starting the
interpreter and importing pykured and the ``kubernetes`` kubeconfig loader (test agents read a kubeconfig; a
pod never imports that package): about two thirds of a typical test agent's CPU on a busy 2-core machine.
:func:`spawn` hands the agent's arguments, environment and log file to the standard library's fork server
(:mod:`multiprocessing`, ``forkserver`` context), which imported those modules once. The forked child puts
that environment in place, sends its standard streams to the log, and runs ``pykured.__main__.main`` with
the arguments ``python -m pykured`` would get; from there on it is the same agent: its own process, its own
signal handlers, threads, connections and exit code.

What differs from an exec'd agent: ``/proc/PID/cmdline`` names the fork server, the parent is the fork
server (which dies with the test process, and its agents with it: ``PR_SET_PDEATHSIG``), and the imports are
shared copy-on-write, so an agent's RSS is not its own (benchmarks exec their agents).
"""

from __future__ import annotations

import functools
import multiprocessing
import multiprocessing.context
import multiprocessing.process
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence

from pykured_dev.testenv.procs import _die_with_parent

PRELOAD = (
    "pykured.__main__",
    "pykured.cli.agent",
    "pykured.agent.start",
    "pykured.agent.wiring",
    "pykured.agent.daemon",
    "pykured.fleetlock.server",
    "kubernetes.config",
    "kubernetes.client",
    __name__,
)
"""What the fork server imports once: the agent's start-up path and the kubeconfig loader."""


@functools.cache
def _forkserver() -> multiprocessing.context.ForkServerContext:
    context = multiprocessing.get_context("forkserver")  # the one fork server of this process
    context.set_forkserver_preload(list(PRELOAD))
    return context


class AgentProcess:
    """A forked agent, with the part of :class:`subprocess.Popen`'s interface the fleet uses."""

    def __init__(self, argv: Sequence[str], process: multiprocessing.process.BaseProcess) -> None:
        self.args = list(argv)
        self._process = process
        self.pid: int = process.pid or 0

    @property
    def returncode(self) -> int | None:
        """The exit code once the agent has exited (``-N``: killed by signal N), else None."""
        return self._process.exitcode

    def poll(self) -> int | None:
        return self._process.exitcode

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        code = self._process.exitcode
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        return code

    def send_signal(self, signum: int) -> None:
        if self._process.exitcode is None:
            os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def spawn(args: Sequence[str], *, env: Mapping[str, str], log: str) -> AgentProcess:
    """Start ``python -m pykured ARGS`` as a child of the fork server; stdout and stderr append to ``log``."""
    process = _forkserver().Process(target=_run, args=(list(args), dict(env), log), daemon=True)
    process.start()
    return AgentProcess([sys.executable, "-m", "pykured", *args], process)


def _run(args: list[str], env: dict[str, str], log: str) -> None:  # pragma: no cover - runs in the child
    _die_with_parent()  # the fork server's end is this agent's end
    if os.getppid() == 1:
        os._exit(1)
    # Only the standard streams stay open, as after an exec: the fork server's pipes are not the agent's
    # (one keeps the fork server alive while any holder lives, which would keep agents alive past the test).
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    out = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)
    os.close(null)
    os.environ.clear()
    os.environ.update(env)
    time.tzset()
    import pykured.__main__

    sys.argv = [pykured.__main__.__file__, *args]
    code = pykured.__main__.main(args)
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(code)
