"""The real-node helper's pure parts: the locally made images, and the one line naming what is missing."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest

from pykured_dev.testenv import images, realnode


def test_busybox_archive_is_a_docker_save_archive_of_one_layer(tmp_path: Path) -> None:
    layer = images.busybox_layer()
    path = images.write_archive(tmp_path / "x.tar", "localhost/x:1", layer, cmd=["/bin/sh"])
    with tarfile.open(path) as tar:
        manifest = json.load(tar.extractfile("manifest.json"))  # type: ignore[arg-type]
        [entry] = manifest
        assert entry["RepoTags"] == ["localhost/x:1"]
        config = json.load(tar.extractfile(entry["Config"]))  # type: ignore[arg-type]
        blob = tar.extractfile(entry["Layers"][0]).read()  # type: ignore[union-attr]
    assert config["rootfs"]["diff_ids"] == [f"sha256:{hashlib.sha256(blob).hexdigest()}"]
    assert config["config"]["Cmd"] == ["/bin/sh"]
    with tarfile.open(fileobj=io.BytesIO(blob)) as inner:
        names = {m.name: m for m in inner.getmembers()}
    assert names["bin/sh"].issym() and names["bin/sh"].linkname == "busybox"
    assert names["usr/bin/nsenter"].linkname == "/bin/busybox"  # kured runs /usr/bin/nsenter -m/proc/1/ns/mnt
    assert names["bin/busybox"].size > 0


def test_missing_cni_plugins_and_runtime_are_named_on_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(realnode, "CNI_DIR", tmp_path)
    monkeypatch.setattr(shutil, "which", lambda cmd: None if cmd == "runc" else f"/usr/bin/{cmd}")
    with pytest.raises(realnode.RealNodeError) as caught:
        realnode.require()
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("real nodes cannot run here; missing: ")
    assert "runc (Debian package runc)" in message
    assert f"CNI plugin {tmp_path / 'bridge'} (Debian package containernetworking-plugins)" in message
    assert "containerd" not in message.replace("containernetworking", "")


def test_missing_cgroup_hierarchy_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(realnode, "_cgroup_version", lambda: 1)
    monkeypatch.setattr(realnode, "_v1_hierarchies", lambda: {"cpu": Path("/sys/fs/cgroup/cpu")})
    lacking = realnode.missing()
    assert "cgroup v1 hierarchy memory (/sys/fs/cgroup/memory)" in lacking
    assert not any("hierarchy cpu " in item for item in lacking)


def test_too_few_free_inotify_instances_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    limit = int(Path("/proc/sys/fs/inotify/max_user_instances").read_text())
    monkeypatch.setattr(realnode, "inotify_in_use", lambda: limit - 5)
    assert realnode.short_of(3) == (
        f"free inotify instances: 5 of fs.inotify.max_user_instances={limit} "
        f"({limit - 5} held by other processes), 18 needed for 3 nodes"
    )
    monkeypatch.setattr(realnode, "inotify_in_use", lambda: 0)
    assert realnode.short_of(3) == ""
