"""Tests for pykured.host.reboot and the host guards in pykured.host.guard.

Nothing here may touch the machine: commands run through a shim nsenter script (it drops everything up
to ``--`` and runs the rest in the test's own namespaces), signals go to a sleeper child this test spawns,
and every refusal test also replaces ``subprocess.run``/``os.kill`` with a tripwire, so a broken guard fails
the test instead of reaching the host.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from pykured.core.errors import ConfigError, RebootError
from pykured.host import guard as host
from pykured.host import reboot

SHIM = """#!/bin/sh
printf '%s\\n' "$@" > "$(dirname "$0")/shim-args"
while [ "$#" -gt 0 ]; do
  if [ "$1" = "--" ]; then shift; exec "$@"; fi
  shift
done
exit 99
"""

DRY_SHIM = """#!/bin/sh
printf '%s\\n' "$@" > "$(dirname "$0")/dry-args"
exit 0
"""


def _script(path: Path, text: str) -> str:
    path.write_text(text)
    path.chmod(0o755)
    return str(path)


@pytest.fixture
def shim(tmp_path: Path) -> str:
    return _script(tmp_path / "nsenter-shim", SHIM)


@pytest.fixture
def dry_shim(tmp_path: Path) -> str:
    """A shim that never runs the command: for refusal tests whose command must never execute."""
    return _script(tmp_path / "nsenter-dry", DRY_SHIM)


@pytest.fixture
def tripwires(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Replace process spawning and signalling: if a guard fails open, nothing reaches the host."""
    calls: list[object] = []

    def no_run(*args: object, **kwargs: object) -> None:
        calls.append(("run", args))
        raise AssertionError("guard failed open: subprocess.run was reached")

    def no_kill(pid: int, sig: int) -> None:
        calls.append(("kill", pid, sig))
        raise AssertionError("guard failed open: os.kill was reached")

    monkeypatch.setattr(subprocess, "run", no_run)
    monkeypatch.setattr(os, "kill", no_kill)
    return calls


# -- safe mode --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("environ", "modules", "expected"),
    [
        ({}, {"pytest"}, True),
        ({}, set(), False),
        ({"PYKURED_SAFE_MODE": "1"}, set(), True),
        ({"PYKURED_SAFE_MODE": "yes"}, set(), True),
        ({"PYKURED_SAFE_MODE": "0"}, set(), False),
        ({"PYKURED_SAFE_MODE": "false"}, set(), False),
        ({"PYKURED_SAFE_MODE": ""}, set(), False),
        ({"PYKURED_SAFE_MODE": "0"}, {"pytest"}, True),
    ],
    ids=["pytest", "plain", "env-1", "env-yes", "env-0", "env-false", "env-empty", "pytest-beats-env-0"],
)
def test_is_safe_mode(environ: dict[str, str], modules: set[str], expected: bool) -> None:
    assert host.is_safe_mode(environ=environ, modules=modules) is expected


def test_safe_mode_is_on_under_pytest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYKURED_SAFE_MODE", "0")
    assert host.safe_mode() is True


# -- CommandRebooter --------------------------------------------------------------------------------------


def test_command_is_wrapped_in_nsenter() -> None:
    rebooter = reboot.CommandRebooter(["/bin/systemctl", "reboot"])
    assert rebooter.command == ["/usr/bin/nsenter", "-m/proc/1/ns/mnt", "--", "/bin/systemctl", "reboot"]


def test_empty_command_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"^no reboot command specified$"):
        reboot.CommandRebooter([])


def test_command_runs_through_shim(shim: str, tmp_path: Path) -> None:
    marker = tmp_path / "rebooted"
    reboot.CommandRebooter(["touch", str(marker)], nsenter=shim).reboot()
    assert marker.exists()
    assert (tmp_path / "shim-args").read_text().splitlines() == [
        "-m/proc/1/ns/mnt",
        "--",
        "touch",
        str(marker),
    ]


