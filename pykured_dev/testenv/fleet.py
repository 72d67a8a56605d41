"""Real pykured agents on simulated nodes, with "reboots" that never touch this machine.

Each agent is a separate ``python -m pykured`` process (as the DaemonSet runs one per node), in safe mode,
with its own sentinel directory and a shim ``nsenter`` that runs the command after ``--`` in place. The
reboot methods end in a file or a fake PID 1:

* ``command``: the reboot command is ``touch <dir>/reboot-requested``;
* ``signal``: ``PYKURED_SIGNAL_PID`` points at a ``sleep`` process that stands in for the host's PID 1;
* ``zincati``: the hand-off marker file appears.

A supervisor thread sees the request and reboots the node the way a host does: the agent process dies
(SIGKILL), the sentinel (on tmpfs ``/run``) is gone, the Node goes NotReady and comes back with a new
bootID, and a fresh agent starts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from pykured_dev.testenv.cluster import Cluster
from pykured_dev.testenv.procs import _die_with_parent

SHIM = """#!/bin/sh
# A stand-in for /usr/bin/nsenter: drop nsenter's options up to "--" and run the rest in place.
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do shift; done
[ "$#" -gt 0 ] && shift
exec "$@"
"""


@dataclasses.dataclass
class AgentSlot:
    """One node's agent and its files."""

    node: str
    dir: Path
    proc: subprocess.Popen[bytes] | None = None
    fake_pid1: subprocess.Popen[bytes] | None = None
    reboots: int = 0
    starts: int = 0
    log: Path | None = None
    last_reboot: float = 0.0

    @property
    def sentinel(self) -> Path:
        return self.dir / "run" / "reboot-required"

    @property
    def request(self) -> Path:
        return self.dir / "reboot-requested"

    @property
    def marker(self) -> Path:
        return self.dir / "zincati" / "allowfinalize.json"


