"""Child processes of the test control plane: binaries, free ports, and processes that die with us.

Every child runs in its own process group with ``PR_SET_PDEATHSIG=SIGKILL``, so a killed pytest or demo never
leaves etcd or kube-apiserver behind; ``stop()`` sends SIGTERM to the group, then SIGKILL.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

_PR_SET_PDEATHSIG = 1
CORE = ("etcd", "kube-apiserver")
"""What every cluster runs (and all the demo needs)."""
COMPONENTS = (*CORE, "kube-controller-manager", "kubectl")
"""Everything the tests use: kube-controller-manager for PodDisruptionBudgets, kubectl for kustomize."""


class TestEnvError(RuntimeError):
    """The control plane could not be built or started."""

    __test__ = False


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def cache_dir() -> Path:
    """Where ``tools/testenv-build`` puts the binaries."""
    base = os.environ.get("PYKURED_TESTENV_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "pykured-testenv"
    )
    return Path(base)


def run_build(tool: str, names: Sequence[str], *, missing: str, timeout: float | None = None) -> str:
    """Run the repository's ``tools/<tool> NAMES`` (``testenv-build``, ``kured-build``); its standard output.

    ``missing`` says what was missing, for the error when the repository's tools are not there.
    """
    script = Path(__file__).resolve().parents[2] / "tools" / tool
    if not script.exists():
        raise TestEnvError(f"{missing} and no {script}")
    result = subprocess.run(
        [str(script), *names], capture_output=True, text=True, timeout=timeout, check=False
    )
    if result.returncode != 0:
        raise TestEnvError(f"tools/{tool} failed:\n{result.stderr[-4000:]}")
    return result.stdout


def find_binaries(names: Sequence[str] = COMPONENTS) -> Path:
    """The directory holding the control-plane binaries, building them first when they are missing."""
    override = os.environ.get("PYKURED_TESTENV_BIN")
    bindir = Path(override) if override else cache_dir() / "bin" / "current"
    missing = [n for n in names if not (bindir / n).exists()]
    if missing and not override:
        run_build("testenv-build", missing, missing=f"control-plane binaries missing ({', '.join(missing)})")
        missing = [n for n in names if not (bindir / n).exists()]
    if missing:
        raise TestEnvError(f"control-plane binaries missing in {bindir}: {', '.join(missing)}")
    return bindir


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Proc:
    """One child process with its log file."""

    def __init__(
        self, name: str, argv: Sequence[str], *, log_dir: Path, env: dict[str, str] | None = None
    ) -> None:
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - lives as long as the process
        self.popen = subprocess.Popen(
            list(argv),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 - no threads run in the child before exec
            env=env,
        )

    def alive(self) -> bool:
        """Whether the process still runs."""
        return self.popen.poll() is None

    def tail(self, lines: int = 40) -> str:
        """The last lines of the log."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM the process group, then SIGKILL after ``timeout``."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while self.alive() and time.monotonic() < deadline:
                time.sleep(0.05)
            if self.alive():
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.popen.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=5)
        self._log.close()
