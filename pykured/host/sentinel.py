"""The reboot sentinel: "does this node need a reboot?", from a file or from a host command.

Mirrors kured's ``pkg/checkers``:

* :class:`FileSentinel` — ``required()`` is ``os.path.exists(path)``: kured's ``os.Stat`` inside the container
  (any file type, symlinks followed, any error means "no"). The host's ``/var/run`` is normally mounted at
  ``/sentinel``, so the path is ``/sentinel/reboot-required``. pykured adds an optional change notification: a
  watchdog inotify observer on the *parent* directory (non-recursive) calls ``on_change`` whenever an event
  names the file (created, deleted, moved from or to), so the daemon can re-check at once instead of waiting
  for ``--period``. The watch is only an accelerator (``benchmarks/sentinel_latency.py``): a supervisor thread
  re-arms it when the directory is missing at start, deleted or replaced, falls back to a polling observer on
  inotify limits (EMFILE/ENOSPC), and stats the file every ``check_interval`` seconds while the inotify watch
  is armed (60 s: an idle node wakes once a minute, as kured's metric refresh) and every ``rearm_interval``
  seconds while it is not (5 s: the directory missing, a polling observer, stat only), so a missed event costs
  at most that.
* :class:`CommandSentinel` — ``--reboot-sentinel-command`` run as ``/usr/bin/nsenter -m/proc/1/ns/mnt --
  <argv>``: exit 0 → required; any other exit → not required, with a warning carrying stdout/stderr unless the
  exit code is 1. A command that cannot be started raises :class:`~pykured.core.errors.RebootError` (kured
  exits
  fatally; pykured lets the daemon decide). Safe mode (:mod:`pykured.host.guard`) refuses the real nsenter.
"""

from __future__ import annotations

import errno
import logging
import os
import subprocess
import threading
from collections.abc import Callable, Sequence
from typing import Protocol

from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver
from watchdog.observers.polling import PollingObserver

from pykured.core.errors import ConfigError, RebootError
from pykured.host import guard as host

logger = logging.getLogger(__name__)

_EVENTS: list[type[FileSystemEvent]] = [
    FileCreatedEvent,
    DirCreatedEvent,
    FileDeletedEvent,
    DirDeletedEvent,
    FileMovedEvent,
    DirMovedEvent,
]
_LIMIT_ERRNOS = (errno.EMFILE, errno.ENOSPC, errno.ENFILE)


class Sentinel(Protocol):
    """Answers "is a reboot required?"; ``start``/``stop`` run an optional change notification."""

    def required(self) -> bool: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...


class _Handler(FileSystemEventHandler):
    def __init__(self, owner: FileSentinel, *, directory: str, target: str) -> None:
        self._owner = owner
        self._directory = directory
        self._target = target

    def on_any_event(self, event: FileSystemEvent) -> None:
        paths = {os.fsdecode(event.src_path), os.fsdecode(event.dest_path)}
        if isinstance(event, DirDeletedEvent) and self._directory in paths:
            self._owner._watch_lost()
        elif self._target in paths:
            self._owner._changed()