class Fleet:
    """Agents for a set of simulated nodes of ``cluster``."""

    def __init__(
        self,
        cluster: Cluster,
        *,
        workdir: Path,
        args: Sequence[str] = (),
        method: str = "command",
        kubeconfig: Callable[[str], str] | None = None,
        env: dict[str, str] | None = None,
        down_seconds: float = 0.3,
        on_reboot: Callable[[str], None] | None = None,
    ) -> None:
        self.cluster = cluster
        self.workdir = workdir
        self.args = list(args)
        self.method = method
        self._kubeconfig = kubeconfig or (lambda _node: cluster.admin_kubeconfig)
        self.env = dict(env or {})
        self.down_seconds = down_seconds
        self.on_reboot = on_reboot
        self.slots: dict[str, AgentSlot] = {}
        self.paused: set[str] = set()
        """Nodes whose reboot requests are ignored (a reboot command that does not reboot)."""
        self.keep_sentinel = False
        """Leave the sentinel in place across the reboot (kured #976: a sentinel command that stays true)."""
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._supervise, name="fleet-supervisor", daemon=True)
        self.shim = workdir / "nsenter-shim"
        workdir.mkdir(parents=True, exist_ok=True)
        self.shim.write_text(SHIM)
        self.shim.chmod(0o755)

    # -- agents --------------------------------------------------------------------------------------------

    def add(self, node: str, *, start: bool = True) -> AgentSlot:
        """Prepare (and start) the agent of ``node``."""
        slot = AgentSlot(node=node, dir=self.workdir / node)
        (slot.dir / "run").mkdir(parents=True, exist_ok=True)
        script = slot.dir / "reboot.sh"
        script.write_text(f"#!/bin/sh\necho requested >> {slot.dir / 'requests.log'}\ntouch {slot.request}\n")
        script.chmod(0o755)
        self.slots[node] = slot
        if start:
            self.start(node)
        return slot

    def argv(self, slot: AgentSlot) -> list[str]:
        """The agent's command line, as a DaemonSet pod's would be (plus the test hooks)."""
        argv = [
            sys.executable,
            "-m",
            "pykured",
            f"--node-id={slot.node}",
            f"--kubeconfig={self._kubeconfig(slot.node)}",
            f"--reboot-sentinel={slot.sentinel}",
            "--metrics-port=0",
            *self.args,
        ]
        if self.method == "command":
            argv.append(f"--reboot-command={slot.dir / 'reboot.sh'}")
        elif self.method == "signal":
            argv.append("--reboot-method=signal")
        elif self.method == "zincati":
            argv += ["--reboot-method=zincati", f"--zincati-marker-file={slot.marker}"]
        return argv

    def start(self, node: str) -> None:
        """Start ``node``'s agent process."""
        slot = self.slots[node]
        env = {**os.environ, "PYKURED_SAFE_MODE": "1", "PYKURED_NSENTER": str(self.shim), **self.env}
        if self.method == "signal":
            slot.fake_pid1 = subprocess.Popen(
                ["sleep", "100000"],
                preexec_fn=_die_with_parent,  # noqa: PLW1509 - exec follows at once
            )
            env["PYKURED_SIGNAL_PID"] = str(slot.fake_pid1.pid)
        slot.log = slot.dir / "agent.log"
        with open(slot.log, "ab") as log:
            slot.proc = subprocess.Popen(
                self.argv(slot),
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent,  # noqa: PLW1509 - exec follows at once
            )
        slot.starts += 1

    def kill(self, node: str) -> None:
        """SIGKILL ``node``'s agent (a crash, or the host going down)."""
        slot = self.slots[node]
        if slot.proc and slot.proc.poll() is None:
            slot.proc.kill()
        if slot.proc:
            slot.proc.wait(timeout=10)

    def restart(self, node: str) -> None:
        """A pod restart: kill and start again (the node does not reboot)."""
        self.kill(node)
        self.start(node)

    def touch(self, node: str) -> None:
        """Create ``node``'s reboot sentinel."""
        self.slots[node].sentinel.touch()

    def requests(self, node: str) -> int:
        """How many times ``node``'s agents ran the reboot command."""
        log = self.slots[node].dir / "requests.log"
        return len(log.read_text().splitlines()) if log.exists() else 0

    def log_text(self, node: str) -> str:
        """Everything ``node``'s agents logged so far."""
        log = self.slots[node].log
        return log.read_text(errors="replace") if log and log.exists() else ""

    # -- the supervisor ------------------------------------------------------------------------------------

    def __enter__(self) -> Fleet:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the supervisor and every agent."""
        self._stop.set()
        if self._thread.ident is not None:  # a reboot in progress finishes first: no agent starts after this
            self._thread.join(timeout=60)
        with self._lock:
            for node in list(self.slots):
                self.kill(node)
                fake = self.slots[node].fake_pid1
                if fake and fake.poll() is None:
                    fake.kill()
                    fake.wait()

    def _requested(self, slot: AgentSlot) -> bool:
        if self.method == "command":
            return slot.request.exists()
        if self.method == "signal":
            return slot.fake_pid1 is not None and slot.fake_pid1.poll() is not None
        try:
            return slot.marker.stat().st_mtime > slot.last_reboot
        except FileNotFoundError:
            return False

    def _supervise(self) -> None:
        while not self._stop.wait(0.05):
            for slot in list(self.slots.values()):
                with contextlib.suppress(Exception):
                    if slot.node not in self.paused and self._requested(slot):
                        self.reboot(slot.node)

    def reboot(self, node: str) -> None:
        """Reboot a simulated host: agent dies, sentinel vanishes, bootID changes, a new agent starts."""
        slot = self.slots[node]
        with self._lock:
            self.kill(node)
            slot.last_reboot = time.time()
            for path in (slot.request, *(() if self.keep_sentinel else (slot.sentinel,))):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
            self.cluster.reboot_node(node, down_seconds=self.down_seconds)
            slot.reboots += 1
            if self.on_reboot:
                self.on_reboot(node)
            if not self._stop.is_set():
                self.start(node)

    def wait_for(self, predicate: Callable[[], bool], *, timeout: float, interval: float = 0.1) -> bool:
        """Poll ``predicate`` until true or ``timeout``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(interval)
        return predicate()
