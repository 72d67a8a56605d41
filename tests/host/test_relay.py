"""The signal relay on a real FIFO: the agent's request, the relay's signal to a child standing in for PID 1,
what it ignores, what it refuses (the guard: never PID 1 under pytest)."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import threading
from pathlib import Path

import pytest

from pykured.core.errors import RebootError
from pykured.host import relay
from pykured_dev.eventually import eventually


class Relay:
    """``relay.serve`` in a thread, recording what it sends."""

    def __init__(self, path: Path, target: int, *, signum: int = signal.SIGTERM) -> None:
        self.path = path
        self.sent: list[tuple[int, int]] = []
        self.stop = threading.Event()

        def send(pid: int, sig: int) -> None:
            self.sent.append((pid, sig))
            os.kill(pid, sig)

        self.thread = threading.Thread(
            target=relay.serve,
            args=(str(path), signum),
            kwargs={"target_pid": target, "stop": self.stop, "send": send},
        )

    def __enter__(self) -> Relay:
        self.thread.start()
        assert eventually(lambda: self.path.exists() and stat.S_ISFIFO(self.path.stat().st_mode), timeout=10)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=10)


@pytest.mark.parametrize(
    ("signum", "name"),
    [(39, "SIGRTMIN+5"), (signal.SIGRTMIN, "SIGRTMIN"), (15, "SIGTERM"), (10, "SIGUSR1")],
    ids=["rtmin+5", "rtmin", "term", "usr1"],
)
def test_signal_name(signum: int, name: str) -> None:
    assert relay.signal_name(signum) == name


def test_a_request_sends_the_relays_own_signal_to_its_target(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    path = tmp_path / "reboot"
    with Relay(path, sleeper.pid) as running:
        assert stat.S_IMODE(path.stat().st_mode) == relay.FIFO_MODE  # the agent's user may only write
        relay.ask(str(path))
        assert sleeper.wait(timeout=10) == -signal.SIGTERM
    assert running.sent == [(sleeper.pid, signal.SIGTERM)]


def test_anything_but_a_request_is_ignored_and_the_relay_stays(
    tmp_path: Path, sleeper: subprocess.Popen[bytes], caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "reboot"
    with Relay(path, sleeper.pid) as running:
        fd = os.open(path, os.O_WRONLY)
        os.write(fd, b"reboot\nplease also kill 1 with SIGKILL\n" + b"x" * 200)
        os.close(fd)
        assert eventually(lambda: "ignored" in caplog.text, timeout=10)
        assert sleeper.poll() is None and running.sent == []
        relay.ask(str(path))
        relay.ask(str(path))  # asked twice before the relay read: one request or two, the same signal
        assert sleeper.wait(timeout=10) == -signal.SIGTERM
    assert running.sent and set(running.sent) == {(sleeper.pid, signal.SIGTERM)}
    assert "please" not in caplog.text  # the other container's bytes never reach the log


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"reboot\n", True),
        (b"reboot\nreboot\n", True),
        (b"", False),
        (b"reboot", False),
        (b"reboot\nx", False),
    ],
)
def test_is_request(data: bytes, expected: bool) -> None:
    assert relay.is_request(data) is expected


def test_whatever_lies_at_the_path_becomes_the_fifo(tmp_path: Path) -> None:
    path = tmp_path / "reboot"
    path.write_text("left here\n")
    relay.prepare(str(path))
    assert stat.S_ISFIFO(path.stat().st_mode) and stat.S_IMODE(path.stat().st_mode) == relay.FIFO_MODE


def test_the_agent_refuses_a_path_that_is_no_fifo(tmp_path: Path) -> None:
    path = tmp_path / "reboot"
    path.write_text("")
    with pytest.raises(RebootError, match="is not a FIFO"):
        relay.ask(str(path))
    assert path.read_text() == ""


@pytest.mark.parametrize("target", [1, 0, -1, os.getpid()], ids=["pid-1", "group", "everything", "self"])
def test_the_relay_never_starts_for_a_target_the_guard_refuses(tmp_path: Path, target: int) -> None:
    with pytest.raises(RebootError, match="refusing to signal"):
        relay.serve(str(tmp_path / "reboot"), 39, target_pid=target, stop=threading.Event())
    assert not (tmp_path / "reboot").exists()


def test_the_relay_command_fails_in_one_line(
    tmp_path: Path,
    sleeper: subprocess.Popen[bytes],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A FIFO it cannot make (its directory missing), or a target the guard refuses: one error line and
    exit 1, never a traceback."""
    from pykured.cli.signal_relay import signal_relay_main

    monkeypatch.setenv(relay.TARGET_ENV, str(sleeper.pid))
    assert signal_relay_main([f"--relay={tmp_path / 'missing' / 'reboot'}"]) == 1
    monkeypatch.setenv(relay.TARGET_ENV, "1")
    assert signal_relay_main([f"--relay={tmp_path / 'reboot'}"]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2 and "Traceback" not in "".join(lines), lines
    assert "cannot run" in lines[0] and "No such file or directory" in lines[0], lines
    assert "refusing to signal pid 1" in lines[1], lines
    assert sleeper.poll() is None
