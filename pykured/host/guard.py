"""Reaching the host from the pod, and the safety guard that keeps tests and demos off the real host.

kured runs host commands as ``/usr/bin/nsenter -m/proc/1/ns/mnt -- <argv>`` (``pkg/util``, used by the
sentinel command checker and the command rebooter) and signals PID 1 for the signal rebooter. Those are the
three ways pykured can touch the machine it runs on, and all three pass through this module.

**Safe mode** is on when ``PYKURED_SAFE_MODE`` is set to anything but ``""``/``0``/``false``/``no``, or when
pytest is imported. In safe mode:

* an nsenter that is a real binary (any ELF file, or the same file as a system ``nsenter``) is refused; only a
  shim *script* that runs the command after ``--`` in the current namespaces is allowed;
* commands that would reboot, power off or signal the machine (``systemctl``, ``reboot``, ``shutdown``,
  ``kill``, ``nsenter``, writes to ``/proc/sysrq-trigger``, …) are refused even through a shim;
* signals to PID 1, to this process or its parent, or to a process named ``systemd``/``init`` are refused.

Outside safe mode only the always-wrong case is refused: signalling a pid ≤ 0 (``kill(-1, …)`` as root would
signal every process). Every refusal raises :class:`~pykured.core.errors.RebootError`.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import sys
from collections.abc import Collection, Mapping, Sequence

from pykured.core.errors import RebootError

logger = logging.getLogger(__name__)

NSENTER = "/usr/bin/nsenter"
"""kured's hard-coded nsenter path."""

MOUNT_NAMESPACE_FLAG = "-m/proc/1/ns/mnt"
"""kured enters PID 1's mount namespace only (hostPID makes PID 1 the host's init)."""

SAFE_MODE_ENV = "PYKURED_SAFE_MODE"

_SYSTEM_NSENTERS = (
    "/usr/bin/nsenter",
    "/bin/nsenter",
    "/usr/sbin/nsenter",
    "/sbin/nsenter",
    "/usr/local/bin/nsenter",
    "/usr/local/sbin/nsenter",
)
_FALSE_VALUES = frozenset({"", "0", "false", "no", "off"})
_DANGEROUS_PROGRAMS = frozenset(
    {
        "systemctl",
        "reboot",
        "shutdown",
        "halt",
        "poweroff",
        "telinit",
        "init",
        "systemd",
        "kill",
        "pkill",
        "killall",
        "nsenter",
        "loginctl",
        "busctl",
        "dbus-send",
        "rpm-ostree",
        "kexec",
    }
)
_DANGEROUS_WORD = re.compile(
    r"(?:^|[\s;&|()`])(?:\S*/)?(" + "|".join(sorted(_DANGEROUS_PROGRAMS)) + r")(?=$|[\s;&|()`])"
)


def is_safe_mode(*, environ: Mapping[str, str], modules: Collection[str]) -> bool:
    """Pure decision: safe mode from an environment and the names of imported modules."""
    if "pytest" in modules:
        return True
    return environ.get(SAFE_MODE_ENV, "").strip().lower() not in _FALSE_VALUES


def safe_mode() -> bool:
    """Whether this process must not touch the real host (see the module docstring)."""
    return is_safe_mode(environ=os.environ, modules=sys.modules)


def nsenter_argv(argv: Sequence[str], *, nsenter: str = NSENTER) -> list[str]:
    """kured's wrapping: ``[nsenter, "-m/proc/1/ns/mnt", "--", *argv]``."""
    return [nsenter, MOUNT_NAMESPACE_FLAG, "--", *argv]


def _is_elf(path: str) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(4) == b"\x7fELF"
    except OSError:
        return False


def _same_file(path: str, other: str) -> bool:
    try:
        return os.path.samefile(path, other)
    except OSError:
        return False


def guard_nsenter(nsenter: str) -> None:
    """In safe mode, refuse an nsenter that would really enter PID 1's namespaces."""
    if not safe_mode():
        return
    resolved = nsenter if os.sep in nsenter else shutil.which(nsenter)
    if resolved is None or not os.path.exists(resolved):
        return  # nothing to run: starting it fails, which is harmless
    found = shutil.which("nsenter")
    system = [*_SYSTEM_NSENTERS, *([found] if found else [])]
    if _is_elf(resolved) or any(_same_file(resolved, candidate) for candidate in system):
        raise RebootError(
            f"safe mode ({SAFE_MODE_ENV} or pytest): refusing to run the real nsenter {nsenter!r}; "
            "use a shim script that runs the command after '--'"
        )


def guard_command(argv: Sequence[str]) -> None:
    """In safe mode, refuse commands that would reboot, power off or signal the machine, even via a shim."""
    if not safe_mode() or not argv:
        return
    program = os.path.basename(argv[0])
    dangerous = program in _DANGEROUS_PROGRAMS or any(
        "sysrq-trigger" in arg or _DANGEROUS_WORD.search(arg) for arg in argv[1:]
    )
    if dangerous:
        raise RebootError(
            f"safe mode ({SAFE_MODE_ENV} or pytest): refusing to run {list(argv)!r}, which could reboot "
            "or signal this machine"
        )


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def guard_signal_target(pid: int) -> None:
    """Refuse pid ≤ 0 always; in safe mode also PID 1, this process, its parent and anything named init."""
    if pid <= 0:
        raise RebootError(f"refusing to signal pid {pid}: it would signal a process group or every process")
    if not safe_mode():
        return
    if pid in (1, os.getpid(), os.getppid()) or _comm(pid) in ("systemd", "init"):
        raise RebootError(
            f"safe mode ({SAFE_MODE_ENV} or pytest): refusing to signal pid {pid}; "
            "configure a fake target process"
        )
