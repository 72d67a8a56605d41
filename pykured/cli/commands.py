"""pykured's subcommands, one row each; ``pykured --help``, the dispatch and the kubectl plugin read them.

kured has no subcommands; pykured's come before the agent's flags (``pykured status``, ``pykured lock
status``), anything else is the agent's command line (:mod:`pykured.cli.agent`). Each row names its command,
the line ``--help`` shows, its handler and how far it reaches (:class:`Reach`): whether it talks to the
cluster (the plugin passes kubectl's kubeconfig and context) and whether it reads or writes objects in
pykured's namespace (the plugin's ``-n`` becomes its ``--ds-namespace``). Adding a command is one row here
and one handler.

A handler is named as a console script is (``module:function``) and imported only when its command runs:
the agent's start-up imports none of the commands' modules.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
from collections.abc import Callable
from typing import cast

Handler = Callable[[list[str]], int]
"""A command's entry: its arguments (after the command's name) in, the exit code out."""


class Reach(enum.Enum):
    """What a command talks to."""

    LOCAL = "local"
    """Not the cluster (``notify-test``)."""
    CLUSTER = "cluster"
    """The API server: it takes ``--kubeconfig`` and ``--context`` (:data:`pykured.cli.options.CLUSTER`)."""
    NAMESPACED = "namespaced"
    """The API server and pykured's namespace: it takes ``--ds-namespace`` as well."""


@dataclasses.dataclass(frozen=True, slots=True)
class Command:
    """One subcommand."""

    name: str
    help: str
    """One line, as ``pykured --help`` and ``kubectl pykured --help`` list it."""
    handler: str
    """``module:function``, a :data:`Handler`."""
    reach: Reach

    @property
    def cluster(self) -> bool:
        """It talks to the API server (``--kubeconfig``, ``--context``)."""
        return self.reach is not Reach.LOCAL

    @property
    def namespaced(self) -> bool:
        """It takes ``--ds-namespace`` (the plugin's ``-n``)."""
        return self.reach is Reach.NAMESPACED

    def load(self) -> Handler:
        """The handler, imported now."""
        module, _, function = self.handler.partition(":")
        return cast(Handler, getattr(importlib.import_module(module), function))

    def run(self, argv: list[str]) -> int:
        """Run the command with ``argv`` (what follows its name); returns the exit code."""
        return self.load()(argv)


_FREEZE = "pykured.cli.freeze"
COMMANDS: tuple[Command, ...] = (
    Command(
        "status",
        "every node's reboot state: needs a reboot and why, what blocks it, the lock, the roll",
        "pykured.cli.status:status_main",
        Reach.NAMESPACED,
    ),
    Command(
        "plan",
        "what the roll will do: per node why it needs a reboot, what holds it, its place, an end",
        "pykured.cli.plan:plan_main",
        Reach.NAMESPACED,  # it reads the lock and the policy ConfigMap in --ds-namespace, as status does
    ),
    Command(
        "request-reboot",
        "reboot nodes once, bound to their current boot: NODE... --reason TEXT [--cancel]",
        "pykured.cli.request_reboot:request_reboot_main",
        Reach.CLUSTER,
    ),
    Command(
        "rollout",
        "request a reboot of a set of nodes, paced by the lock; rollout status | rollout cancel ID",
        "pykured.cli.rollout:rollout_main",
        Reach.CLUSTER,
    ),
    Command(
        "freeze",
        "stop every new reboot now: --reason TEXT [--until T] [NODE...]; --status shows it",
        f"{_FREEZE}:freeze_main",
        Reach.NAMESPACED,
    ),
    Command(
        "unfreeze",
        "lift the freeze and a halt (or a node's pause: NODE...)",
        f"{_FREEZE}:unfreeze_main",
        Reach.NAMESPACED,
    ),
    Command(
        "unquarantine",
        "end a node's quarantine (--drain-escalation): NODE...; uncordons it if pykured cordoned it",
        "pykured.cli.quarantine:unquarantine_main",
        Reach.CLUSTER,
    ),
    Command(
        "lock",
        "the reboot lock: lock status | lock release NODE",
        "pykured.cli.lock:lock_main",
        Reach.NAMESPACED,
    ),
    Command(
        "notify-test",
        "send one test notification: --notify-url URL",
        "pykured.cli.notify:notify_test_main",
        Reach.LOCAL,
    ),
    Command(
        "signal-relay",
        "the signal profile's second container: send --reboot-signal to PID 1 when the agent asks",
        "pykured.cli.signal_relay:signal_relay_main",
        Reach.LOCAL,
    ),
)
"""pykured's subcommands, in the order ``--help`` lists them."""

BY_NAME: dict[str, Command] = {command.name: command for command in COMMANDS}


def listing() -> list[str]:
    """One line per command, aligned, as both ``--help`` texts list them."""
    width = max(len(command.name) for command in COMMANDS)
    return [f"  {command.name.ljust(width)}   {command.help}" for command in COMMANDS]
