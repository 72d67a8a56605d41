"""Triggering the reboot: a host command, a signal to PID 1, or a hand-off to Zincati.

Mirrors kured's ``pkg/reboot``:

* :class:`CommandRebooter` runs ``/usr/bin/nsenter -m/proc/1/ns/mnt -- <argv>`` (default argv
  ``/bin/systemctl reboot``) as a child process and waits; a non-zero exit or a failure to start raises
  :class:`~pykured.core.errors.RebootError` with stdout and stderr in the message. An empty command is
  refused at
  construction (``no reboot command specified``).
* :class:`SignalRebooter` sends ``--reboot-signal`` (default 39 = SIGRTMIN+5, systemd's "start reboot.target")
  to PID 1; the error reads ``signal of SIGRTMIN+5 failed: <errno text>``. With ``--reboot-signal-relay`` it
  asks the pod's signal relay to instead (:mod:`pykured.host.relay`).
* :class:`ZincatiHandoff` (pykured only) never reboots: it writes Zincati's ``marker_file`` strategy
  marker (``allowfinalize.json``, docs/zincati.md); Zincati then finalizes and reboots.

Every path that can touch the machine goes through the guards in :mod:`pykured.host.guard`: under pytest or
with
``PYKURED_SAFE_MODE=1`` the real nsenter, reboot-like commands and signals to PID 1 are refused.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from pykured.core.errors import ConfigError, RebootError
from pykured.host import guard as host
from pykured.host import relay as signal_relay
from pykured.host.relay import go_errno_text, signal_name

logger = logging.getLogger(__name__)

DEFAULT_SIGNAL = 39
"""SIGRTMIN+5 on Linux: systemd starts ``reboot.target``."""

ZINCATI_MARKER_FILE = "/var/lib/zincati/admin/strategy/marker_file/allowfinalize.json"
"""The marker path of Zincati's unmerged ``marker_file`` strategy (PRs #540/#1103)."""


class Rebooter(Protocol):
    """Something that makes the node reboot (or hands the reboot to someone who will)."""

    @property
    def hands_off(self) -> bool:
        """``True`` when :meth:`reboot` only allows someone else (Zincati) to reboot: a hand-off."""
        ...

    def reboot(self) -> None:
        """Trigger the reboot (or allow it); raises :class:`~pykured.core.errors.RebootError` on failure."""

    def withdraw(self) -> None:
        """The node is back: take back what a hand-off allowed (nothing to do for a real reboot)."""


class CommandRebooter:
    """Run the reboot command in the host's mount namespace (kured's default ``--reboot-method=command``)."""

    def __init__(self, argv: Sequence[str], *, nsenter: str = host.NSENTER) -> None:
        if not argv:
            raise ConfigError("no reboot command specified")
        self.argv = list(argv)
        self.nsenter = nsenter
        self.command = host.nsenter_argv(self.argv, nsenter=nsenter)

    def _guard(self) -> None:
        host.guard_nsenter(self.nsenter)
        host.guard_command(self.argv)

    hands_off = False

    def reboot(self) -> None:
        self._guard()
        logger.info("Running command: %s", self.command)
        try:
            result = subprocess.run(self.command, capture_output=True, text=True, check=False)
        except OSError as exc:
            raise RebootError(f"error invoking reboot command {self.command}: {exc}") from exc
        if result.returncode != 0:
            raise RebootError(
                f"error invoking reboot command {self.command}: exit status {result.returncode} "
                f"(stdout: {result.stdout!r}, stderr: {result.stderr!r})"
            )

    def withdraw(self) -> None:
        """Nothing to take back after a real reboot."""


class SignalRebooter:
    """Signal the host's init (kured's ``--reboot-method=signal``; needs ``hostPID`` and CAP_KILL), or, with
    ``relay`` (``--reboot-signal-relay``), ask the signal relay of the pod to (:mod:`pykured.host.relay`: then
    the agent needs neither root nor a capability)."""

    def __init__(self, signal: int = DEFAULT_SIGNAL, *, target_pid: int = 1, relay: str = "") -> None:
        self.signal = signal
        self.target_pid = target_pid
        self.relay = relay

    hands_off = False

    def reboot(self) -> None:
        if self.relay:
            logger.info(
                "Emit reboot-signal %s to pid 1 through the signal relay at %s",
                signal_name(self.signal),
                self.relay,
            )
            signal_relay.ask(self.relay)
            return
        host.guard_signal_target(self.target_pid)
        logger.info("Emit reboot-signal %s to pid %d", signal_name(self.signal), self.target_pid)
        try:
            os.kill(self.target_pid, self.signal)
        except OSError as exc:
            raise RebootError(f"signal of {signal_name(self.signal)} failed: {go_errno_text(exc)}") from exc

    def withdraw(self) -> None:
        """Nothing to take back after a real reboot."""


def default_marker_content(*, now: float, allow_duration_s: float) -> str:
    """Zincati marker JSON: ``{"allowUntil": <unix seconds, int>}``, rounded down so it never over-allows."""
    return json.dumps({"allowUntil": math.floor(now + allow_duration_s)}, separators=(",", ":")) + "\n"


def _makedirs(directory: str) -> None:
    """Create missing parents with mode 0755 regardless of the umask (Zincati runs as user zincati)."""
    missing: list[str] = []
    current = directory
    while current and not os.path.isdir(current):
        missing.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    for path in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o755)
            os.chmod(path, 0o755)  # noqa: S103 - Zincati (user zincati) must traverse it


def write_atomically(path: str, content: str, *, mode: int = 0o644) -> None:
    """Write ``content`` to ``path`` via a temp file and ``rename`` in the same directory."""
    directory = os.path.dirname(os.path.abspath(path))
    _makedirs(directory)
    fd, temp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(content)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class ZincatiHandoff:
    """Never reboots: writes Zincati's "you may finalize" marker and lets Zincati reboot into the update.

    ``content=""`` writes ``{"allowUntil": now + allow_duration_s}``; any other content is written verbatim.
    The file is root-owned 0644 (Zincati's strategy rejects world-writable markers). :meth:`remove` deletes it
    once the node is back, so the next update is not finalized without coordination.
    """

    def __init__(
        self,
        marker_file: str = ZINCATI_MARKER_FILE,
        *,
        allow_duration_s: float,
        content: str = "",
        now_fn: Callable[[], float] = time.time,
    ) -> None:
        if allow_duration_s <= 0 and not content:
            raise ConfigError(f"zincati hand-off: allow duration must be positive, got {allow_duration_s}")
        self.marker_file = marker_file
        self.allow_duration_s = allow_duration_s
        self.content = content
        self._now = now_fn

    hands_off = True

    def reboot(self) -> None:
        text = self.content or default_marker_content(now=self._now(), allow_duration_s=self.allow_duration_s)
        try:
            write_atomically(self.marker_file, text)
        except OSError as exc:
            raise RebootError(f"cannot write Zincati marker {self.marker_file}: {exc}") from exc
        logger.info("Wrote Zincati finalization marker %s; Zincati will reboot the node", self.marker_file)

    def present(self) -> bool:
        return os.path.exists(self.marker_file)

    def withdraw(self) -> None:
        """Remove the marker: the next update must not be finalized without coordination."""
        self.remove()

    def remove(self) -> None:
        try:
            os.unlink(self.marker_file)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise RebootError(f"cannot remove Zincati marker {self.marker_file}: {exc}") from exc
        logger.info("Removed Zincati finalization marker %s", self.marker_file)
