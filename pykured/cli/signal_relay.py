"""``kured signal-relay [--relay PATH] [--reboot-signal N]``: the signal profile's second container.

It sends ``--reboot-signal`` (default 39, SIGRTMIN+5) to PID 1 each time the agent of its pod asks through
the FIFO at ``--relay`` (:mod:`pykured.host.relay`), and does nothing else: it reads no cluster object and
no host file. It runs as root with only ``CAP_KILL`` and nothing of the host mounted, so that the agent,
which has the host's ``/var/run`` for its sentinel, can run with no privilege at all.
"""

from __future__ import annotations

import argparse
import logging

from pykured.core.errors import RebootError
from pykured.gocompat import logrus
from pykured.host import relay

logger = logging.getLogger(__name__)


def _signal(text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid signal: {text!r}") from None
    if not 1 <= value <= 64:
        raise argparse.ArgumentTypeError(f"invalid signal: {value}")
    return value


def signal_relay_main(argv: list[str]) -> int:
    """``kured signal-relay``; runs until the container stops (returns only on bad arguments)."""
    parser = argparse.ArgumentParser(
        prog="pykured signal-relay",
        description="Send the reboot signal to PID 1 when the agent of this pod asks through a FIFO.",
    )
    parser.add_argument(
        "--relay", default=relay.DEFAULT_PATH, help="the FIFO, in an emptyDir both containers mount"
    )
    parser.add_argument(
        "--reboot-signal", type=_signal, default=39, help="signal to send to PID 1 (default 39, SIGRTMIN+5)"
    )
    opts = parser.parse_args(argv)
    logrus.configure("text", "info")
    try:
        relay.serve(opts.relay, opts.reboot_signal, target_pid=relay.target_pid())
    except (OSError, ValueError, RebootError) as exc:  # one line, never a traceback: the pod restarts it
        logger.error("Signal relay at %s cannot run: %s", opts.relay, exc)
        return 1
    return 0
