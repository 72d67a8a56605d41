#!/usr/bin/env python3
"""tools/image-build [ACTION]: pykured's container image, built and run without a Docker engine.

buildah and podman, chroot isolation, overlay storage in a private root under the cache. One line per step,
with its time, on stderr.

  build (default)   install buildah/podman/runc/debootstrap if missing; make the bases if they are not there;
                    build the Dockerfile unchanged for each of the platforms (linux/amd64, linux/arm64; no
                    emulation) and make one image index of them, tagged localhost/pykured:<version from
                    pyproject.toml>. Cached: nothing is rebuilt when the build context, Dockerfile, lock and
                    bases are unchanged. Also tagged localhost/pykured:ctx-<hash of the build context>, so
                    that checkouts sharing the image store each run their own build; each platform's image
                    is localhost/pykured:<arch>-ctx-<hash>.
  version           print the version the image is tagged with (pyproject.toml's).
  ref [PLATFORM]    print that index's tag for this checkout, or PLATFORM's image in it (fails when not
                    built).
  platforms         print the index's platforms, one a line.
  smoke             run the built image the way kured's chart does (read-only root, no network) and check
                    --help, --dump-config with the chart's default arguments, nsenter, time zones, its user,
                    bytecode, and that nothing is written at run time; then the same checks on the arm64
                    image under qemu-aarch64-static named explicitly (never registered in binfmt_misc);
                    tools/image_smoke.py.
  emulator ARCH     print the path of the user-mode emulator for ARCH (arm64), unpacked from Debian's
                    qemu-user-static package under the cache.
  sbom              write a CycloneDX 1.6 JSON SBOM of each platform's built image from its own files (its
                    Debian packages' dpkg records, its Python packages' dist-info) to
                    build/sbom/pykured-<version>-<os>-<arch>.cdx.json (pykured_dev.sbom, in the virtualenv).
  lock              regenerate image/requirements.txt and image/build-requirements.txt (hashed, uv pip
                    compile) from pyproject.toml.
  podman ARGS...    podman on the same image store and settings (what tests and smoke use).
  base              make (or pull) the bases only.
  size              the image's size, its layers, and what its largest dependencies take.

Two bases: the builder stage's python:3.11-slim-bookworm and the final stage's distroless
gcr.io/distroless/python3-debian12. Where no registry can be reached (the default: nothing here contacts a
registry), stand-ins are made from Debian's archive alone and tagged with the bases' names, so the
Dockerfile builds unchanged with --pull=never. Their recipes are shell (debootstrap, chroot, dpkg-deb) in
tools/image-standin.sh; each stand-in is cached, keyed by its recipe's text, the mirror and the python3.11
version. The final base's arm64 stand-in (gcr.io/distroless/python3-debian12:latest-arm64) is made from
Debian's arm64 packages without running them; the builder has none, as it always runs on the build platform.
PYKURED_IMAGE_PULL=1 pulls the real bases instead: the Dockerfile's defaults of its BUILDER and BASE build
arguments, pinned by digest, or PYKURED_IMAGE_BUILDER and PYKURED_IMAGE_BASE; what is pulled is passed to
those arguments.

Needs Python 3.11 and the standard library only (the SBOM runs pykured_dev.sbom in the virtualenv).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import NoReturn

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(
    os.environ.get("PYKURED_IMAGE_CACHE")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pykured-image"
)
STANDIN_RECIPES = ROOT / "tools" / "image-standin.sh"
BASE_NAME = "docker.io/library/python:3.11-slim-bookworm"
FINAL_NAME = "gcr.io/distroless/python3-debian12:latest"
IMAGE_REPO = "localhost/pykured"
UV_VERSION = "0.13.8"
STANDIN_LABEL = "dev.pykured.standin-key"
CONTEXT_LABEL = "dev.pykured.context"
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


# ---- what the image is made from -----------------------------------------------------------------------
def read_version() -> str:
    match = re.search(r'^version = "(.*)"$', (ROOT / "pyproject.toml").read_text(), re.MULTILINE)
    return match.group(1) if match else ""


def dockerfile_arg(name: str) -> str:
    """A build argument's default in the Dockerfile."""
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        if line.startswith(f"ARG {name}="):
            return line[len(f"ARG {name}=") :]
    return ""


