"""Container images for real nodes, made locally (no registry): archives ``ctr images import`` reads.

* ``busybox``: one layer from Debian's ``busybox-static`` (``/bin/busybox`` and a link per applet, plus
  ``/usr/bin/nsenter``); the pause image and the workloads run it.
* ``kured``: the busybox layer plus the real kured 1.23.0 binary (``tools/kured-build kured``) as
  ``/usr/bin/kured``, which runs ``/usr/bin/nsenter -m/proc/1/ns/mnt -- …`` as kured's own image does.
* the pykured image, saved from ``tools/image-build``'s store with ``podman save``.

Archives are written in ``docker save`` form (``manifest.json`` with ``RepoTags``) and cached by content.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from pykured_dev.testenv.procs import TestEnvError, cache_dir

BUSYBOX = "/bin/busybox"
PAUSE_IMAGE = "localhost/pause:realnode"
BUSYBOX_IMAGE = "localhost/busybox:realnode"
KURED_IMAGE = "localhost/kured:1.23.0"
_RECIPE = "3"  # bump when the layer's recipe changes
_ROOT = Path(__file__).resolve().parents[2]
_PAUSE_CMD = ["/bin/sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait; done"]


def images_dir() -> Path:
    path = cache_dir() / "realnode-images"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _add(
    tar: tarfile.TarFile,
    name: str,
    *,
    data: bytes | None = None,
    mode: int = 0o755,
    link: str | None = None,
    directory: bool = False,
) -> None:
    info = tarfile.TarInfo(name)
    info.mode = mode
    info.mtime = 0
    if directory:
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
    elif link is not None:
        info.type = tarfile.SYMTYPE
        info.linkname = link
        tar.addfile(info)
    else:
        assert data is not None
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))


def busybox_layer(extra: dict[str, Path] | None = None) -> bytes:
    """An uncompressed layer: busybox, its applet links, ``/usr/bin/nsenter``, ``/etc/passwd``, ``/tmp``."""
    applets = subprocess.run([BUSYBOX, "--list"], capture_output=True, text=True, check=True).stdout.split()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for d in ("bin", "etc", "usr", "usr/bin", "tmp", "proc", "sys", "dev", "run", "var"):
            _add(tar, d, directory=True, mode=0o1777 if d == "tmp" else 0o755)
        _add(tar, "bin/busybox", data=Path(BUSYBOX).read_bytes())
        for applet in sorted(set(applets) - {"busybox"}):
            _add(tar, f"bin/{applet}", link="busybox")
        _add(tar, "usr/bin/nsenter", link="/bin/busybox")
        _add(
            tar,
            "etc/passwd",
            data=b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534::/:/bin/false\n",
            mode=0o644,
        )
        _add(tar, "etc/group", data=b"root:x:0:\nnogroup:x:65534:\n", mode=0o644)
        for target, source in (extra or {}).items():
            _add(tar, target, data=source.read_bytes())
    return buf.getvalue()


def write_archive(
    path: Path, name: str, layer: bytes, *, entrypoint: Sequence[str] = (), cmd: Sequence[str] = ()
) -> Path:
    """A ``docker save`` archive of a one-layer image named ``name``."""
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
            "Entrypoint": list(entrypoint) or None,
            "Cmd": list(cmd) or None,
        },
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{_digest(layer)}"]},
        "history": [{"created_by": "pykured_dev.testenv.images"}],
    }
    config_bytes = json.dumps(config, sort_keys=True).encode()
    manifest = [
        {
            "Config": f"blobs/sha256/{_digest(config_bytes)}",
            "RepoTags": [name],
            "Layers": [f"blobs/sha256/{_digest(layer)}"],
        }
    ]
    tmp = path.with_suffix(f".tmp.{os.getpid()}")
    with tarfile.open(tmp, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for d in ("blobs", "blobs/sha256"):
            _add(tar, d, directory=True)
        _add(tar, f"blobs/sha256/{_digest(layer)}", data=layer, mode=0o644)
        _add(tar, f"blobs/sha256/{_digest(config_bytes)}", data=config_bytes, mode=0o644)
        _add(tar, "manifest.json", data=json.dumps(manifest).encode(), mode=0o644)
    os.replace(tmp, path)
    return path


def _file_key(*paths: Path) -> str:
    h = hashlib.sha256(_RECIPE.encode())
    for p in paths:
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def busybox_images() -> list[Path]:
    """The pause and workload images (cached)."""
    key = _file_key(Path(BUSYBOX))
    out: list[Path] = []
    layer: bytes | None = None
    for name, cmd in ((PAUSE_IMAGE, _PAUSE_CMD), (BUSYBOX_IMAGE, ["/bin/sh"])):
        path = images_dir() / f"{name.split('/')[1].replace(':', '-')}-{key}.tar"
        if not path.exists():
            layer = layer or busybox_layer()
            write_archive(path, name, layer, cmd=cmd)
        out.append(path)
    return out


def kured_image(kured_binary: Path) -> Path:
    """kured 1.23.0 as an image: the busybox layer plus ``/usr/bin/kured`` (cached)."""
    path = images_dir() / f"kured-1.23.0-{_file_key(Path(BUSYBOX), kured_binary)}.tar"
    if not path.exists():
        layer = busybox_layer({"usr/bin/kured": kured_binary})
        write_archive(path, KURED_IMAGE, layer, entrypoint=["/usr/bin/kured"])
    return path


def build_platform() -> str:
    """The machine's own platform (``linux/amd64`` or ``linux/arm64``), whose image in the index runs here."""
    machine = os.uname().machine
    return {"x86_64": "linux/amd64", "aarch64": "linux/arm64", "arm64": "linux/arm64"}.get(machine, machine)