class FileSentinel:
    """kured's file sentinel, with an inotify-accelerated change notification (see the module docstring)."""

    def __init__(
        self,
        path: str,
        *,
        on_change: Callable[[], None] | None = None,
        rearm_interval: float = 5.0,
        check_interval: float = 60.0,
        poll_interval: float = 1.0,
    ) -> None:
        self.path = path
        self._on_change = on_change
        self._rearm_interval = rearm_interval
        self._check_interval = check_interval
        self._poll_interval = poll_interval
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False
        self._rearm = False
        self._polling = False
        self._observer: BaseObserver | None = None
        self._dir_id: tuple[int, int] | None = None
        self._supervisor: threading.Thread | None = None
        self._last: bool | None = None
        self._arms = 0

    def required(self) -> bool:
        return os.path.exists(self.path)

    @property
    def mode(self) -> str:
        """How changes are noticed right now: ``inotify``, ``polling`` or ``stat`` (periodic check only)."""
        if self._observer is None:
            return "stat"
        return "polling" if self._polling else "inotify"

    @property
    def arms(self) -> int:
        """How many times a watch has been armed (1 after a clean start, +1 per re-arm)."""
        return self._arms

    # -- lifecycle ----------------------------------------------------------------------------------------

    def start(self) -> None:
        """Arm the watch (best effort) and start the supervisor; a no-op without ``on_change``."""
        if self._on_change is None or self._supervisor is not None:
            return
        self._stopping = False
        self._last = self.required()
        self._arm()
        self._supervisor = threading.Thread(target=self._supervise, name="pykured-sentinel", daemon=True)
        self._supervisor.start()

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        if self._supervisor is not None:
            self._supervisor.join()
            self._supervisor = None
        self._disarm()

    # -- supervisor ---------------------------------------------------------------------------------------

    def _supervise(self) -> None:
        while True:
            self._wake.wait(self._check_interval if self.mode == "inotify" else self._rearm_interval)
            self._wake.clear()
            if self._stopping:
                return
            try:
                self._maintain()
            except Exception:
                logger.exception("reboot sentinel watch maintenance failed for %s", self.path)

    def _maintain(self) -> None:
        if self._observer is not None and (
            self._rearm or not self._observer.is_alive() or self._directory_id() != self._dir_id
        ):
            logger.info("Re-arming the watch on the reboot sentinel directory of %s", self.path)
            self._disarm()
        if self._observer is None:
            self._arm()
        exists = self.required()
        with self._lock:
            changed = exists != self._last
            self._last = exists
        if changed:
            self._notify()

    def _watch_lost(self) -> None:
        """The watched directory was deleted: the emitter has stopped, so re-arm from the supervisor."""
        self._rearm = True
        self._wake.set()
        self._changed()

    def _changed(self) -> None:
        with self._lock:
            self._last = self.required()
        self._notify()

    def _notify(self) -> None:
        if self._on_change is None:
            return
        try:
            self._on_change()
        except Exception:
            logger.exception("reboot sentinel change callback failed")

    # -- the watch ----------------------------------------------------------------------------------------

    def _paths(self) -> tuple[str, str]:
        directory = os.path.realpath(os.path.dirname(os.path.abspath(self.path)))
        return directory, os.path.join(directory, os.path.basename(self.path))

    def _directory_id(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self._paths()[0])
        except OSError:
            return None
        return st.st_dev, st.st_ino

    def _new_observer(self) -> BaseObserver:
        if self._polling:
            return PollingObserver(timeout=self._poll_interval)
        return Observer()

    def _arm(self) -> None:
        directory, target = self._paths()
        dir_id = self._directory_id()
        if dir_id is None:
            logger.debug("reboot sentinel directory %s missing; checking by stat until it appears", directory)
            return
        try:
            observer = self._new_observer()  # watchdog >= 6 opens the inotify instance here already
            observer.schedule(
                _Handler(self, directory=directory, target=target),
                directory,
                recursive=False,
                event_filter=_EVENTS,
            )
            observer.start()
        except (FileNotFoundError, NotADirectoryError):
            return
        except OSError as exc:
            if exc.errno in _LIMIT_ERRNOS and not self._polling:
                logger.warning("inotify unavailable (%s); watching %s by polling", exc, directory)
                self._polling = True
                self._arm()
            else:
                logger.warning("cannot watch %s (%s); checking by stat only", directory, exc)
            return
        self._observer = observer
        self._dir_id = dir_id
        self._rearm = False
        self._arms += 1

    def _disarm(self) -> None:
        observer, self._observer = self._observer, None
        if observer is None:
            return
        observer.stop()
        if observer.is_alive():
            observer.join()


class CommandSentinel:
    """kured's ``--reboot-sentinel-command``: exit 0 in the host mount namespace means "reboot required"."""

    def __init__(self, argv: Sequence[str], *, nsenter: str = host.NSENTER) -> None:
        if not argv:
            raise ConfigError("no reboot sentinel command specified")
        self.argv = list(argv)
        self.nsenter = nsenter
        self.command = host.nsenter_argv(self.argv, nsenter=nsenter)

    def required(self) -> bool:
        host.guard_nsenter(self.nsenter)
        host.guard_command(self.argv)
        try:
            result = subprocess.run(self.command, capture_output=True, text=True, check=False)
        except OSError as exc:
            raise RebootError(f"error invoking sentinel command {self.command}: {exc}") from exc
        if result.returncode == 0:
            return True
        if result.returncode != 1:
            logger.warning(
                "sentinel command ended with unexpected exit code: %d (stdout: %r, stderr: %r)",
                result.returncode,
                result.stdout,
                result.stderr,
            )
        return False

    def start(self) -> None:
        """Commands have no change notification."""

    def stop(self) -> None:
        """Commands have no change notification."""
