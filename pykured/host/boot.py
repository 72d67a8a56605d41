"""When this machine booted: the kernel's ``btime`` (``/proc/stat``), which a container shares with its host.

A Node condition asks for a reboot only if it appeared after the node's current boot
(:mod:`pykured.conditions.record`), so the agent needs the boot's time. The kernel keeps it, in seconds since
the epoch, in ``/proc/stat``'s ``btime`` line: the same in every container of the machine (the pid namespace
does not change it), and on the same clock as the node agents that write the conditions (they run on the
node too). Read once per agent process: a reboot starts a new process.

For the simulated nodes of the tests and the demo (``pykured_dev``), whose "reboots" leave this machine's
kernel alone, ``PYKURED_BOOT_TIME`` (RFC 3339) names the simulated boot instead, honoured in safe mode only
(:mod:`pykured.host.guard`): an agent on a real host always reads its kernel.

Total: ``None`` when the time cannot be read (no ``/proc``, a garbled line): then no condition is a need.
"""

from __future__ import annotations

import datetime
import logging
import os
from collections.abc import Mapping

from pykured.core.times import parse_rfc3339
from pykured.host.guard import safe_mode

logger = logging.getLogger(__name__)

BOOT_TIME_ENV = "PYKURED_BOOT_TIME"
PROC_STAT = "/proc/stat"
MAX_READ = 1 << 20


def parse_btime(text: str) -> datetime.datetime | None:
    """The ``btime`` line of ``/proc/stat``'s text as a time (``None``: none, or garbled). Pure."""
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == "btime":
            value = value.strip()
            if not value.isdigit() or len(value) > 12:
                return None
            return datetime.datetime.fromtimestamp(int(value), datetime.UTC)
    return None


def boot_time(*, environ: Mapping[str, str] = os.environ, path: str = PROC_STAT) -> datetime.datetime | None:
    """This machine's boot (the simulated one in safe mode, when ``PYKURED_BOOT_TIME`` names one)."""
    if safe_mode() and BOOT_TIME_ENV in environ:
        return parse_rfc3339(environ[BOOT_TIME_ENV])
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            found = parse_btime(handle.read(MAX_READ))
    except OSError as exc:
        logger.warning("Cannot read the boot time (%s): %s; no node condition asks for a reboot", path, exc)
        return None
    if found is None:
        logger.warning("No boot time in %s; no node condition asks for a reboot", path)
    return found