def _own_id(tool: str, name: str) -> str:
    """``name`` with one label more, as ``localhost/pykured:archive-<tag>``: the same files and settings
    under an image ID of its own (built once per image; a layer-less ``FROM``, no network)."""
    repo, _, tag = name.rpartition(":")
    derived = f"{repo}:archive-{tag}"
    exists = subprocess.run([tool, "podman", "image", "exists", derived], check=False, timeout=120)
    if exists.returncode == 0:
        return derived
    with tempfile.TemporaryDirectory(prefix="pykured-archive-") as context:
        (Path(context) / "Containerfile").write_text(f"FROM {name}\n")
        built = subprocess.run(
            [tool, "podman", "build", "--pull=never", f"--label={ARCHIVE_LABEL}",
             f"--tag={derived}", context],
            capture_output=True, text=True, check=False, timeout=600,
        )  # fmt: skip
    if built.returncode != 0:
        raise TestEnvError(f"podman build {derived} failed: {built.stderr.strip()[-500:]}")
    return derived


ARCHIVE_LABEL = "dev.pykured.test-archive=real-nodes"
"""The label that gives the real nodes' imported image its own ID (:func:`pykured_image`)."""


def pykured_image(*, own_id: bool = False) -> tuple[str, Path]:
    """This checkout's pykured image for this machine's platform (``tools/image-build ref PLATFORM``: one
    image of the index, saved under its own name, since an archive of the index's name would carry the
    platform image's tag instead) and its ``podman save`` archive (cached).

    ``own_id``: the image with :data:`ARCHIVE_LABEL` added, so its ID differs from the released image's.
    The real nodes import this archive and may also pull the released image by digest from a registry
    (``tests/e2e/realnode/test_release.py``); with both in a node's containerd under one image ID, a node
    rebooted afterwards reported the imported name as not present (``ErrImageNeverPull``)."""
    tool = str(_ROOT / "tools" / "image-build")
    ref = subprocess.run(
        [tool, "ref", build_platform()], capture_output=True, text=True, check=False, timeout=120
    )
    if ref.returncode != 0:
        raise TestEnvError(f"the pykured image is missing (run tools/image-build): {ref.stderr.strip()}")
    name = ref.stdout.strip()
    if own_id:
        name = _own_id(tool, name)
    inspect = subprocess.run(
        [tool, "podman", "image", "inspect", "--format={{.Id}}", name],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if inspect.returncode != 0:
        raise TestEnvError(f"the pykured image {name} is not built (run tools/image-build)")
    # Keyed by the image and the name it is saved under: an archive carries its tag, and another checkout's
    # build of the same image under its own context tag would otherwise be loaded under the wrong name.
    tag_key = hashlib.sha256(name.encode()).hexdigest()[:8]
    path = images_dir() / f"pykured-{inspect.stdout.strip()[:16]}-{tag_key}.tar"
    for old in images_dir().glob("pykured-*.tar"):  # earlier builds' archives, a day old
        if old != path and time.time() - old.stat().st_mtime > 86400:
            old.unlink(missing_ok=True)
    if not path.exists():
        tmp = path.with_suffix(f".tmp.{os.getpid()}")
        tmp.unlink(missing_ok=True)
        saved = subprocess.run(
            [tool, "podman", "save", "--format=docker-archive", f"--output={tmp}", name],
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )
        if saved.returncode != 0:
            raise TestEnvError(f"podman save {name} failed: {saved.stderr.strip()[-500:]}")
        os.replace(tmp, path)
    return name, path
