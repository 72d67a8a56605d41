"""The command table: every row is listed by ``pykured --help`` and ``kubectl pykured --help``, dispatches to
its own handler, and takes the options the plugin passes it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pykured.cli import agent as cli
from pykured.cli import commands, kubectl
from pykured.cli.commands import COMMANDS, Command

IDS = [command.name for command in COMMANDS]


def _help_of(run: object, argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """What ``COMMAND --help`` prints: argparse's help on stdout, exit 0."""
    assert callable(run)
    with pytest.raises(SystemExit) as done:
        run(argv)
    assert done.value.code == 0
    return capsys.readouterr().out


def test_the_names_are_unique_and_each_help_is_one_line() -> None:
    assert len(set(IDS)) == len(IDS) == len(commands.BY_NAME)
    assert all(command.help and "\n" not in command.help for command in COMMANDS)


@pytest.mark.parametrize("command", COMMANDS, ids=IDS)
def test_pykured_help_lists_the_row(command: Command, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"], prog="pykured") == 0
    listed = capsys.readouterr().err.partition("\nCommands (")[2]
    assert f"  {command.name.ljust(14)}   {command.help}\n" in listed


@pytest.mark.parametrize("command", COMMANDS, ids=IDS)
def test_the_plugin_lists_the_row(command: Command) -> None:
    assert f"  {command.name.ljust(14)}   {command.help}\n" in kubectl.help_text()


@pytest.mark.parametrize("command", COMMANDS, ids=IDS)
def test_the_row_dispatches_to_its_handler(command: Command, capsys: pytest.CaptureFixture[str]) -> None:
    module, _, function = command.handler.partition(":")
    assert module.startswith("pykured.cli.") and function.endswith("_main")
    assert callable(command.load())
    shown = _help_of(lambda argv: cli.main(argv, prog="pykured"), [command.name, "--help"], capsys)
    assert shown.startswith(f"usage: pykured {command.name} ")


@pytest.mark.parametrize("command", COMMANDS, ids=IDS)
def test_the_plugin_runs_the_row_with_the_options_it_takes(
    command: Command, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the plugin, with kubectl's options: the command accepts every option the plugin gives it."""
    monkeypatch.setenv("HOME", "/home/u")
    monkeypatch.delenv("KUBECONFIG", raising=False)
    argv = [command.name, "--context", "c", "-n", "ns", "--help"]
    line = kubectl.command_line(argv, {})
    assert ("--kubeconfig" in line, "--context" in line) == (command.cluster, command.cluster)
    assert ("--ds-namespace" in line) == command.namespaced
    shown = _help_of(kubectl.main, argv, capsys)
    assert shown.startswith(f"usage: pykured {command.name} ")
    for option in ("--kubeconfig", "--context"):
        assert (f"  {option} " in shown) == command.cluster, option
    if command.namespaced:
        assert "  --ds-namespace " in shown


def test_the_agent_s_start_up_imports_no_command() -> None:
    """A handler is imported when its command runs: the agent in a pod loads none of them."""
    handlers = sorted({command.handler.partition(":")[0] for command in COMMANDS})
    code = "import sys, pykured.__main__, pykured.cli.agent\n"
    code += f"print([m for m in {handlers!r} if m in sys.modules])"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout == "[]\n"