def test_command_failure_carries_output(shim: str) -> None:
    rebooter = reboot.CommandRebooter(
        ["sh", "-c", "echo to-stdout; echo to-stderr >&2; exit 3"], nsenter=shim
    )
    with pytest.raises(RebootError) as info:
        rebooter.reboot()
    assert "exit status 3" in str(info.value)
    assert "to-stdout" in str(info.value)
    assert "to-stderr" in str(info.value)


def test_missing_nsenter_is_an_error(tmp_path: Path) -> None:
    rebooter = reboot.CommandRebooter(["true"], nsenter=str(tmp_path / "no-such-nsenter"))
    with pytest.raises(RebootError, match="error invoking reboot command"):
        rebooter.reboot()


def _elf_copy(tmp_path: Path) -> str:
    target = tmp_path / "nsenter"
    shutil.copy("/usr/bin/true", target)
    return str(target)


def _symlink_to_real(tmp_path: Path) -> str:
    link = tmp_path / "nsenter-link"
    link.symlink_to(shutil.which("nsenter") or "/usr/bin/nsenter")
    return str(link)


@pytest.mark.parametrize(
    "make_nsenter",
    [
        lambda tmp: "/usr/bin/nsenter",
        lambda tmp: "nsenter",
        _elf_copy,
        _symlink_to_real,
    ],
    ids=["default-path", "bare-name-on-path", "elf-binary-copy", "symlink-to-real"],
)
def test_real_nsenter_is_refused_in_safe_mode(
    make_nsenter: Callable[[Path], str], tmp_path: Path, tripwires: list[object]
) -> None:
    nsenter = make_nsenter(tmp_path)
    if not os.path.exists(shutil.which(nsenter) or nsenter):
        pytest.skip("no nsenter on this machine: nothing real to refuse")
    with pytest.raises(RebootError, match="safe mode"):
        reboot.CommandRebooter(["true"], nsenter=nsenter).reboot()
    assert tripwires == []


@pytest.mark.parametrize(
    "argv",
    [
        ["/bin/systemctl", "reboot"],
        ["systemctl", "reboot"],
        ["reboot"],
        ["/sbin/shutdown", "-r", "now"],
        ["kill", "-s", "SIGRTMIN+5", "1"],
        ["sh", "-c", "systemctl reboot"],
        ["sh", "-c", "echo b > /proc/sysrq-trigger"],
        ["bash", "-c", "true; /usr/sbin/poweroff"],
        ["nsenter", "-t", "1", "-m", "--", "true"],
    ],
    ids=[
        "systemctl",
        "bare-systemctl",
        "reboot",
        "shutdown",
        "kill",
        "sh-systemctl",
        "sysrq",
        "poweroff",
        "nested",
    ],
)
def test_reboot_like_commands_are_refused_even_through_a_shim(
    argv: list[str], dry_shim: str, tmp_path: Path, tripwires: list[object]
) -> None:
    with pytest.raises(RebootError, match="safe mode"):
        reboot.CommandRebooter(argv, nsenter=dry_shim).reboot()
    assert tripwires == []
    assert not (tmp_path / "dry-args").exists()


@pytest.mark.parametrize(
    "argv",
    [["touch", "/tmp/x/rebooted"], ["sh", "-c", "echo rebooting-now > /tmp/x"], ["true"]],
    ids=["touch-rebooted-file", "shell-word-prefix", "true"],
)
def test_harmless_commands_pass_the_command_guard(argv: list[str]) -> None:
    host.guard_command(argv)  # must not raise
    assert host.safe_mode()


# -- SignalRebooter ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "signum", [39, signal.SIGUSR1, signal.SIGTERM], ids=["sigrtmin+5-default", "sigusr1", "sigterm"]
)
def test_signal_reaches_the_configured_target(signum: int, sleeper: subprocess.Popen[bytes]) -> None:
    reboot.SignalRebooter(signum, target_pid=sleeper.pid).reboot()
    assert sleeper.wait(timeout=10) == -signum


