"""Tests for pykured.host.sentinel: kured's file and command checkers, and pykured's inotify change
notification.

The watch tests use real inotify on tmp directories. Waits are bounded at 5 s but never used as the
assertion: each test waits for a callback and then checks which thread delivered it, so a notification from
the periodic stat fallback (thread ``pykured-sentinel``) cannot pass for an inotify event.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pykured.core.errors import ConfigError, RebootError
from pykured.host import sentinel
from pykured_dev.eventually import eventually

SUPERVISOR = "pykured-sentinel"
BOUND = 5.0

SHIM = """#!/bin/sh
while [ "$#" -gt 0 ]; do
  if [ "$1" = "--" ]; then shift; exec "$@"; fi
  shift
done
exit 99
"""


class Recorder:
    """An ``on_change`` callback that remembers which thread called it."""

    def __init__(self, *, fail_first: bool = False) -> None:
        self.threads: list[str] = []
        self._cond = threading.Condition()
        self._fail_first = fail_first

    def __call__(self) -> None:
        with self._cond:
            self.threads.append(threading.current_thread().name)
            self._cond.notify_all()
            if self._fail_first and len(self.threads) == 1:
                raise RuntimeError("callback failure")

    def mark(self) -> int:
        with self._cond:
            return len(self.threads)

    def wait_from_watcher(self, since: int) -> bool:
        """Wait for a call after ``since`` that came from a watchdog thread, not the stat fallback."""
        with self._cond:
            return self._cond.wait_for(lambda: any(t != SUPERVISOR for t in self.threads[since:]), BOUND)

    def wait_any(self, since: int) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: len(self.threads) > since, BOUND)


def _until(predicate: Callable[[], bool]) -> bool:
    return eventually(predicate, timeout=BOUND, every=0.01)


@pytest.fixture
def started() -> Iterator[Callable[..., sentinel.FileSentinel]]:
    sentinels: list[sentinel.FileSentinel] = []

    def start(path: Path, recorder: Recorder, **kwargs: float) -> sentinel.FileSentinel:
        watch = sentinel.FileSentinel(str(path), on_change=recorder, **kwargs)
        sentinels.append(watch)
        watch.start()
        return watch

    yield start
    for watch in sentinels:
        watch.stop()


# -- required(): kured's os.Stat ---------------------------------------------------------------------------


def _regular(path: Path) -> None:
    path.write_text("")


def _directory(path: Path) -> None:
    path.mkdir()


def _symlink(path: Path) -> None:
    (path.parent / "real").write_text("")
    path.symlink_to(path.parent / "real")


def _dangling(path: Path) -> None:
    path.symlink_to(path.parent / "nowhere")


@pytest.mark.parametrize(
    ("make", "expected"),
    [(None, False), (_regular, True), (_directory, True), (_symlink, True), (_dangling, False)],
    ids=["missing", "regular-file", "directory", "symlink-followed", "dangling-symlink"],
)
def test_required_is_stat(tmp_path: Path, make: Callable[[Path], None] | None, expected: bool) -> None:
    path = tmp_path / "reboot-required"
    if make is not None:
        make(path)
    assert sentinel.FileSentinel(str(path)).required() is expected


# -- the inotify watch -------------------------------------------------------------------------------------


def _touch(path: Path) -> None:
    path.write_text("")


def _delete(path: Path) -> None:
    path.unlink()


def _rename_into_place(path: Path) -> None:
    temp = path.parent / ".reboot-required.tmp"
    temp.write_text("")
    os.replace(temp, path)


def _rename_in_from_elsewhere(path: Path) -> None:
    other = path.parent.parent / "elsewhere"
    other.mkdir()
    (other / "file").write_text("")
    os.replace(other / "file", path)


def _rename_away(path: Path) -> None:
    os.replace(path, path.parent / "reboot-required.old")


def _make_dir(path: Path) -> None:
    path.mkdir()


@pytest.mark.parametrize(
    ("exists_before", "action", "exists_after"),
    [
        (False, _touch, True),
        (True, _delete, False),
        (False, _rename_into_place, True),
        (False, _rename_in_from_elsewhere, True),
        (True, _rename_away, False),
        (False, _make_dir, True),
    ],
    ids=["create", "delete", "rename-into-place", "rename-in-from-other-dir", "rename-away", "mkdir"],
)
def test_event_naming_the_file_notifies(
    tmp_path: Path,
    started: Callable[..., sentinel.FileSentinel],
    exists_before: bool,
    action: Callable[[Path], None],
    exists_after: bool,
) -> None:
    directory = tmp_path / "run"
    directory.mkdir()
    path = directory / "reboot-required"
    if exists_before:
        path.write_text("")
    recorder = Recorder()
    watch = started(path, recorder, rearm_interval=3600)
    assert watch.mode == "inotify"
    action(path)
    assert recorder.wait_from_watcher(0)
    assert watch.required() is exists_after


def test_other_files_do_not_notify(tmp_path: Path, started: Callable[..., sentinel.FileSentinel]) -> None:
    path = tmp_path / "reboot-required"
    recorder = Recorder()
    started(path, recorder, rearm_interval=3600)
    (tmp_path / "unrelated").write_text("")
    (tmp_path / "reboot-required.tmp").write_text("")
    path.write_text("")  # inotify delivers in order: the unrelated events were handled before this one
    assert recorder.wait_from_watcher(0)
    assert len(recorder.threads) == 1


def test_symlinked_parent_directory(tmp_path: Path, started: Callable[..., sentinel.FileSentinel]) -> None:
    real = tmp_path / "run"
    real.mkdir()
    link = tmp_path / "var-run"
    link.symlink_to(real)
    recorder = Recorder()
    watch = started(link / "reboot-required", recorder, rearm_interval=3600)
    (real / "reboot-required").write_text("")
    assert recorder.wait_from_watcher(0)
    assert watch.required()


def test_directory_missing_at_start(tmp_path: Path, started: Callable[..., sentinel.FileSentinel]) -> None:
    directory = tmp_path / "sentinel"
    recorder = Recorder()
    watch = started(directory / "reboot-required", recorder, rearm_interval=0.05)
    assert (watch.mode, watch.arms) == ("stat", 0)
    directory.mkdir()
    assert _until(lambda: watch.arms == 1)
    mark = recorder.mark()
    (directory / "reboot-required").write_text("")
    assert recorder.wait_from_watcher(mark)
    assert watch.mode == "inotify"


def test_file_appearing_with_its_directory_is_seen_by_stat(
    tmp_path: Path, started: Callable[..., sentinel.FileSentinel]
) -> None:
    directory = tmp_path / "sentinel"
    recorder = Recorder()
    watch = started(directory / "reboot-required", recorder, rearm_interval=0.05)
    directory.mkdir()
    (directory / "reboot-required").write_text("")
    assert recorder.wait_any(0)
    assert watch.required()


def _delete_and_recreate(directory: Path) -> None:
    shutil.rmtree(directory)
    directory.mkdir()


def _replace_by_rename(directory: Path) -> None:
    os.rename(directory, directory.parent / "old")
    directory.mkdir()


@pytest.mark.parametrize(
    "replace", [_delete_and_recreate, _replace_by_rename], ids=["deleted-recreated", "renamed-away-recreated"]
)
def test_directory_replaced_is_rearmed(
    tmp_path: Path, started: Callable[..., sentinel.FileSentinel], replace: Callable[[Path], None]
) -> None:
    directory = tmp_path / "sentinel"
    directory.mkdir()
    (directory / "reboot-required").write_text("")
    recorder = Recorder()
    watch = started(directory / "reboot-required", recorder, rearm_interval=0.05, check_interval=0.05)
    assert watch.arms == 1
    replace(directory)
    assert recorder.wait_any(0)  # the file is gone with its directory
    assert not watch.required()
    assert _until(lambda: watch.arms == 2)
    mark = recorder.mark()
    (directory / "reboot-required").write_text("")
    assert recorder.wait_from_watcher(mark)


class _NoInotify:
    def __init__(self, err: int) -> None:
        self._err = err

    def schedule(self, *args: object, **kwargs: object) -> None:
        return None

    def start(self) -> None:
        raise OSError(self._err, os.strerror(self._err))


@pytest.mark.parametrize(
    ("err", "mode", "delivered_by_watcher"),
    [(errno.EMFILE, "polling", True), (errno.ENOSPC, "polling", True), (errno.EACCES, "stat", False)],
    ids=["instance-limit-polls", "watch-limit-polls", "other-error-stat-only"],
)
def test_inotify_failures_fall_back(
    tmp_path: Path,
    started: Callable[..., sentinel.FileSentinel],
    monkeypatch: pytest.MonkeyPatch,
    err: int,
    mode: str,
    delivered_by_watcher: bool,
) -> None:
    monkeypatch.setattr(sentinel, "Observer", lambda: _NoInotify(err))
    recorder = Recorder()
    rearm = 3600 if delivered_by_watcher else 0.05
    watch = started(tmp_path / "reboot-required", recorder, rearm_interval=rearm, poll_interval=0.05)
    assert watch.mode == mode
    (tmp_path / "reboot-required").write_text("")
    assert recorder.wait_from_watcher(0) if delivered_by_watcher else recorder.wait_any(0)


def _no_inotify_instance() -> _NoInotify:
    """Watchdog's inotify Observer opens its inotify instance in its constructor (limit: 128 per user)."""
    raise OSError(errno.EMFILE, "inotify instance limit reached")


