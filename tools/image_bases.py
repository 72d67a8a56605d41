"""The image's two bases: the builder stage's python:3.11-slim-bookworm and the final stage's distroless.

Where no registry can be reached (the default: nothing here contacts a registry), stand-ins are made from
Debian's archive alone and tagged with the bases' names, so the Dockerfile builds unchanged with
--pull=never. Their recipes are shell as they run (debootstrap, chroot, dpkg-deb) in tools/image-standin.sh;
each stand-in is cached by a label holding its key: a hash of its recipe's text as bash prints it (declare
-f), the Debian mirror, the architecture, the python3.11 candidate and debootstrap's version (the arm64
final base's key also holds the build platform's, whose files it copies). The final base's arm64 stand-in
(gcr.io/distroless/python3-debian12:latest-arm64) is made from Debian's arm64 packages without running them;
the builder has none, as it always runs on the build platform. PYKURED_IMAGE_PULL=1 pulls the real bases
instead: the Dockerfile's defaults of its BUILDER and BASE build arguments, pinned by digest, or
PYKURED_IMAGE_BUILDER, PYKURED_IMAGE_BASE and PYKURED_IMAGE_BASE_ARM64.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

from image_store import (
    BASE_NAME,
    CACHE,
    FINAL_NAME,
    PLATFORMS,
    ROOT,
    Step,
    arch_of,
    build_platform,
    fail,
    hash16,
    image_size,
    label_of,
    output,
    podman_ok,
    run,
)

STANDIN_RECIPES = ROOT / "tools" / "image-standin.sh"
STANDIN_LABEL = "dev.pykured.standin-key"


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


def platform_final_base(platform: str) -> str:
    """The final base the Dockerfile's BASE gets for a platform: the build platform's as before; another
    platform's by distroless's per-architecture tag (PYKURED_IMAGE_BASE_ARM64 pins it, e.g. by digest). The
    builder stage always runs on the build platform, so it has no other platform's base."""
    if platform == build_platform():
        return base_refs()[1]
    return os.environ.get("PYKURED_IMAGE_BASE_ARM64") or f"{FINAL_NAME}-{arch_of(platform)}"


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
