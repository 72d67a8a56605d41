"""The image tools' store and how they run programs: buildah and podman on a private store under the cache.

The store (overlay, in ``$PYKURED_IMAGE_CACHE``, by default ``~/.cache/pykured-image``) and the container
tools' settings (runc, cgroupfs, no network unless a run asks for it) are written by :func:`configure` and
named in the environment of every buildah and podman run; :func:`run` and :func:`output` run a program as
the shell did (``$(...)``: its output without trailing newlines); :class:`Step` is the one line on stderr
per step, with its time; the names every part shares (the image's repository, its platforms, the bases'
tags) are here.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(
    os.environ.get("PYKURED_IMAGE_CACHE")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pykured-image"
)
BASE_NAME = "docker.io/library/python:3.11-slim-bookworm"
FINAL_NAME = "gcr.io/distroless/python3-debian12:latest"
IMAGE_REPO = "localhost/pykured"
PLATFORMS = ("linux/amd64", "linux/arm64")
"""The image index's platforms. Everything done per platform iterates over this one list: the builds, the
index, the smoke test (``platforms`` prints it; ``ref PLATFORM`` one platform's image, ``ref`` the index)."""


class ImageBuildError(Exception):
    """A step failed; the message says which and why (printed as ``image-build: FAIL: ...``)."""


def fail(message: str) -> NoReturn:
    raise ImageBuildError(message)


# ---- running programs ----------------------------------------------------------------------------------
def run(
    *args: str | Path,
    check: bool = True,
    capture: bool = False,
    merge: bool = False,
    quiet: bool = False,
    stdin: bytes | None = None,
    cwd: Path = ROOT,
) -> subprocess.CompletedProcess[bytes]:
    """Run a program in the checkout. ``capture``: its standard output is returned (``merge``: with its
    standard error); ``quiet``: what it prints is dropped. ``check``: a non-zero exit is an error."""
    out: int | None = subprocess.PIPE if capture or merge else (subprocess.DEVNULL if quiet else None)
    err: int | None = subprocess.STDOUT if merge else (subprocess.DEVNULL if quiet else None)
    done = subprocess.run([str(a) for a in args], input=stdin, stdout=out, stderr=err, cwd=cwd, check=False)
    if check and done.returncode != 0:
        raise subprocess.CalledProcessError(done.returncode, done.args, done.stdout)
    return done


def output(*args: str | Path, check: bool = True, merge: bool = False, quiet: bool = False) -> str:
    """A program's standard output as text, without its trailing newlines (as the shell's ``$(...)``);
    ``quiet``: its standard error is dropped."""
    return run(*args, check=check, capture=True, merge=merge, quiet=quiet).stdout.decode().rstrip("\n")


def podman(*args: str | Path, check: bool = True, quiet: bool = False) -> subprocess.CompletedProcess[bytes]:
    return run("podman", *args, check=check, quiet=quiet)


def podman_ok(*args: str | Path) -> bool:
    """podman's answer to a yes-or-no question (``image exists``, ``manifest exists``)."""
    return run("podman", *args, check=False, quiet=True).returncode == 0


def label_of(image: str, label: str) -> str:
    """An image's label ("" when the image or the label is missing)."""
    return output(
        "podman",
        "image",
        "inspect",
        "--format",
        f'{{{{ index .Labels "{label}" }}}}',
        image,
        check=False,
        quiet=True,
    )


def image_size(image: str) -> str:
    size = output("podman", "image", "inspect", "--format", "{{.Size}}", image)
    return f"{int(size) / 1e6:.0f} MB"


# ---- steps ---------------------------------------------------------------------------------------------
class Step:
    """One line on stderr when a step is done: its name, its time and what it found."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.start = time.monotonic()

    def done(self, note: str = "") -> None:
        elapsed = time.monotonic() - self.start
        print(
            f"image-build: {self.name:<28} {elapsed:6.1f} s{f'  ({note})' if note else ''}", file=sys.stderr
        )


# ---- the container tools' settings: private storage, runc, cgroupfs, no network by default --------------
CONTAINERS_CONF = """[containers]
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]
netns = "none"
log_driver = "k8s-file"

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
"""
"""crun fails here ("cgroups in hybrid mode not supported"); podman's default ulimits cannot be set
(setrlimit: Operation not permitted); a default network of "none" means no run ever adds firewall rules to
the host unless it asks for host networking."""

REGISTRIES_CONF = 'unqualified-search-registries = ["docker.io"]\nshort-name-mode = "permissive"\n'


def configure() -> None:
    """The private store and settings, written when they differ, and named in the environment of every
    buildah and podman run from here on."""
    for sub in ("conf", "storage", "run", "tmp"):
        (CACHE / sub).mkdir(parents=True, exist_ok=True)
    storage = f'[storage]\ndriver = "overlay"\ngraphroot = "{CACHE}/storage"\nrunroot = "{CACHE}/run"\n'
    for name, text in (
        ("storage", storage),
        ("containers", CONTAINERS_CONF),
        ("registries", REGISTRIES_CONF),
    ):
        path = CACHE / "conf" / f"{name}.conf"
        if not path.exists() or path.read_text() != text:
            fresh = path.with_name(f"{name}.conf.{os.getpid()}")
            fresh.write_text(text)
            fresh.replace(path)
    os.environ["CONTAINERS_STORAGE_CONF"] = str(CACHE / "conf/storage.conf")
    os.environ["CONTAINERS_CONF"] = str(CACHE / "conf/containers.conf")
    os.environ["CONTAINERS_REGISTRIES_CONF"] = str(CACHE / "conf/registries.conf")
    os.environ["BUILDAH_ISOLATION"] = "chroot"
    os.environ["TMPDIR"] = str(CACHE / "tmp")


def install_tools() -> None:
    need = [
        pkg for cmd, pkg in (("buildah", "buildah"), ("podman", "podman"), ("runc", "runc")) if not which(cmd)
    ]
    if not (Path("/usr/sbin/debootstrap").exists() or Path("/usr/bin/debootstrap").exists()):
        need.append("debootstrap")
    if not need:
        return
    print(f"image-build: installing Debian packages: {' '.join(need)}", file=sys.stderr)
    # Wait for another apt on this machine rather than fail.
    run("apt-get", "-o", "DPkg::Lock::Timeout=600", "update", "-qq")
    os.environ["DEBIAN_FRONTEND"] = "noninteractive"
    run(
        "apt-get",
        "-o",
        "DPkg::Lock::Timeout=600",
        "install",
        "-y",
        "-qq",
        "--no-install-recommends",
        *need,
        capture=True,
    )


def which(command: str) -> bool:
    return any(
        os.access(Path(d) / command, os.X_OK) for d in os.environ.get("PATH", "").split(os.pathsep) if d
    )


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """One holder at a time of a lock file (flock), waited for."""
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def build_platform() -> str:
    return "linux/" + output("dpkg", "--print-architecture")


def arch_of(platform: str) -> str:
    """linux/arm64 -> arm64 (Debian's and OCI's names agree for both)."""
    return platform.removeprefix("linux/")


def machine_of(arch: str) -> str:
    """A Debian architecture's machine name (uname -m, the emulator's and wheels' name)."""
    machines = {"amd64": "x86_64", "arm64": "aarch64"}
    if arch not in machines:
        fail(f"no machine name known for {arch}")
    return machines[arch]


def hash16(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def container(*args: str) -> list[str]:
    """podman run as kured's chart runs the image: read-only root, no network, no tmpfs."""
    return ["podman", "run", "--rm", "--read-only", "--read-only-tmpfs=false", "--network", "none", *args]
