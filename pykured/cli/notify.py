"""``pykured notify-test --notify-url URL [--message TEXT]``: send one notification and print the outcome.

The URL is the agents' ``--notify-url`` (or its ``KURED_*`` variable, :mod:`pykured.cli.options`); the work
is :func:`pykured.notify.notify_test`, which prints the destination with its secrets redacted.
"""

from __future__ import annotations

import argparse
import sys

from pykured.cli import options
from pykured.gocompat import logrus


def notify_test_main(argv: list[str]) -> int:
    """``pykured notify-test``; returns the exit code."""
    parser = argparse.ArgumentParser(prog="pykured notify-test", description="Send one test notification.")
    options.add_agent_flag(parser, "notify-url", text="where to send it (the agents' --notify-url)")
    parser.add_argument("--message", default="pykured notify-test: notifications work")
    opts = parser.parse_args(argv)
    if not opts.notify_url:
        parser.error(f"--notify-url (or {options.env_var('notify-url')}) is required")
    logrus.configure("text", "info")
    from pykured.notify import notify_test

    return notify_test(opts.notify_url, opts.message, out=sys.stdout)