def pulling() -> bool:
    return os.environ.get("PYKURED_IMAGE_PULL", "0") == "1"


def base_refs() -> tuple[str, str]:
    """The builder's and the final stage's base: with PYKURED_IMAGE_PULL=1 the real ones, by default the
    Dockerfile's digest pins; otherwise the stand-ins, tagged with the bases' names."""
    if pulling():
        builder = os.environ.get("PYKURED_IMAGE_BUILDER") or dockerfile_arg("BUILDER")
        final = os.environ.get("PYKURED_IMAGE_BASE") or dockerfile_arg("BASE")
    else:
        builder = os.environ.get("PYKURED_IMAGE_BUILDER") or "python:3.11-slim-bookworm"
        final = os.environ.get("PYKURED_IMAGE_BASE") or FINAL_NAME
    return builder, final


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


def platform_final_base(platform: str) -> str:
    """The final base the Dockerfile's BASE gets for a platform: the build platform's as before; another
    platform's by distroless's per-architecture tag (PYKURED_IMAGE_BASE_ARM64 pins it, e.g. by digest). The
    builder stage always runs on the build platform, so it has no other platform's base."""
    if platform == build_platform():
        return base_refs()[1]
    return os.environ.get("PYKURED_IMAGE_BASE_ARM64") or f"{FINAL_NAME}-{arch_of(platform)}"


def platform_image(platform: str, key: str) -> str:
    """One platform's image in the index: localhost/pykured:<architecture>-ctx-<context hash>. (Not
    ctx-<hash>-...: an older image build in another checkout sharing the store keeps only the four newest
    ctx-* tags.)"""
    return f"{IMAGE_REPO}:{arch_of(platform)}-ctx-{key}"


# ---- the bases' stand-ins ------------------------------------------------------------------------------
def mirror() -> str:
    """The Debian mirror apt uses on this machine (deb822 or one-line sources)."""
    for path in sorted(Path("/etc/apt/sources.list.d").glob("*.sources")):
        for line in path.read_text(errors="replace").splitlines():
            if match := re.fullmatch(r"URIs:[ \t]*(\S*debian)/*", line):
                return match.group(1)
    one_line = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*.list"))]
    for path in one_line:
        if path.is_file():
            for line in path.read_text(errors="replace").splitlines():
                if match := re.match(r"deb[ \t]+(\[[^]]*\][ \t]+)?(\S*)[ \t]+bookworm[ \t]", line):
                    return match.group(2)
    return "http://deb.debian.org/debian"


def recipe_shell(*script: str) -> list[str]:
    """bash with the stand-ins' recipes defined, running ``script`` (its arguments follow as $1, ...)."""
    return ["bash", "-c", f'set -euo pipefail; . "{STANDIN_RECIPES}"; {" ".join(script)}', "image-standin"]


def recipe_text(function: str) -> bytes:
    """A recipe as bash prints it (declare -f): part of its stand-in's cache key."""
    return run(*recipe_shell(f"declare -f {function}"), capture=True).stdout


def distroless_packages() -> str:
    return run(*recipe_shell('echo "$distroless_packages"'), capture=True).stdout.decode().rstrip("\n")


def candidate(package: str) -> bytes:
    """apt's candidate version of a package, a line (nothing when apt does not know it)."""
    done = run("apt-cache", "policy", package, check=False, capture=True, quiet=True)
    lines = done.stdout.decode().splitlines()
    return b"".join(
        f"{m.group(1)}\n".encode() for line in lines if (m := re.match(r" *Candidate: (.*)", line))
    )


def debootstrap_version() -> bytes:
    return run(
        "dpkg-query", "-W", "-f=${Version}", "debootstrap", check=False, capture=True, quiet=True
    ).stdout


