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
Dockerfile builds unchanged with --pull=never (tools/image_bases.py). Their recipes are shell (debootstrap,
chroot, dpkg-deb) in tools/image-standin.sh; each stand-in is cached, keyed by its recipe's text, the
mirror and the python3.11 version. The final base's arm64 stand-in (gcr.io/distroless/python3-debian12:
latest-arm64) is made from Debian's arm64 packages without running them; the builder has none, as it always
runs on the build platform.
PYKURED_IMAGE_PULL=1 pulls the real bases instead: the Dockerfile's defaults of its BUILDER and BASE build
arguments, pinned by digest, or PYKURED_IMAGE_BUILDER and PYKURED_IMAGE_BASE; what is pulled is passed to
those arguments.

Needs Python 3.11 and the standard library only (the SBOM runs pykured_dev.sbom in the virtualenv).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

from image_bases import base_refs, ensure_base, ensure_foreign_bases, platform_final_base
from image_store import (
    CACHE,
    IMAGE_REPO,
    PLATFORMS,
    ROOT,
    ImageBuildError,
    Step,
    arch_of,
    build_platform,
    configure,
    container,
    fail,
    hash16,
    image_size,
    install_tools,
    label_of,
    locked,
    output,
    podman,
    podman_ok,
    run,
)

UV_VERSION = "0.13.8"
CONTEXT_LABEL = "dev.pykured.context"


def read_version() -> str:
    match = re.search(r'^version = "(.*)"$', (ROOT / "pyproject.toml").read_text(), re.MULTILINE)
    return match.group(1) if match else ""


def platform_image(platform: str, key: str) -> str:
    """One platform's image in the index: localhost/pykured:<architecture>-ctx-<context hash>. (Not
    ctx-<hash>-...: an older image build in another checkout sharing the store keeps only the four newest
    ctx-* tags.)"""
    return f"{IMAGE_REPO}:{arch_of(platform)}-ctx-{key}"


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
                # buildah 1.28 leaves the base stage (FROM ... AS base, read only by COPY --from) behind as a
                # mounted working container after every build unless told to remove them all
                "--force-rm",
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


CONTEXTS_IN_USE = CACHE / "contexts-in-use"
"""One empty file per build context, touched each time a checkout builds or looks up its image (``ref``):
the image store is shared by every checkout on the machine, and a context used within ``IN_USE_SECONDS`` is
never pruned, whoever builds next."""
IN_USE_SECONDS = 24 * 3600


def mark_in_use(key: str) -> None:
    CONTEXTS_IN_USE.mkdir(parents=True, exist_ok=True)
    (CONTEXTS_IN_USE / key).touch()


def in_use(now: float) -> set[str]:
    """The contexts some checkout built or looked up within the last ``IN_USE_SECONDS``."""
    if not CONTEXTS_IN_USE.is_dir():
        return set()
    return {p.name for p in CONTEXTS_IN_USE.iterdir() if now - p.stat().st_mtime < IN_USE_SECONDS}


def prune_contexts() -> None:
    """Keep the four newest contexts (each an index and its platforms' images) and every context a checkout
    used within a day (a test or a release may be reading it); untag the rest."""
    listing = ("podman", "images", "--format", "{{.CreatedAt}}|{{.Tag}}", IMAGE_REPO)
    done = run(*listing, check=False, capture=True)
    if done.returncode != 0:
        # podman 4.3 cannot always list a store holding image indexes made with `podman manifest add`
        # ("reading manifest for image instance ..."); pruning is housekeeping: the build it follows stands.
        Step("prune").done("skipped: podman could not list the images")
        return
    listed = done.stdout.decode().splitlines()
    newest = sorted(
        (line for line in listed if re.search(r"\|([a-z0-9]+-)?ctx-", line)), key=os.fsencode, reverse=True
    )
    keys = [re.sub(r"^.*ctx-([0-9a-f]*)$", r"\1", line) for line in newest]
    keep = set(list(dict.fromkeys(keys))[:4]) | in_use(time.time())
    for marker in CONTEXTS_IN_USE.iterdir() if CONTEXTS_IN_USE.is_dir() else ():
        if marker.name not in keep:
            marker.unlink(missing_ok=True)
    tags = output("podman", "images", "--format", "{{.Repository}}:{{.Tag}}", IMAGE_REPO).splitlines()
    for tag in tags:
        stale = re.search(r":([a-z0-9]+-)?ctx-", tag) and tag.rsplit("ctx-", 1)[1] not in keep
        if stale and not podman_ok("manifest", "rm", tag):
            podman_ok("rmi", tag)


WORKING_CONTAINER = re.compile(r"-working-container(-[0-9]+)?$")
"""The name buildah gives a build stage's container (``python3-debian12-working-container-3``)."""


def prune_working_containers() -> None:
    """Remove the build stages' working containers earlier builds left in this store (each a mounted overlay;
    builds before ``--force-rm`` left two a build). Only buildah's own, by the name buildah gives them: a
    container podman runs (the smoke test's, the tests') is never one."""
    listing = ("buildah", "containers", "--format", "{{.ContainerID}} {{.ContainerName}}")
    done = run(*listing, check=False, capture=True)
    if done.returncode != 0:
        return
    left = [
        cid
        for cid, _, name in (line.partition(" ") for line in done.stdout.decode().splitlines())
        if cid and WORKING_CONTAINER.search(name)
    ]
    if left:
        run("buildah", "rm", *left, check=False, capture=True)
        Step("prune").done(f"removed {len(left)} working containers earlier builds left")


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
        mark_in_use(key)
        version = read_version()
        image = f"{IMAGE_REPO}:{version}"
        prune_working_containers()
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
    mark_in_use(key)
    if platform is None:
        return f"{IMAGE_REPO}:ctx-{key}"
    if platform not in PLATFORMS:
        fail(f"{platform} is not one of the image's platforms: {' '.join(PLATFORMS)}")
    return platform_image(platform, key)


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
    image = ref(build_platform())  # this checkout's own (the version's tag is whichever checkout built last)
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
        # The document's timestamp is the image's creation time: the same image, the same bytes.
        created = output("podman", "image", "inspect", "--format", "{{.Created.Unix}}", image)
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
                "--platform",
                platform,
                "--created",
                created,
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
    # pykured never loads; the image's smoke test loads the kubeconfig loader without them); click, which
    # only apprise's own command line imports; tzdata, the time zones as a Python package, which Python's
    # zoneinfo and dateutil read only where the system has none (the base has /usr/share/zoneinfo).
    left_out = (
        "aiohttp",
        "aiohttp-retry",
        "aiohappyeyeballs",
        "aiosignal",
        "attrs",
        "frozenlist",
        "multidict",
        "propcache",
        "yarl",
        "click",
        "tzdata",
    )
    no_emit = [f for pkg in left_out for f in ("--no-emit-package", pkg)]
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