def test_inotify_instance_limit_in_the_observers_constructor_falls_back_to_polling(
    tmp_path: Path, started: Callable[..., sentinel.FileSentinel], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sentinel, "Observer", _no_inotify_instance)
    recorder = Recorder()
    watch = started(tmp_path / "reboot-required", recorder, rearm_interval=3600, poll_interval=0.05)
    assert watch.mode == "polling"
    (tmp_path / "reboot-required").write_text("")
    assert recorder.wait_from_watcher(0)


def test_failing_callback_does_not_stop_the_watch(
    tmp_path: Path, started: Callable[..., sentinel.FileSentinel], caplog: pytest.LogCaptureFixture
) -> None:
    recorder = Recorder(fail_first=True)
    path = tmp_path / "reboot-required"
    started(path, recorder, rearm_interval=3600)
    with caplog.at_level(logging.ERROR, logger="pykured.host.sentinel"):
        path.write_text("")
        assert recorder.wait_from_watcher(0)
        path.unlink()
        assert _until(lambda: len(recorder.threads) >= 2)
    assert "change callback failed" in caplog.text


def test_stop_joins_the_supervisor(tmp_path: Path) -> None:
    watch = sentinel.FileSentinel(str(tmp_path / "reboot-required"), on_change=Recorder())
    watch.start()
    assert any(t.name == SUPERVISOR for t in threading.enumerate())
    watch.stop()
    assert not any(t.name == SUPERVISOR for t in threading.enumerate())
    assert watch.mode == "stat"