def hash16(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def base_key(function: str) -> str:
    """The cache key of a build-platform stand-in's recipe."""
    parts = [recipe_text(function)]
    if function != "make_standin":
        parts.append(f"{distroless_packages()}\n".encode())
    parts += [f"{mirror()}\n".encode(), run("dpkg", "--print-architecture", capture=True).stdout]
    parts += [candidate("python3.11"), debootstrap_version()]
    return hash16(b"".join(parts))


def foreign_base_key(arch: str) -> str:
    """The cache key of another architecture's final base stand-in (it copies files of the build
    platform's, so that one's key is part of it)."""
    parts = [recipe_text("make_foreign_distroless_standin"), f"{distroless_packages()} {arch}\n".encode()]
    parts += [f"{mirror()}\n".encode(), candidate("python3.11"), debootstrap_version()]
    labels = (
        "podman",
        "image",
        "inspect",
        "--format",
        f'{{{{ index .Labels "{STANDIN_LABEL}" }}}}',
        FINAL_NAME,
    )
    parts.append(run(*labels, check=False, capture=True, quiet=True).stdout)
    return hash16(b"".join(parts))


def run_recipe(function: str, *args: str | Path) -> None:
    env = dict(os.environ, cache=str(CACHE))
    done = subprocess.run(
        [*recipe_shell(f'{function} "$@"'), *map(str, args)], cwd=ROOT, env=env, check=False
    )
    if done.returncode != 0:
        fail(f"{function} failed")


def import_rootfs(rootfs: Path, name: str, changes: Sequence[str], *, arch: str | None = None) -> None:
    """A directory tree becomes the image ``name`` (tar, podman import) with the Dockerfile-like changes."""
    tar = subprocess.Popen(
        ["tar", "-C", str(rootfs), "--numeric-owner", "--xattrs", "-c", "."], stdout=subprocess.PIPE
    )
    platform = ["--os", "linux", "--arch", arch] if arch else []
    flags = [f for change in changes for f in ("--change", change)]
    done = subprocess.run(
        ["podman", "import", "-q", *platform, *flags, "-", name],
        stdin=tar.stdout,
        stdout=subprocess.DEVNULL,
        check=False,
    )
    if tar.stdout is not None:
        tar.stdout.close()
    if tar.wait() != 0 or done.returncode != 0:
        fail(f"podman import of {name} failed")


@contextlib.contextmanager
def workdir(name: str) -> Iterator[Path]:
    """A scratch directory under the cache, removed however the step ends."""
    work = CACHE / f"{name}.{os.getpid()}"
    run("rm", "-rf", work)
    work.mkdir(parents=True)
    try:
        yield work
    finally:
        run("rm", "-rf", work)


def real_base_present(name: str, have: str) -> bool:
    return podman_ok("image", "exists", name) and not have


def ensure_base() -> None:
    if pulling():
        for ref in base_refs():
            step = Step(f"pull {ref}")
            run("podman", "pull", "-q", ref, capture=True)
            step.done(f"real base, {output('podman', 'image', 'inspect', '--format', '{{.Digest}}', ref)}")
        return
    ensure_builder_standin()
    ensure_distroless_standin()


def ensure_builder_standin() -> None:
    key = base_key("make_standin")
    have = label_of(BASE_NAME, STANDIN_LABEL)
    if real_base_present(BASE_NAME, have):
        Step("builder base").done(f"the real {BASE_NAME} is present")
        return
    if have == key:
        Step("builder base stand-in").done(f"cached, key {key}")
        return
    step = Step("builder base stand-in (debootstrap)")
    with workdir("standin") as work:
        source = mirror()
        run_recipe("make_standin", work / "rootfs", source)
        python = output(
            "chroot",
            work / "rootfs",
            "/usr/bin/python3.11",
            "-c",
            "import platform; print(platform.python_version())",
        )
        import_rootfs(
            work / "rootfs",
            BASE_NAME,
            [
                "ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin",
                "ENV LANG=C.UTF-8",
                f"ENV PYTHON_VERSION={python}",
                'CMD ["python3"]',
                f"LABEL {STANDIN_LABEL}={key}",
                f"LABEL dev.pykured.standin=debootstrap minbase bookworm from {source}, Debian python3.11, "
                "/usr/local a virtualenv",
            ],
        )
    step.done(f"key {key}, {image_size(BASE_NAME)}")


DISTROLESS_CHANGES = (
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
    'ENTRYPOINT ["/usr/bin/python3.11"]',
)


def ensure_distroless_standin() -> None:
    key = base_key("make_distroless_standin")
    have = label_of(FINAL_NAME, STANDIN_LABEL)
    if real_base_present(FINAL_NAME, have):
        Step("final base").done(f"the real {FINAL_NAME} is present")
        return
    if have == key:
        Step("distroless stand-in").done(f"cached, key {key}")
        return
    step = Step("distroless stand-in (debootstrap)")
    with workdir("distroless") as work:
        (work / "image").mkdir()
        source = mirror()
        run_recipe("make_distroless_standin", work / "rootfs", source, work / "image")
        import_rootfs(
            work / "image",
            FINAL_NAME,
            [
                *DISTROLESS_CHANGES,
                f"LABEL {STANDIN_LABEL}={key}",
                f"LABEL dev.pykured.standin=the Debian bookworm packages of distroless python3-debian12 "
                f"from {source}",
            ],
        )
    step.done(f"key {key}, {image_size(FINAL_NAME)}")


def ensure_foreign_bases() -> None:
    """The final bases of the platforms other than the build platform: pulled (PYKURED_IMAGE_PULL=1) or
    stand-ins."""
    for platform in PLATFORMS:
        if platform != build_platform():
            ensure_foreign_base(platform)


def ensure_foreign_base(platform: str) -> None:
    arch = arch_of(platform)
    name = platform_final_base(platform)
    if pulling():
        step = Step(f"pull {name}")
        run("podman", "pull", "-q", "--platform", platform, name, capture=True)
        step.done(f"real base, {output('podman', 'image', 'inspect', '--format', '{{.Digest}}', name)}")
        return
    key = foreign_base_key(arch)
    have = label_of(name, STANDIN_LABEL)
    if real_base_present(name, have):
        Step(f"final base {arch}").done(f"the real {name} is present")
        return
    if have == key:
        Step(f"distroless stand-in {arch}").done(f"cached, key {key}")
        return
    step = Step(f"distroless stand-in {arch} (debootstrap --download-only, dpkg-deb)")
    with workdir(f"distroless-{arch}") as work:
        (work / "image").mkdir()
        source = mirror()
        run_recipe(
            "make_foreign_distroless_standin", arch, work / "rootfs", source, work / "image", FINAL_NAME
        )
        import_rootfs(
            work / "image",
            name,
            [
                *DISTROLESS_CHANGES,
                f"LABEL {STANDIN_LABEL}={key}",
                f"LABEL dev.pykured.standin=the Debian bookworm {arch} packages of distroless"
                f" python3-debian12 from {source}",
            ],
            arch=arch,
        )
    step.done(f"key {key}, {image_size(name)}")


# ---- the image -----------------------------------------------------------------------------------------
def image_ids(*images: str) -> bytes:
    """podman's image IDs of ``images``, a line each, as it prints them (nothing for a missing one)."""
    return run(
        "podman", "image", "inspect", "--format", "{{.Id}}", *images, check=False, capture=True, quiet=True
    ).stdout


def foreign_bases_ids() -> bytes:
    """What the platforms' builds read beyond the context: each other platform's final base (by image ID)."""
    parts = []
    for platform in PLATFORMS:
        if platform != build_platform():
            base = platform_final_base(platform)
            parts += [f"{platform} {base}\n".encode(), image_ids(base)]
    return b"".join(parts)


def context_files() -> list[str]:
    """The files of the context .dockerignore admits that the key reads: pyproject.toml, README.md and
    pykured's files (no byte code), sorted by their bytes."""
    found = [name for name in ("pyproject.toml", "README.md") if (ROOT / name).is_file()]
    for top, dirs, files in os.walk(ROOT / "pykured"):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            path = Path(top) / name
            if (
                name != "__pycache__"
                and not name.endswith(".pyc")
                and path.is_file()
                and not path.is_symlink()
            ):
                found.append(str(path.relative_to(ROOT)))
    return sorted(found, key=os.fsencode)


def context_key() -> str:
    """What the build reads: the Dockerfile, .dockerignore, the locks and the context .dockerignore admits,
    the bases (by image ID) and the platforms."""
    fixed = (
        "Dockerfile",
        ".dockerignore",
        "image/requirements.txt",
        "image/build-requirements.txt",
        "image/nsenter.py",
    )
    parts = [(ROOT / name).read_bytes() for name in fixed]
    for name in context_files():
        parts.append(f"{hashlib.sha256((ROOT / name).read_bytes()).hexdigest()}  {name}\n".encode())
    builder, final = base_refs()
    parts += [f"{builder} {final}\n".encode(), image_ids(builder, final)]
    parts += [f"{' '.join(PLATFORMS)}\n".encode(), foreign_bases_ids()]
    return hash16(b"".join(parts))


def index_complete(key: str) -> bool:
    """The index exists and each platform's image it lists is still in the store."""
    if not podman_ok("manifest", "exists", f"{IMAGE_REPO}:ctx-{key}"):
        return False
    return all(podman_ok("image", "exists", platform_image(p, key)) for p in PLATFORMS)


def build_platform_image(platform: str, key: str, version: str) -> None:
    """The Dockerfile built for one platform (no emulation: the builder stage runs on the build platform, the
    final stage runs nothing)."""
    tag = platform_image(platform, key)
    arch = arch_of(platform)
    step = Step(f"build {platform}")
    # pip inside the build trusts what this machine trusts: its CA bundle, mounted read-only during the RUN
    # steps (nothing of it lands in the image) over pip's own (certifi's, in python:3.11-slim) and over the
    # system bundle (which Debian's pip, in the stand-in, reads).
    certifi = "/usr/local/lib/python3.11/site-packages/pip/_vendor/certifi/cacert.pem"
    bundle = "/etc/ssl/certs/ca-certificates.crt"
    log = CACHE / f"build-{arch}.log"
    # buildah 1.28 sets no BUILDPLATFORM of its own (docker buildx does): without it, FROM
    # --platform=$BUILDPLATFORM would look the builder's base up for the target platform.
    with log.open("wb") as handle:
        done = subprocess.run(
            [
                "buildah",
                "build",
                "--isolation",
                "chroot",
                "--pull=never",
                "--layers",
                "--platform",
                platform,
                "--build-arg",
                f"BUILDPLATFORM={build_platform()}",
                "--build-arg",
                f"BUILDER={base_refs()[0]}",
                "--build-arg",
                f"BASE={platform_final_base(platform)}",
                "--build-arg",
                f"VERSION={version}",
                "--label",
                f"{CONTEXT_LABEL}={key}",
                "-v",
                f"{bundle}:{certifi}:ro",
                "-v",
                f"{bundle}:{bundle}:ro",
                "-t",
                tag,
                "-f",
                "Dockerfile",
                ".",
            ],
            cwd=ROOT,
            stdout=handle,
            stderr=subprocess.STDOUT,
            check=False,
        )
    if done.returncode != 0:
        sys.stderr.write("".join(log.read_text(errors="replace").splitlines(keepends=True)[-30:]))
        fail(f"build for {platform} failed (log: {log})")
    got = output("podman", "image", "inspect", "--format", "{{.Os}}/{{.Architecture}}", tag)
    if got != platform:
        fail(f"the {platform} build is {got}")
    step.done(image_size(tag))


def make_index(key: str, image: str) -> None:
    """The image index localhost/pykured:ctx-KEY of every platform's image (podman run and pull pick the
    instance of their platform), also tagged localhost/pykured:<version>."""
    index = f"{IMAGE_REPO}:ctx-{key}"
    step = Step(f"index {image}")
    if not podman_ok("manifest", "rm", index):
        podman_ok("rmi", index)
    run("podman", "manifest", "create", index, capture=True)
    for platform in PLATFORMS:
        run(
            "podman",
            "manifest",
            "add",
            index,
            f"containers-storage:{platform_image(platform, key)}",
            capture=True,
        )
    podman("tag", index, image)
    step.done(" ".join(PLATFORMS))


def prune_contexts() -> None:
    """Keep the four newest contexts (each an index and its platforms' images), untag the rest."""
    listed = output("podman", "images", "--format", "{{.CreatedAt}}|{{.Tag}}", IMAGE_REPO).splitlines()
    newest = sorted(
        (line for line in listed if re.search(r"\|([a-z0-9]+-)?ctx-", line)), key=os.fsencode, reverse=True
    )
    keys = [re.sub(r"^.*ctx-([0-9a-f]*)$", r"\1", line) for line in newest]
    keep = list(dict.fromkeys(keys))[:4]
    tags = output("podman", "images", "--format", "{{.Repository}}:{{.Tag}}", IMAGE_REPO).splitlines()
    for tag in tags:
        stale = re.search(r":([a-z0-9]+-)?ctx-", tag) and tag.rsplit("ctx-", 1)[1] not in keep
        if stale and not podman_ok("manifest", "rm", tag):
            podman_ok("rmi", tag)


def build() -> None:
    configure()
    # One build at a time on this image store (a concurrent prune could remove another build's layers).
    with locked(CACHE / "build.lock"):
        step = Step("tools")
        install_tools()
        buildah = " ".join(output("buildah", "--version").split(" ")[:3])
        step.done(f"{buildah}, {output('podman', '--version').split(' ')[2]}")
        ensure_base()
        ensure_foreign_bases()
        key = context_key()
        version = read_version()
        image = f"{IMAGE_REPO}:{version}"
        if index_complete(key):
            if label_of(image, CONTEXT_LABEL) != key:
                podman("tag", f"{IMAGE_REPO}:ctx-{key}", image)
            Step(f"image {image}").done(f"cached, context {key}, {' '.join(PLATFORMS)}")
            return
        for platform in PLATFORMS:
            if not podman_ok("image", "exists", platform_image(platform, key)):
                build_platform_image(platform, key, version)
        make_index(key, image)
        # Keep the four newest contexts (an index and its platforms' images), and drop untagged layers older
        # than a day: recent ones are the layer cache (the dependency layer survives as long as a recent
        # build sits on it).
        prune_contexts()
        run("podman", "image", "prune", "--force", "--filter", "until=24h", check=False, quiet=True)


def ref(platform: str | None = None) -> str:
    """This checkout's index, or one platform's image in it."""
    key = context_key()
    if not index_complete(key):
        fail("the image of this checkout is not built (tools/image-build)")
    if platform is None:
        return f"{IMAGE_REPO}:ctx-{key}"
    if platform not in PLATFORMS:
        fail(f"{platform} is not one of the image's platforms: {' '.join(PLATFORMS)}")
    return platform_image(platform, key)


def container(*args: str) -> list[str]:
    """podman run as kured's chart runs the image: read-only root, no network, no tmpfs."""
    return ["podman", "run", "--rm", "--read-only", "--read-only-tmpfs=false", "--network", "none", *args]


SIZE_REPORT = """
import os
def du(path):
    total = 0
    for top, dirs, files in os.walk(path):
        total += sum(os.lstat(os.path.join(top, f)).st_size for f in files)
    return total if os.path.isdir(path) else os.lstat(path).st_size
for root in ("/usr/local/lib/python3.11/dist-packages", "/usr/lib"):
    print(root)
    sizes = sorted(((du(os.path.join(root, n)), n) for n in os.listdir(root)), reverse=True)
    for size, name in sizes[:10]:
        print(f"{size / 1e6:8.1f} MB  {name}")"""


def size() -> None:
    configure()
    image = f"{IMAGE_REPO}:{read_version()}"
    print(f"image {image}: {image_size(image)}")
    for line in output("podman", "history", "--format", "{{.Size}}\t{{.CreatedBy}}", image).splitlines():
        print(line[:150])
    sys.stdout.flush()
    run(*container("--entrypoint", "/usr/bin/python3.11", image, "-c", SIZE_REPORT))


# ---- the SBOM: one CycloneDX document per platform image -------------------------------------------------
def sbom() -> None:
    configure()
    venv = Path(os.environ.get("PYKURED_VENV") or ROOT / ".venv")
    if not os.access(venv / "bin/python", os.X_OK):
        fail(f"no virtualenv at {venv} (tools/dev setup makes it)")
    version = read_version()
    (ROOT / "build/sbom").mkdir(parents=True, exist_ok=True)
    for platform in PLATFORMS:
        step = Step(f"sbom {platform}")
        image = ref(platform)
        os_name, arch = platform.split("/", 1)
        out = f"build/sbom/pykured-{version}-{os_name}-{arch}.cdx.json"
        image_id = output("podman", "image", "inspect", "--format", "{{.Id}}", image)
        digest = output("podman", "image", "inspect", "--format", "{{.Digest}}", image)
        # The image's files, read where the store keeps them (nothing in the image runs).
        mount = output("podman", "image", "mount", image)
        try:
            written = run(
                venv / "bin/python",
                "-m",
                "pykured_dev.sbom",
                "--rootfs",
                mount,
                "--image",
                IMAGE_REPO,
                "--tag",
                version,
                "--image-id",
                f"sha256:{image_id.removeprefix('sha256:')}",
                "--digest",
                digest,
                "--platform",
                platform,
                "--output",
                out,
                check=False,
                capture=True,
            )
        finally:
            run("podman", "image", "unmount", image, capture=True)
        if written.returncode != 0:
            fail(f"sbom of {image} failed")
        components = len(json.loads((ROOT / out).read_text())["components"])
        step.done(f"{out}, {components} components")


def lock() -> None:
    venv = CACHE / f"uv-{UV_VERSION}"
    uv = venv / "bin/uv"
    if not os.access(uv, os.X_OK):
        run("python3", "-m", "venv", venv)
        run(venv / "bin/pip", "install", "-q", f"uv=={UV_VERSION}")
    (ROOT / "image").mkdir(exist_ok=True)
    # --universal: one lock for every platform the base image has; hashes of every wheel and sdist. Left
    # out: aiohttp and what only it needs (the Kubernetes client's asyncio twin, kubernetes.aio, which
    # pykured never loads; the image's smoke test loads the kubeconfig loader without them).
    only_aiohttp = (
        "aiohttp",
        "aiohttp-retry",
        "aiohappyeyeballs",
        "aiosignal",
        "attrs",
        "frozenlist",
        "multidict",
        "propcache",
        "yarl",
    )
    no_emit = [f for pkg in only_aiohttp for f in ("--no-emit-package", pkg)]
    compile_ = (
        "pip",
        "compile",
        "--quiet",
        "--universal",
        "--python-version",
        "3.11",
        "--generate-hashes",
        "--custom-compile-command",
        "tools/image-build lock",
    )
    run(uv, *compile_, *no_emit, "pyproject.toml", "-o", "image/requirements.txt")
    run(uv, *compile_, "-", "-o", "image/build-requirements.txt", stdin=b"setuptools>=68\n")
    print("image-build: wrote image/requirements.txt and image/build-requirements.txt", file=sys.stderr)


# ---- the command line ----------------------------------------------------------------------------------
def usage() -> NoReturn:
    print(__doc__, file=sys.stderr, end="")
    sys.exit(2)


def action_ref(args: list[str]) -> None:
    configure()
    print(ref(*args[:1]))


def action_emulator(args: list[str]) -> None:
    if not args:
        usage()
    import image_smoke

    configure()
    print(image_smoke.qemu_for(args[0]))


def action_smoke(args: list[str]) -> None:
    import image_smoke

    configure()
    image_smoke.smoke()


def action_base(args: list[str]) -> None:
    configure()
    install_tools()
    ensure_base()
    ensure_foreign_bases()


def action_podman(args: list[str]) -> NoReturn:
    """podman on the image store and settings of the build (the process becomes podman)."""
    configure()
    sys.stdout.flush()
    os.execvp("podman", ["podman", *args])  # noqa: S606 - podman and its arguments, no shell


ACTIONS: dict[str, Callable[[list[str]], None]] = {
    "build": lambda args: build(),
    "ref": action_ref,
    "platforms": lambda args: print("\n".join(PLATFORMS)),
    "emulator": action_emulator,
    "smoke": action_smoke,
    "sbom": lambda args: sbom(),
    "version": lambda args: print(read_version()),
    "size": lambda args: size(),
    "lock": lambda args: lock(),
    "base": action_base,
    "podman": action_podman,
}
"""The actions of ``tools/image-build ACTION [ARGS]`` (the module's docstring says what each does)."""


def main(argv: Sequence[str]) -> int:
    action, args = (argv[0], list(argv[1:])) if argv else ("build", [])
    if action not in ACTIONS:
        usage()
    ACTIONS[action](args)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except ImageBuildError as error:
        print(f"image-build: FAIL: {error}", file=sys.stderr)
        sys.exit(1)
    except subprocess.CalledProcessError as error:
        print(
            f"image-build: FAIL: {' '.join(map(str, error.cmd))} exited with {error.returncode}",
            file=sys.stderr,
        )
        sys.exit(1)
