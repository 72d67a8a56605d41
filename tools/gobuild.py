"""The one cached build of a Go program: built into the cache once per key, answered from it afterwards.

Every Go program the tests and the release use (tools/gotools.py says which and how) goes through
:func:`cached`: the program lands in ``<cache>/bin/<stem>-<key>/`` (the key: a short hash of what it is built
from, its version, the Go version, its go.sum), is linked from ``<cache>/bin/current/``, and is built only
when that directory does not hold it yet. A build happens in a scratch directory beside it and is moved into
place in one step, so a concurrent build of the same key keeps the first one's result. Go's own output (module
downloads, compiler messages) goes to a log file under ``<cache>/logs/``, whose tail is shown when a build
fails; one line on stderr says what is built, and one what it took. A module download cut by the network is
tried again (Go keeps what it has).

The cache is ``$PYKURED_TESTENV_CACHE``, by default ``~/.cache/pykured-testenv`` (XDG_CACHE_HOME). Needs
Python 3.11 and the standard library only.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

HERE = Path(__file__).resolve().parent
CACHE = Path(
    os.environ.get("PYKURED_TESTENV_CACHE")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pykured-testenv"
)
BIN = CACHE / "bin"
CURRENT = BIN / "current"
LOGS = CACHE / "logs"
NETWORK = re.compile(r"TLS handshake timeout|i/o timeout|connection reset|unexpected EOF|dial tcp")
"""What Go prints when a module download was cut by the network (the build is tried again)."""
TRIES = 3


class BuildError(Exception):
    """A build failed; the message says which and where its log is."""


@dataclass(frozen=True)
class Usage:
    """What a ``go`` run took: its wall time and the peak resident memory of its processes."""

    wall: float
    rss_mib: int


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def versions() -> dict[str, str]:
    """tools/versions.env: the version of every program built from a Go module, by name."""
    found = {}
    for line in (HERE / "versions.env").read_text().splitlines():
        name, sep, value = line.partition("=")
        if sep and not line.startswith("#"):
            found[name.strip()] = value.strip()
    return found


def go_environment(goflags: str) -> None:
    """The environment of every go run from here on: static binaries, this machine's Go only, ``goflags``."""
    os.environ.update(CGO_ENABLED="0", GOTOOLCHAIN="local", GOFLAGS=goflags)


@cache
def go_version() -> str:
    """The Go that builds (``go env GOVERSION``): part of every key."""
    return subprocess.run(
        ["go", "env", "GOVERSION"], capture_output=True, text=True, check=True
    ).stdout.strip()


def hash16(*parts: bytes) -> str:
    """The key of what the parts are: the first 16 hex digits of their SHA-256."""
    return hashlib.sha256(b"".join(parts)).hexdigest()[:16]


def read(*paths: Path) -> bytes:
    """Files' bytes, one after the other (what ``cat`` gives)."""
    return b"".join(path.read_bytes() for path in paths)


@contextlib.contextmanager
def locked(name: str, *, busy: str | None = None) -> Iterator[None]:
    """Builds that share ``<cache>/<name>`` run one at a time; ``busy`` is said when this one waits."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / name).open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if busy:
                say(busy)
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def link(directory: Path, binary: str) -> None:
    """``<cache>/bin/current/<binary>`` points at ``directory``'s."""
    CURRENT.mkdir(parents=True, exist_ok=True)
    fresh = CURRENT / f".{binary}.{os.getpid()}"
    fresh.unlink(missing_ok=True)
    fresh.symlink_to(directory / binary)
    fresh.replace(CURRENT / binary)


def go(
    args: Sequence[str], *, cwd: Path, log: Path, what: str, tool: str, env: Mapping[str, str] | None = None
) -> Usage:
    """``go ARGS`` in ``cwd``, its output appended to ``log``; tried again when the network cut a module
    download. What it took, or :class:`BuildError`."""
    for attempt in range(1, TRIES + 1):
        offset = log.stat().st_size if log.exists() else 0
        start = time.monotonic()
        with log.open("ab") as handle:
            child = subprocess.Popen(
                ["go", *args],
                cwd=cwd,
                stdout=handle,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})},
            )
            _, status, usage = os.wait4(child.pid, 0)
            child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode == 0:
            return Usage(wall=time.monotonic() - start, rss_mib=usage.ru_maxrss // 1024)
        with log.open("rb") as handle:
            handle.seek(offset)
            if not NETWORK.search(handle.read().decode(errors="replace")):
                break
        if attempt < TRIES:
            say(f"{tool}: {what}: a module download failed (network); trying again")
    raise BuildError(f"go {args[0]} failed")


def go_output(args: Sequence[str], *, cwd: Path, log: Path) -> str:
    """``go ARGS``'s standard output (its standard error appended to ``log``)."""
    with log.open("ab") as handle:
        done = subprocess.run(["go", *args], cwd=cwd, stdout=subprocess.PIPE, stderr=handle, check=False)
    if done.returncode != 0:
        raise BuildError(f"go {args[0]} failed")
    return done.stdout.decode()


def module_source(module: str, version: str, *, cwd: Path, log: Path, what: str) -> Path:
    """The source directory of ``module@version`` in Go's module cache (downloaded if it is not there)."""
    info = json.loads(go_output(["mod", "download", "-json", f"{module}@{version}"], cwd=cwd, log=log))
    source = Path(info.get("Dir", ""))
    if not source.is_dir():
        raise BuildError(f"cannot download {what} {version}'s module")
    return source


Build = Callable[[Path, Path], Usage | None]
"""A build: it puts the binaries into the scratch directory it is given (the first argument), with Go's
output in the log (the second); what its main ``go`` run took, when it measured one."""


def cached(
    *, tool: str, stem: str, key: str, binaries: Sequence[str], what: str, build: Build, estimate: str = ""
) -> Path:
    """The directory ``<cache>/bin/<stem>-<key>`` holding ``binaries``, built first when it does not; each
    binary linked from ``<cache>/bin/current``. ``what`` names it in the lines on stderr, ``estimate`` says
    how long a cold build takes."""
    directory = BIN / f"{stem}-{key}"
    if all(os.access(directory / binary, os.X_OK) for binary in binaries):
        for binary in binaries:
            link(directory, binary)
        say(f"{tool}: {what} cached ({directory})")
        return directory
    scratch = Path(f"{directory}.tmp.{os.getpid()}")
    log = LOGS / f"{stem}.log"
    LOGS.mkdir(parents=True, exist_ok=True)
    log.write_bytes(b"")
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    say(
        f"{tool}: building {what} from source ({estimate or 'a few minutes'} the first time;"
        f" Go's output: {log}) ..."
    )
    start = time.monotonic()
    try:
        usage = build(scratch, log)
    except (BuildError, subprocess.CalledProcessError, OSError) as error:
        shutil.rmtree(scratch, ignore_errors=True)
        tail = log.read_text(errors="replace").splitlines()[-25:]
        raise BuildError(
            f"FAILED to build {what} after {time.monotonic() - start:.0f} s ({error}); the end of {log}:\n"
            + "\n".join(tail)
        ) from error
    try:
        scratch.rename(directory)
    except OSError:  # a concurrent build won: keep theirs
        shutil.rmtree(scratch, ignore_errors=True)
    for binary in binaries:
        link(directory, binary)
    took = f" (wall {usage.wall:.2f} s, peak RSS {usage.rss_mib} MiB)" if usage else ""
    say(f"{tool}: built {what} in {time.monotonic() - start:.0f} s{took}")
    return directory
