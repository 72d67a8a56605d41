"""``kubectl pykured COMMAND …``: pykured's commands as a kubectl plugin (the ``kubectl-pykured`` executable).

kubectl runs an executable named ``kubectl-pykured`` found on ``PATH`` with the arguments that follow
``kubectl pykured``; ``pip install pykured`` puts it there. The plugin reaches the cluster as kubectl does:
the kubeconfig is ``--kubeconfig``, else ``$KUBECONFIG`` (a ``:``-separated list, merged), else
``~/.kube/config``; the context is ``--context``, else the kubeconfig's current context (of a list: the
first file's that names one, as kubectl).
``-n``/``--namespace`` is the namespace of pykured's DaemonSet (where its lock and policy ConfigMap live,
``--ds-namespace`` of the commands): ``kube-system`` unless given, as in kured's manifests, and not the
context's namespace, which is rarely where the reboot daemon runs; it goes to the commands that take
``--ds-namespace`` (:attr:`pykured.cli.commands.Command.namespaced`). These options go anywhere on the line.

The agent itself never reads kubectl's configuration: it keeps kured's rule (in-cluster unless
``--kubeconfig``); the plugin runs only the commands (:data:`pykured.cli.commands.COMMANDS`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

from pykured import __version__
from pykured.cli import commands
from pykured.cli.agent import main as cli_main

PROG = "kubectl pykured"
_OPTIONS = {
    "--context": "context",
    "--namespace": "namespace",
    "-n": "namespace",
    "--kubeconfig": "kubeconfig",
}


class UsageError(Exception):
    """A command line the plugin cannot run: one line on stderr, exit 2."""


def help_text() -> str:
    lines = [
        f"Usage: {PROG} COMMAND [flags]   ({PROG} COMMAND --help for a command's flags)",
        "",
        "Commands:",
        *commands.listing(),
        "",
        "Options (anywhere on the line, as kubectl's):",
        "  --kubeconfig PATH       default: $KUBECONFIG, else ~/.kube/config",
        "  --context NAME          default: the kubeconfig's current context",
        "  -n, --namespace NAME    pykured's namespace (its lock and policy ConfigMap); default: kube-system",
        f"  --version               print the plugin's version ({PROG} --version)",
    ]
    return "\n".join(lines) + "\n"


def split_options(argv: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """kubectl's options (``--context``, ``-n``/``--namespace``, ``--kubeconfig``) and the rest, in order.

    Each takes a value as the next argument or after ``=`` (``-nNAME`` too); ``--`` ends the options: what
    follows is passed on unread.
    """
    found: dict[str, str] = {}
    rest: list[str] = []
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg == "--":
            rest.append(arg)
            rest.extend(args)
            break
        name, eq, value = arg.partition("=")
        if name in _OPTIONS:
            if not eq:
                if not args:
                    raise UsageError(f"flag needs an argument: {arg}")
                value = args.pop(0)
        elif arg.startswith("-n") and not arg.startswith("--") and len(arg) > 2:
            name, value = "-n", arg[2:]
        else:
            rest.append(arg)
            continue
        if not value:
            raise UsageError(f"empty value for {name}")
        found[_OPTIONS[name]] = value
    return found, rest


def kubeconfig_path(flag: str | None, env: Mapping[str, str]) -> str:
    """kubectl's choice: the flag, else ``$KUBECONFIG``, else ``~/.kube/config``."""
    return flag or env.get("KUBECONFIG") or os.path.join(os.path.expanduser("~"), ".kube", "config")


def current_context(path: str) -> str | None:
    """kubectl's current context of a ``:``-separated kubeconfig list: the first file that names one."""
    import yaml

    for one in path.split(os.pathsep):
        try:
            with open(os.path.expanduser(one), encoding="utf-8") as stream:
                config = yaml.safe_load(stream)
        except (OSError, yaml.YAMLError):
            continue
        if isinstance(config, dict) and config.get("current-context"):
            return str(config["current-context"])
    return None


def command_line(argv: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """The ``pykured`` command line that runs ``kubectl pykured ARGV`` (raises :class:`UsageError`)."""
    options, rest = split_options(argv)
    if not rest:
        raise UsageError("a command is required")
    command = commands.BY_NAME.get(rest[0])
    if command is None:
        raise UsageError(f"unknown command {rest[0]!r}")
    args = list(rest)
    extra: list[str] = []
    if command.cluster:
        path = kubeconfig_path(options.get("kubeconfig"), env)
        extra += ["--kubeconfig", path]
        context = options.get("context") or (current_context(path) if os.pathsep in path else None)
        if context:
            extra += ["--context", context]
    if command.namespaced and "namespace" in options:
        extra += ["--ds-namespace", options["namespace"]]
    if "--" in args:  # the options must come before the arguments passed on unread
        cut = args.index("--")
        return args[:cut] + extra + args[cut:]
    return args + extra


def main(argv: list[str] | None = None) -> int:
    """``kubectl-pykured``: returns the exit code."""
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help", "help"):
        (sys.stdout if args else sys.stderr).write(help_text())
        return 0 if args else 2
    if args == ["--version"]:
        sys.stdout.write(f"{PROG} {__version__}\n")
        return 0
    try:
        line = command_line(args, os.environ)
    except UsageError as exc:
        sys.stderr.write(f"{PROG}: error: {exc} (see {PROG} --help)\n")
        return 2
    return cli_main(line, prog="pykured")


if __name__ == "__main__":
    sys.exit(main())
