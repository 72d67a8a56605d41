"""The built image index: each platform's image, and the arm64 one run under explicitly named emulation.

``tools/image-build`` builds one index (``tools/image-build ref``) with an image per platform of
``tools/image-build platforms`` (``tools/image-build ref PLATFORM``). The build never runs a program of the
target platform; here the arm64 image's Python and pykured run under ``qemu-aarch64-static`` named as the
container's entry point (``tools/image-build emulator arm64``), never through binfmt_misc, which these tests
check they leave as they found it.
"""

from __future__ import annotations

import json
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_image import IMAGE_BUILD, podman

pytestmark = [pytest.mark.slow]

BINFMT = Path("/proc/sys/fs/binfmt_misc")
ELF_MACHINE = {"amd64": 62, "arm64": 183}
"""OCI architecture → the ELF ``e_machine`` of its programs."""


def image_build(*args: str, timeout: float = 300) -> str:
    done = subprocess.run([IMAGE_BUILD, *args], capture_output=True, text=True, check=False, timeout=timeout)
    assert done.returncode == 0, f"image-build {' '.join(args)}: {done.stderr}(run tools/image-build first)"
    return done.stdout.strip()


def binfmt_entries() -> list[str]:
    return sorted(entry.name for entry in BINFMT.iterdir()) if (BINFMT / "status").exists() else []


@pytest.fixture
def index() -> Iterator[str]:
    before = binfmt_entries()
    yield image_build("ref")
    assert binfmt_entries() == before, "binfmt_misc is machine-wide: nothing may register a handler in it"


def elf_machine(image: str, path: str, tmp_path: Path) -> int:
    """The ELF machine of a file in an image, copied out of a created (never started) container."""
    container = podman("create", image).stdout.strip()
    try:
        podman("cp", f"{container}:{path}", str(tmp_path / "elf"))
    finally:
        podman("rm", "--force", container, check=False)
    header = (tmp_path / "elf").read_bytes()[:20]
    assert header[:4] == b"\x7fELF", f"{path} in {image} is not an ELF file"
    return int(struct.unpack_from("<H", header, 0x12)[0])


def test_index_holds_each_platform_with_its_architecture(index: str, tmp_path: Path) -> None:
    platforms = image_build("platforms").split()
    assert platforms == ["linux/amd64", "linux/arm64"]
    manifests = json.loads(podman("manifest", "inspect", index).stdout)["manifests"]
    listed = {f"{m['platform']['os']}/{m['platform']['architecture']}": m["digest"] for m in manifests}
    assert sorted(listed) == platforms, manifests
    for platform in platforms:
        image = image_build("ref", platform)
        config = podman("image", "inspect", "--format", "{{.Os}}/{{.Architecture}} {{.Digest}}", image)
        os_arch, digest = config.stdout.split()
        assert os_arch == platform, f"{image}'s config says {os_arch}"
        assert digest == listed[platform], f"the index lists {listed[platform]} for {platform}, not {image}"
        arch = platform.split("/")[1]
        for program in ("/usr/bin/python3.11", "/usr/bin/nsenter"):
            assert elf_machine(image, program, tmp_path) == ELF_MACHINE[arch], f"{program} in {image}"
    # What the tests run and the real-node tier saves (podman run, podman save on the index's name) is the
    # build platform's image.
    index_id = podman("image", "inspect", "--format={{.Id}}", index).stdout.strip()
    amd64 = image_build("ref", "linux/amd64")
    amd64_id = podman("image", "inspect", "--format={{.Id}}", amd64).stdout.strip()
    assert index_id == amd64_id, (index_id, amd64_id)


def test_arm64_python_and_pykured_run_under_explicit_qemu(index: str) -> None:
    qemu = image_build("emulator", "arm64")
    assert Path(qemu).name == "qemu-aarch64-static" and not Path(qemu).is_relative_to(BINFMT), qemu
    run = ["run", "--rm", "--network=none", "--read-only", "--platform=linux/arm64"]
    emulated = [*run, f"--volume={qemu}:/qemu:ro", "--entrypoint=/qemu", index, "/usr/bin/python3.11"]

    python = podman(*emulated, "-c", "import platform, pykured, re2, yaml._yaml; print(platform.machine())")
    assert python.stdout.strip() == "aarch64", python

    kured = ["/usr/bin/kured", "--node-id=node-1", "--period=10m", "--dump-config"]
    dump = podman(*emulated, *kured, timeout=120)
    config = json.loads(dump.stdout)
    assert (config["node-id"], config["period"]) == ("node-1", "10m0s"), config

    # The same image without the emulator named: no handler runs it behind the test's back (unless this
    # machine has an aarch64 handler of its own, which the fixture checks this test did not add).
    plain = podman(*run, "--entrypoint=/usr/bin/python3.11", index, "-c", "pass", check=False)
    if not any("aarch64" in entry for entry in binfmt_entries()):
        assert plain.returncode != 0 and "exec format error" in plain.stderr.lower(), plain
