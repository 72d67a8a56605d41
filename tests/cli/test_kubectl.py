"""``kubectl pykured``: ``--help`` texts and the plugin's own parsing (the plugin against the test control
plane: ``tests/e2e/cli/test_kubectl.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pykured.cli import agent as cli
from pykured.cli import kubectl
from pykured.config.flags import usage
from pykured.core import errors
from pykured.kube.client import Kube

BIN = Path(sys.executable).parent
PLUGIN = BIN / "kubectl-pykured"


# -- the command line (pure) --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["status"], ["status", "--kubeconfig", "/home/u/.kube/config"]),
        (
            ["--context", "prod", "status", "-n", "kured", "-o", "json"],
            ["status", "-o", "json", "--kubeconfig", "/home/u/.kube/config", "--context", "prod",
             "--ds-namespace", "kured"],
        ),
        (
            ["freeze", "--reason", "INC-1", "--namespace=ops", "--context=c", "--kubeconfig=/k"],
            ["freeze", "--reason", "INC-1", "--kubeconfig", "/k", "--context", "c", "--ds-namespace", "ops"],
        ),
        (
            ["request-reboot", "node-1", "--reason", "kernel", "-nkured"],
            ["request-reboot", "node-1", "--reason", "kernel", "--kubeconfig", "/home/u/.kube/config"],
        ),
        (
            ["lock", "release", "node-1", "-n", "x", "--", "-n"],
            ["lock", "release", "node-1", "--kubeconfig", "/home/u/.kube/config", "--ds-namespace", "x",
             "--", "-n"],
        ),
        (["notify-test", "--notify-url", "x://y", "--context", "c"], ["notify-test", "--notify-url", "x://y"]),
        (
            ["plan", "-n", "kured", "-o", "json"],
            ["plan", "-o", "json", "--kubeconfig", "/home/u/.kube/config", "--ds-namespace", "kured"],
        ),
    ],
    ids=["defaults", "context-namespace", "equals-forms", "cluster-scoped", "double-dash", "no-cluster",
         "plan-reads-the-namespace"],
)  # fmt: skip
def test_command_line(argv: list[str], expected: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/u")
    assert kubectl.command_line(argv, {}) == expected


def test_a_kubeconfig_list_s_current_context_is_the_first_file_s(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.write_text("apiVersion: v1\nkind: Config\n")
    second.write_text('{"current-context": "two"}')
    (tmp_path / "c").write_text("current-context: three\n")
    listed = os.pathsep.join(str(tmp_path / n) for n in ("missing", "a", "b", "c"))
    assert kubectl.command_line(["status"], {"KUBECONFIG": listed})[-2:] == ["--context", "two"]
    assert kubectl.command_line(["status", "--context", "x"], {"KUBECONFIG": listed})[-2:] == [
        "--context",
        "x",
    ]


def test_a_context_needs_a_kubeconfig(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    with pytest.raises(errors.KubeError, match="--context prod: no kubeconfig"):
        Kube.auto(context="prod")


def test_kubeconfig_follows_kubectl() -> None:
    assert kubectl.kubeconfig_path("/flag", {"KUBECONFIG": "/a:/b"}) == "/flag"
    assert kubectl.kubeconfig_path(None, {"KUBECONFIG": "/a:/b"}) == "/a:/b"
    assert kubectl.kubeconfig_path(None, {}).endswith("/.kube/config")


@pytest.mark.parametrize(
    ("argv", "message"),
    [([], "a command is required"), (["reboot"], "unknown command 'reboot'"), (["status", "-n"], "-n")],
)
def test_command_line_errors(argv: list[str], message: str) -> None:
    with pytest.raises(kubectl.UsageError, match=message):
        kubectl.command_line(argv, {})


def test_plugin_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert kubectl.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Usage: kubectl pykured COMMAND")
    for name, text in cli.COMMANDS:
        assert f"  {name.ljust(14)}   {text}\n" in out
    assert kubectl.main([]) == 2
    assert capsys.readouterr().err == out


# -- --help under each name ----------------------------------------------------------------------------------


def _help(name: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([BIN / name, "--help"], capture_output=True, text=True, timeout=60, check=False)


def test_kured_help_is_kured_s_usage_only() -> None:
    done = _help("kured")
    assert (done.returncode, done.stdout) == (0, "")
    assert done.stderr == usage()
    assert done.stderr.startswith("Usage of kured:\n")
    assert "Commands" not in done.stderr and "request-reboot" not in done.stderr


def test_pykured_help_lists_the_commands_after_the_flags() -> None:
    done = _help("pykured")
    assert (done.returncode, done.stdout) == (0, "")
    flags, _, commands = done.stderr.partition("\nCommands (")
    assert flags == usage("pykured")
    listed = [line.split()[0] for line in commands.splitlines() if line.startswith("  ")]
    assert listed == [
        "status",
        "plan",
        "request-reboot",
        "rollout",
        "freeze",
        "unfreeze",
        "unquarantine",
        "lock",
        "notify-test",
        "signal-relay",
    ]
    assert set(listed) == set(cli._SUBCOMMANDS)


def test_pykured_flag_error_shows_the_commands_too() -> None:
    done = subprocess.run([BIN / "pykured", "--frobnicate"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "\nCommands (" in done.stderr
    assert done.stderr.endswith("unknown flag: --frobnicate\n")


# -- against the API server ----------------------------------------------------------------------------------


def plugin(*argv: str, env: dict[str, str], exe: Path | None = None) -> subprocess.CompletedProcess[str]:
    base = {"PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "HOME": env.pop("HOME", "/nonexistent")}
    return subprocess.run(
        [str(exe or PLUGIN), *argv], env={**base, **env}, capture_output=True, text=True, timeout=120
    )
