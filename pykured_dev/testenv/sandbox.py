"""A simulated pod on a simulated host: one process in its own mount, PID and network namespaces.

The real kured knows only the in-cluster configuration and reaches "the host" through
``/usr/bin/nsenter -m/proc/1/ns/mnt -- <command>``. To run it (and pykured, the same way) beside simulated
nodes without ever touching this machine, each agent gets what a pod of kured's DaemonSet gets, built with
``unshare --mount --pid --net --fork --kill-child`` (root only):

* a private root: a tmpfs whose top-level directories are recursive bind mounts of this machine's (so the
  agent's binaries and libraries are where they are), a fresh ``/proc`` of its own PID namespace, a private
  tmpfs ``/run`` (so ``/var/run``) holding ``/run/secrets/kubernetes.io/serviceaccount`` (a real token and
  the CA), and an overlay on ``/usr/bin`` that adds the image's files (``/usr/bin/kured``) and replaces
  ``/usr/bin/nsenter`` by a recording shim;
* hostPath volumes as bind mounts of the simulated host's directories (never this machine's);
* its own network namespace with only ``lo``, where the API server's port (and any other port the test
  names) is forwarded to this machine's loopback by :class:`Forwarder`, so ``KUBERNETES_SERVICE_HOST`` is
  ``127.0.0.1`` and every agent may listen on the same metrics port, as pods do.

The agent is PID 1 of its PID namespace, so ``nsenter -m/proc/1/ns/mnt`` can only ever enter the sandbox's
own mount namespace; and the shim never runs the command anyway: it appends its argument vector to
``nsenter.log`` and touches ``reboot-requested`` in the sandbox's control directory, which the fleet's
supervisor turns into a simulated reboot. Killing the ``unshare`` process (SIGKILL) ends the whole PID
namespace; every mount lives only in the sandbox's mount namespace and disappears with it.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import http.client
import os
import shlex
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from pykured_dev.testenv.procs import TestEnvError, _die_with_parent

T = TypeVar("T")

CLONE_NEWNET = 0x40000000
SERVICE_ACCOUNT_DIR = "/run/secrets/kubernetes.io/serviceaccount"
"""Where the kubelet mounts the token (``/var/run`` is a link to ``/run``)."""
START_TIMEOUT = 20.0

NSENTER_SHIM = """#!/bin/sh
# The sandbox's /usr/bin/nsenter: record the call, ask the simulated host to reboot, run nothing.
printf '%s\\n' "$*" >> {log}
touch {request}
"""

SETUP = r"""
set -eu
ctl=$1; shift
mount -t tmpfs -o mode=0755 sandbox-run /run
r=/run/.root
mkdir "$r"
mount -t tmpfs -o mode=0755 sandbox-root "$r"
for d in /*; do
  n=${d#/}
  case $n in proc|run|'*') continue ;; esac
  if [ -L "$d" ]; then cp -P "$d" "$r/$n"
  elif [ -d "$d" ]; then mkdir "$r/$n"; mount --rbind "$d" "$r/$n"
  fi
done
mkdir "$r/proc" "$r/run"
mount -t proc proc "$r/proc"
mount -t tmpfs -o mode=0755 sandbox-pod-run "$r/run"
mkdir -p "$r/run/secrets/kubernetes.io/serviceaccount"
cp "$ctl"/sa/* "$r/run/secrets/kubernetes.io/serviceaccount/"
mkdir /run/.usr-bin /run/.usr-bin-work
mount -t overlay sandbox-usr-bin -o lowerdir=/usr/bin,upperdir=/run/.usr-bin,workdir=/run/.usr-bin-work \
  "$r/usr/bin"
while read -r target source; do
  rm -f "$r$target"
  ln -s "$source" "$r$target"
done < "$ctl/files"
while read -r mode source target; do
  top=${target#/}; top=/${top%%/*}
  if [ ! -e "$r$target" ] && [ "$top" != /run ] && [ -e "$top" ]; then
    echo "sandbox: $target would have to be created on this machine" >&2; exit 1
  fi
  mkdir -p "$r$target"
  mount --bind "$source" "$r$target"
  [ "$mode" = rw ] || mount -o remount,bind,ro "$r$target"
done < "$ctl/mounts"
ip link set lo up
touch "$ctl/netns-ready"
while [ ! -e "$ctl/go" ]; do sleep 0.02; done
exec chroot "$r" "$@"
"""

_libc = ctypes.CDLL("libc.so.6", use_errno=True)


def in_netns(pid: int, fn: Callable[[], T]) -> T:
    """Run ``fn`` in a new thread that joined the network namespace of ``pid`` (its sockets stay there)."""
    result: list[T] = []
    failure: list[BaseException] = []

    def enter() -> None:
        try:
            fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
            try:
                if _libc.setns(fd, CLONE_NEWNET) != 0:
                    errno = ctypes.get_errno()
                    raise OSError(
                        errno, f"setns into the network namespace of pid {pid}: {os.strerror(errno)}"
                    )
            finally:
                os.close(fd)
            result.append(fn())
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=enter, name=f"netns-{pid}", daemon=True)
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return result[0]


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


class Forwarder:
    """Listens on 127.0.0.1:``port`` inside a sandbox's network namespace for each port, and connects each
    accepted connection to the same port on this machine's loopback."""

    def __init__(self, pid: int, ports: Sequence[int]) -> None:
        self._closed = False
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()

        def listen() -> list[socket.socket]:
            made = []
            for port in ports:
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind(("127.0.0.1", port))
                sock.listen(64)
                made.append(sock)
            return made

        self._listeners = in_netns(pid, listen)
        for sock, port in zip(self._listeners, ports, strict=True):
            threading.Thread(target=self._accept, args=(sock, port), name=f"fwd-{port}", daemon=True).start()

    def _accept(self, listener: socket.socket, port: int) -> None:
        while not self._closed:
            try:
                inner, _ = listener.accept()
            except OSError:
                return
            try:
                outer = socket.create_connection(("127.0.0.1", port), timeout=10)
                outer.settimeout(None)
            except OSError:
                inner.close()
                continue
            with self._lock:
                self._conns += [inner, outer]
            for a, b in ((inner, outer), (outer, inner)):
                threading.Thread(target=_pump, args=(a, b), name=f"fwd-{port}-pump", daemon=True).start()

    def close(self) -> None:
        """Stop listening and drop every forwarded connection."""
        self._closed = True
        with self._lock:
            socks, self._conns = [*self._listeners, *self._conns], []
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


@dataclasses.dataclass
class SandboxSpec:
    """What one sandboxed process gets."""

    argv: list[str]
    env: dict[str, str]
    service_account: Mapping[str, bytes]
    """Files of ``/run/secrets/kubernetes.io/serviceaccount`` (``token``, ``ca.crt``, ``namespace``)."""
    files: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """``/usr/bin/NAME`` inside → path on this machine (a symbolic link in the ``/usr/bin`` overlay)."""
    mounts: Sequence[tuple[str, str, bool]] = ()
    """(directory on this machine, path inside, read-only) bind mounts."""
    forward: Sequence[int] = ()
    """Ports of this machine's loopback reachable at the same 127.0.0.1 port inside."""
    nsenter_shim: str | None = "/usr/bin/nsenter"
    """Where the recording nsenter shim goes: over ``/usr/bin/nsenter`` for kured (its rebooter calls that
    path), beside it for pykured (whose safe mode refuses anything at a system nsenter's path and takes the
    shim from ``PYKURED_NSENTER``)."""


class Sandbox:
    """One running sandbox (see the module docstring); ``ctl`` is its control directory on this machine."""

    def __init__(self, spec: SandboxSpec, *, ctl: Path, log: Path) -> None:
        if os.geteuid() != 0:
            raise TestEnvError("sandboxed agents need root (unshare of mount, PID and network namespaces)")
        self.spec = spec
        self.ctl = ctl
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None
        self.inner_pid = 0
        self.forwarder: Forwarder | None = None

    @property
    def request(self) -> Path:
        """Touched by the nsenter shim: the agent asked its host to reboot."""
        return self.ctl / "reboot-requested"

    @property
    def nsenter_log(self) -> Path:
        """One line per nsenter call: its arguments, space-separated."""
        return self.ctl / "nsenter.log"

    def _prepare(self) -> None:
        self.ctl.mkdir(parents=True, exist_ok=True)
        for stale in ("netns-ready", "go"):
            with contextlib.suppress(FileNotFoundError):
                (self.ctl / stale).unlink()
        sa = self.ctl / "sa"
        sa.mkdir(exist_ok=True)
        for name, data in self.spec.service_account.items():
            (sa / name).write_bytes(data)
        files = dict(self.spec.files)
        if self.spec.nsenter_shim:
            shim = self.ctl / "nsenter-shim"
            shim.write_text(
                NSENTER_SHIM.format(
                    log=shlex.quote(str(self.nsenter_log)), request=shlex.quote(str(self.request))
                )
            )
            shim.chmod(0o755)
            files[self.spec.nsenter_shim] = str(shim)
        for target, source in files.items():
            if not target.startswith("/usr/bin/") or "/" in target[len("/usr/bin/") :]:
                raise TestEnvError(f"sandbox files go to /usr/bin only, not {target}")
            if any(c.isspace() for c in source):
                raise TestEnvError(f"sandbox file source with white space: {source}")
        (self.ctl / "files").write_text("".join(f"{t} {s}\n" for t, s in files.items()))
        lines = []
        for source, target, read_only in self.spec.mounts:
            if any(c.isspace() for c in source + target) or not target.startswith("/"):
                raise TestEnvError(f"bad sandbox mount {source} -> {target}")
            lines.append(f"{'ro' if read_only else 'rw'} {source} {target}\n")
        (self.ctl / "mounts").write_text("".join(lines))
        (self.ctl / "setup.sh").write_text(SETUP)

    def start(self) -> Sandbox:
        """Build the namespaces, forward the ports, then exec the agent; returns once it runs."""
        self._prepare()
        env = dict(self.spec.env)
        env.setdefault("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [
                    "unshare",
                    "--mount",
                    "--pid",
                    "--net",
                    "--fork",
                    "--kill-child",
                    "sh",
                    str(self.ctl / "setup.sh"),
                    str(self.ctl),
                    *self.spec.argv,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                preexec_fn=_die_with_parent,  # noqa: PLW1509 - exec follows at once
            )
        deadline = time.monotonic() + START_TIMEOUT
        ready = self.ctl / "netns-ready"
        while not ready.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                tail = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
                raise TestEnvError(f"sandbox did not come up:\n{tail}")
            time.sleep(0.01)
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()
        self.inner_pid = int(children[0])
        if self.spec.forward:
            self.forwarder = Forwarder(self.inner_pid, self.spec.forward)
        (self.ctl / "go").touch()
        return self

    def alive(self) -> bool:
        """Whether the sandbox (its ``unshare`` process) still runs."""
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the sandbox: its PID namespace, mounts and network namespace go with it."""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)
        if self.forwarder is not None:
            self.forwarder.close()
            self.forwarder = None

    def agent_pids(self) -> list[int]:
        """PIDs (in this machine's PID namespace) of the processes inside the sandbox."""
        if not self.inner_pid:
            return []
        found, todo = [], [self.inner_pid]
        while todo:
            pid = todo.pop()
            found.append(pid)
            with contextlib.suppress(OSError):
                for task in os.listdir(f"/proc/{pid}/task"):
                    todo += [int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
        return found

    def http_get(self, port: int, path: str, *, timeout: float = 5.0) -> tuple[int, bytes]:
        """GET ``http://127.0.0.1:port/path`` inside the sandbox's network namespace (a kubelet probe)."""
        if not self.inner_pid:
            raise TestEnvError("sandbox not started")
        sock = in_netns(self.inner_pid, lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))
        try:
            sock.settimeout(timeout)
            sock.connect(("127.0.0.1", port))
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
            conn.sock = sock
            conn.request("GET", path)
            answer = conn.getresponse()
            return answer.status, answer.read()
        finally:
            sock.close()
