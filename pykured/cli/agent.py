"""The command line: one of pykured's subcommands, or the node agent with kured's flags.

``kured [flags]`` (also ``pykured``, ``python -m pykured``) runs the node agent exactly where kured's
manifests call ``/usr/bin/kured`` (its start-up: :mod:`pykured.agent.start`); ``kured --help`` is kured's
usage text, ``pykured --help`` adds the subcommands. A first argument naming one of pykured's subcommands
(:data:`pykured.cli.commands.COMMANDS`; kured has none) runs it with the rest of the line. This is the one
module of the command lines that reaches the agent: it starts it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from pykured import __version__
from pykured.agent.start import start
from pykured.cli import commands
from pykured.cli.output import safe_stdio


def main(argv: Sequence[str], *, prog: str = "kured") -> int:
    """Dispatch; returns the exit code. ``prog`` is the name run: ``kured`` or ``pykured`` (``--help``)."""
    args = list(argv)
    if prog != "kured" and args == ["--version"]:  # pykured's; kured has none (unknown flag), and so as kured
        sys.stdout.write(f"{prog} {__version__}\n")
        return 0
    subcommand = _SUBCOMMANDS.get(args[0]) if args else None
    if subcommand is not None:
        with safe_stdio():  # a command prints values read from the cluster: terminal-safe
            return subcommand(args[1:])
    return start(args, os.environ, prog=prog, commands="" if prog == "kured" else commands_help(prog))


_SUBCOMMANDS: dict[str, commands.Handler] = {command.name: command.run for command in commands.COMMANDS}
"""The dispatch, made from :data:`pykured.cli.commands.COMMANDS`; anything else is the agent's flags."""

COMMANDS: tuple[tuple[str, str], ...] = tuple((command.name, command.help) for command in commands.COMMANDS)
"""Each subcommand's name and line, as ``pykured --help`` lists them, made from the same table."""


def commands_help(prog: str = "pykured") -> str:
    """The subcommands section of ``pykured --help``."""
    lines = [
        "",
        f"Commands ({prog} COMMAND --help for each; without a command, {prog} runs the node agent with the",
        "flags above):",
        *commands.listing(),
    ]
    return "\n".join(lines) + "\n"
