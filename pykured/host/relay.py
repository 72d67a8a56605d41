"""The signal relay: ``--reboot-method=signal`` split so that no container both sees the host's files and
holds a privilege.

kured's unprivileged manifest (``kured-ds-signal.yaml``) runs one container as root with only ``CAP_KILL``,
``hostPID``, and the host's ``/var/run`` mounted read-only for the sentinel. A read-only mount does not stop
``connect()`` on a socket: root in that container reaches every socket under ``/var/run``, the container
runtime's among them, and through it a privileged container (root on the node).

With the relay the pod has two containers (``kustomize/overlays/signal``):

* the **agent** runs as an unprivileged user (uid 65532) with no capability at all; it has the host's
  ``/var/run`` for the sentinel, whose root-only sockets (the container runtime's, systemd's) refuse it;
* the **relay** (``kured signal-relay``) runs as root with only ``CAP_KILL`` in the pod's host PID namespace,
  and has nothing of the host mounted; it sends its own ``--reboot-signal`` to PID 1, and nothing else to
  no other process, when the agent asks.

They share one ``emptyDir`` holding a FIFO (:data:`DEFAULT_PATH`). The agent asks by writing
:data:`REQUEST` into it (:func:`ask`); the relay holds it open for reading and writing, so it waits in
``poll`` without a timer, and reads at most :data:`MAX_READ` bytes at a time; anything but one or more
requests is ignored with one log line (its length only: the bytes are the other container's).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import select
import signal
import stat
import threading
from collections.abc import Callable

from pykured.core.errors import RebootError
from pykured.host import guard as host

logger = logging.getLogger(__name__)

DEFAULT_PATH = "/relay/reboot"
"""Where the signal profile mounts the shared ``emptyDir`` (``/relay``) and the FIFO in it."""
REQUEST = b"reboot\n"
"""What the agent writes to ask for the signal (shorter than ``PIPE_BUF``: one atomic write)."""
MAX_READ = 64
"""The most the relay reads at once."""
FIFO_MODE = 0o622
"""Root (the relay) reads; anyone in the pod (the agent's unprivileged user) may only write."""


TARGET_ENV = "PYKURED_SIGNAL_PID"
"""The process standing in for PID 1 in tests (as the agent's own ``PYKURED_SIGNAL_PID``); the guard refuses
PID 1 itself there (:mod:`pykured.host.guard`)."""


def target_pid() -> int:
    """PID 1, or the stand-in :data:`TARGET_ENV` names."""
    return int(os.environ.get(TARGET_ENV, "1"))


def signal_name(signum: int) -> str:
    """Linux signal name as kured's messages spell it: ``SIGRTMIN+5`` for 39, ``SIGTERM`` for 15."""
    if signal.SIGRTMIN <= signum <= signal.SIGRTMAX:
        offset = signum - signal.SIGRTMIN
        return f"SIGRTMIN+{offset}" if offset else "SIGRTMIN"
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def go_errno_text(exc: OSError) -> str:
    """An OS error as Go's ``syscall.Errno.Error()`` prints it (``operation not permitted``)."""
    text = os.strerror(exc.errno) if exc.errno else str(exc)
    return text[:1].lower() + text[1:]


def ask(path: str) -> None:
    """The agent's side: ask the relay listening at ``path`` to send its signal. Raises
    :class:`~pykured.core.errors.RebootError` when ``path`` is no FIFO or no relay holds it open."""
    try:
        if not stat.S_ISFIFO(os.stat(path).st_mode):
            raise RebootError(f"the signal relay's {path} is not a FIFO")
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a FIFO nobody reads
            raise RebootError(f"the signal relay at {path} is not running") from exc
        raise RebootError(f"cannot reach the signal relay at {path}: {go_errno_text(exc)}") from exc
    try:
        os.write(fd, REQUEST)
    except OSError as exc:
        raise RebootError(f"cannot reach the signal relay at {path}: {go_errno_text(exc)}") from exc
    finally:
        os.close(fd)


def prepare(path: str) -> None:
    """Make ``path`` the relay's FIFO (anything else there, left by nobody we know, is replaced). A new FIFO
    is made beside it and renamed into place, so ``path`` never shows without its mode (an agent that looked
    in between would be refused)."""
    try:
        if stat.S_ISFIFO(os.lstat(path).st_mode):
            os.chmod(path, FIFO_MODE)
            return
    except FileNotFoundError:
        pass
    directory, name = os.path.split(path)
    fresh = os.path.join(directory, f".{name}.{os.getpid()}")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(fresh)
    os.mkfifo(fresh, FIFO_MODE)
    os.chmod(fresh, FIFO_MODE)  # whatever the umask
    os.replace(fresh, path)


def is_request(data: bytes) -> bool:
    """One or more whole requests (an agent that asked twice before the relay read)."""
    return bool(data) and data == REQUEST * (len(data) // len(REQUEST))


def serve(
    path: str,
    signum: int,
    *,
    target_pid: int = 1,
    stop: threading.Event | None = None,
    send: Callable[[int, int], None] = os.kill,
) -> None:
    """The relay's side: wait on the FIFO at ``path`` and send ``signum`` to ``target_pid`` for each request,
    until ``stop`` is set (looked at every second; without it, forever and without a timer)."""
    host.guard_signal_target(target_pid)
    prepare(path)
    fd = os.open(path, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)  # also a writer: never EOF, poll waits
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    logger.info("Signal relay: %s sends %s to pid %d when asked", path, signal_name(signum), target_pid)
    try:
        while stop is None or not stop.is_set():
            if not poller.poll(None if stop is None else 1000):
                continue
            try:
                data = os.read(fd, MAX_READ)
            except BlockingIOError:
                continue
            if not is_request(data):
                logger.warning("Signal relay: ignored %d bytes that are not a reboot request", len(data))
                with contextlib.suppress(BlockingIOError):
                    while os.read(fd, MAX_READ):  # the rest of what was written with it
                        pass
                continue
            _send(send, target_pid, signum)
    finally:
        os.close(fd)


def _send(send: Callable[[int, int], None], target_pid: int, signum: int) -> None:
    try:
        host.guard_signal_target(target_pid)
        logger.info(
            "Emit reboot-signal %s to pid %d (asked through the signal relay)",
            signal_name(signum),
            target_pid,
        )
        send(target_pid, signum)
    except RebootError as exc:
        logger.error("Signal relay: %s", exc)
    except OSError as exc:
        logger.error("Signal relay: signal of %s failed: %s", signal_name(signum), go_errno_text(exc))