def test_with_a_relay_the_agent_asks_it_and_signals_nothing_itself(
    tmp_path: Path, tripwires: list[object]
) -> None:
    """``--reboot-signal-relay``: the agent writes the request into the relay's FIFO; none, a clear error."""
    fifo = tmp_path / "reboot"
    with pytest.raises(RebootError, match="cannot reach the signal relay"):
        reboot.SignalRebooter(relay=str(fifo)).reboot()
    os.mkfifo(fifo)
    with pytest.raises(RebootError, match=r"^the signal relay at .* is not running$"):
        reboot.SignalRebooter(relay=str(fifo)).reboot()
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        reboot.SignalRebooter(relay=str(fifo)).reboot()
        assert os.read(reader, 64) == b"reboot\n"
    finally:
        os.close(reader)
    assert tripwires == []


def test_default_signal_is_sigrtmin_plus_5() -> None:
    rebooter = reboot.SignalRebooter()
    assert (rebooter.signal, rebooter.target_pid) == (39, 1)


def test_signal_failure_message() -> None:
    with open("/proc/sys/kernel/pid_max") as handle:
        missing = int(handle.read()) + 1000
    with pytest.raises(RebootError, match=r"^signal of SIGRTMIN\+5 failed: no such process$"):
        reboot.SignalRebooter(target_pid=missing).reboot()


@pytest.mark.parametrize(
    "target",
    [1, 0, -1, os.getpid(), os.getppid()],
    ids=["pid-1", "pid-0-process-group", "pid-minus-1-everything", "self", "parent"],
)
def test_signal_targets_refused(target: int, tripwires: list[object]) -> None:
    with pytest.raises(RebootError, match="refusing to signal"):
        reboot.SignalRebooter(target_pid=target).reboot()
    assert tripwires == []


# -- ZincatiHandoff ---------------------------------------------------------------------------------------


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("umask", [0o022, 0o000, 0o077], ids=["umask-022", "umask-000", "umask-077"])
def test_zincati_marker_default_content_and_modes(tmp_path: Path, umask: int) -> None:
    marker = tmp_path / "var/lib/zincati/admin/strategy/marker_file/allowfinalize.json"
    handoff = reboot.ZincatiHandoff(str(marker), allow_duration_s=900, now_fn=lambda: 1_767_225_600.9)
    old = os.umask(umask)
    try:
        handoff.reboot()
    finally:
        os.umask(old)
    assert json.loads(marker.read_text()) == {"allowUntil": 1_767_226_500}
    assert _mode(marker) == 0o644
    assert _mode(marker.parent) == 0o755
    assert _mode(tmp_path / "var/lib/zincati") == 0o755
    assert handoff.present()


def test_zincati_marker_custom_content_verbatim(tmp_path: Path) -> None:
    marker = tmp_path / "ready"
    reboot.ZincatiHandoff(str(marker), allow_duration_s=0, content="go\n").reboot()
    assert marker.read_bytes() == b"go\n"


def test_zincati_marker_replaces_atomically(tmp_path: Path) -> None:
    marker = tmp_path / "allowfinalize.json"
    marker.write_text("{}")
    marker.chmod(0o666)
    before = marker.stat().st_ino
    reboot.ZincatiHandoff(str(marker), allow_duration_s=60, now_fn=lambda: 100.0).reboot()
    assert marker.stat().st_ino != before  # renamed into place, never rewritten in place
    assert _mode(marker) == 0o644  # a world-writable marker would be rejected by Zincati
    assert sorted(p.name for p in tmp_path.iterdir()) == ["allowfinalize.json"]  # no temp file left
    assert json.loads(marker.read_text()) == {"allowUntil": 160}


def test_zincati_marker_remove(tmp_path: Path) -> None:
    handoff = reboot.ZincatiHandoff(str(tmp_path / "m.json"), allow_duration_s=60)
    handoff.reboot()
    handoff.remove()
    assert not handoff.present()
    handoff.remove()  # already gone: fine
    assert not (tmp_path / "m.json").exists()


def test_zincati_marker_write_failure(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    handoff = reboot.ZincatiHandoff(str(blocker / "m.json"), allow_duration_s=60)
    with pytest.raises(RebootError, match="cannot write Zincati marker"):
        handoff.reboot()


def test_zincati_needs_a_positive_duration_for_default_content() -> None:
    with pytest.raises(ConfigError, match="allow duration"):
        reboot.ZincatiHandoff("/nonexistent/m.json", allow_duration_s=0)