def test_start_without_callback_is_a_no_op(tmp_path: Path) -> None:
    watch = sentinel.FileSentinel(str(tmp_path / "reboot-required"))
    watch.start()
    assert (watch.mode, watch.arms) == ("stat", 0)
    watch.stop()


# -- CommandSentinel ---------------------------------------------------------------------------------------


@pytest.fixture
def shim(tmp_path: Path) -> str:
    path = tmp_path / "nsenter-shim"
    path.write_text(SHIM)
    path.chmod(0o755)
    return str(path)


def test_command_is_wrapped_in_nsenter() -> None:
    assert sentinel.CommandSentinel(["ls", "-Fal"]).command == [
        "/usr/bin/nsenter",
        "-m/proc/1/ns/mnt",
        "--",
        "ls",
        "-Fal",
    ]


@pytest.mark.parametrize(
    ("argv", "expected", "warns"),
    [
        (["true"], True, False),
        (["false"], False, False),
        (["sh", "-c", "echo why; exit 3"], False, True),
        (["./babar"], False, True),
    ],
    ids=["true-required", "false-not-required", "exit-3-warns", "missing-command-127-warns"],
)
def test_command_exit_status(
    shim: str, caplog: pytest.LogCaptureFixture, argv: list[str], expected: bool, warns: bool
) -> None:
    with caplog.at_level(logging.WARNING, logger="pykured.host.sentinel"):
        assert sentinel.CommandSentinel(argv, nsenter=shim).required() is expected
    assert ("unexpected exit code" in caplog.text) is warns


def test_command_output_is_in_the_warning(shim: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="pykured.host.sentinel"):
        sentinel.CommandSentinel(
            ["sh", "-c", "echo out-text; echo err-text >&2; exit 2"], nsenter=shim
        ).required()
    assert "out-text" in caplog.text
    assert "err-text" in caplog.text


def test_command_that_cannot_start_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(RebootError, match="error invoking sentinel command"):
        sentinel.CommandSentinel(["true"], nsenter=str(tmp_path / "babar")).required()


def test_empty_command_is_refused() -> None:
    with pytest.raises(ConfigError):
        sentinel.CommandSentinel([])


def test_real_nsenter_is_refused_in_safe_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    if not os.path.exists("/usr/bin/nsenter"):
        pytest.skip("no nsenter on this machine: nothing real to refuse")
    reached: list[object] = []
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: reached.append(a))
    with pytest.raises(RebootError, match="safe mode"):
        sentinel.CommandSentinel(["true"]).required()
    assert reached == []


def test_start_and_stop_are_no_ops() -> None:
    command = sentinel.CommandSentinel(["true"])
    command.start()
    command.stop()
    assert command.argv == ["true"]


def test_an_armed_watch_checks_at_the_check_interval_and_an_unarmed_one_at_the_rearm_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An idle node with its inotify watch armed wakes only every ``check_interval`` (60 s by default); the
    periodic check runs every ``rearm_interval`` only while no watch is armed."""
    checks: list[str] = []
    original = sentinel.FileSentinel._maintain

    def counted(self: sentinel.FileSentinel) -> None:
        checks.append(self.mode)
        original(self)

    monkeypatch.setattr(sentinel.FileSentinel, "_maintain", counted)
    assert sentinel.FileSentinel("/x").__dict__["_check_interval"] == 60.0
    intervals = {"rearm_interval": 0.01, "check_interval": 3600.0}
    armed = sentinel.FileSentinel(str(tmp_path / "reboot-required"), on_change=Recorder(), **intervals)
    missing = sentinel.FileSentinel(
        str(tmp_path / "none" / "reboot-required"), on_change=Recorder(), **intervals
    )
    armed.start()
    try:
        assert armed.mode == "inotify"
        missing.start()
        try:
            assert _until(lambda: checks.count("stat") >= 5)  # the unarmed one, every 10 ms
        finally:
            missing.stop()
        assert "inotify" not in checks  # the armed one waited all along for its hour
    finally:
        armed.stop()
