"""The image tools (``tools/image_build.py``, ``image_bases.py``, ``image_smoke.py``), the parts that need no
container tools: the build context the cache key reads, the stand-ins' recipes as their key reads them, and
the guard that keeps the emulated smoke test away from binfmt_misc."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


MODULES = ("image_store", "image_bases", "image_build", "image_smoke")


@pytest.fixture
def tools(monkeypatch: pytest.MonkeyPatch) -> dict[str, ModuleType]:
    """The image tools' modules by name, imported as ``tools/image-build`` runs them."""
    monkeypatch.syspath_prepend(str(ROOT / "tools"))
    for name in MODULES:
        sys.modules.pop(name, None)
    modules = {name: importlib.import_module(name) for name in MODULES}
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    return modules


def test_the_context_key_reads_the_files_find_lists(tools: dict[str, ModuleType]) -> None:
    """The files of the build context, in the order and form the image's cache key has always hashed them
    (``find ... | LC_ALL=C sort -z | xargs -0 sha256sum``), so a built image stays cached."""
    build = tools["image_build"]
    listed = subprocess.run(
        "find pyproject.toml README.md pykured -name __pycache__ -prune -o -name '*.pyc' -o -type f -print0"
        " | LC_ALL=C sort -z | xargs -0 sha256sum",
        shell=True,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    ours = subprocess.run(
        ["sha256sum", *build.context_files()], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert ours == listed


def test_each_recipe_is_keyed_by_its_shell_text(tools: dict[str, ModuleType]) -> None:
    bases = tools["image_bases"]
    for recipe in ("make_standin", "make_distroless_standin", "make_foreign_distroless_standin"):
        text = bases.recipe_text(recipe).decode()
        assert text.startswith(f"{recipe} () \n{{")
    assert "python3.11-minimal" in bases.distroless_packages()


def test_the_emulator_is_never_a_path_below_binfmt_misc(tools: dict[str, ModuleType], tmp_path: Path) -> None:
    store, smoke = tools["image_store"], tools["image_smoke"]
    link = tmp_path / "qemu-aarch64-static"
    link.symlink_to("/proc/sys/fs/binfmt_misc/register")
    for path in (Path("/proc/sys/fs/binfmt_misc"), Path("/proc/sys/fs/binfmt_misc/qemu-aarch64"), link):
        with pytest.raises(store.ImageBuildError, match="binfmt_misc is machine-wide"):
            smoke.refuse_binfmt_path(path)
    smoke.refuse_binfmt_path(tmp_path / "qemu" / "qemu-aarch64-static")  # anywhere else: fine


def test_a_change_to_binfmt_misc_during_the_emulated_smoke_fails_it(
    tools: dict[str, ModuleType], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, smoke = tools["image_store"], tools["image_smoke"]
    monkeypatch.setattr(smoke, "binfmt_state", lambda: "qemu-aarch64 register status ")
    smoke.binfmt_guard("qemu-aarch64 register status ")
    with pytest.raises(store.ImageBuildError, match=r"binfmt_misc changed .*before: register status"):
        smoke.binfmt_guard("register status ")


def test_the_chart_config_check_names_what_differs(
    tools: dict[str, ModuleType], capsys: pytest.CaptureFixture[str]
) -> None:
    smoke = tools["image_smoke"]
    dump = dict(smoke.CHART_CONFIG)
    assert smoke.chart_config_kept(json.dumps(dump))
    dump["period"] = "2h0m0s"
    assert not smoke.chart_config_kept(json.dumps(dump))
    assert "'period': ('2h0m0s', '1h0m0s')" in capsys.readouterr().err


def test_a_context_some_checkout_used_within_a_day_is_never_pruned(
    tools: dict[str, ModuleType], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The image store is every checkout's: besides the four newest contexts, a build keeps each context a
    checkout built or looked up (``ref``) within the day: a test or a release reading it keeps its image."""
    build = tools["image_build"]
    monkeypatch.setattr(build, "CONTEXTS_IN_USE", tmp_path / "in-use")
    build.mark_in_use("aaaa")
    build.mark_in_use("bbbb")
    old = tmp_path / "in-use" / "bbbb"
    stamp = old.stat().st_mtime - build.IN_USE_SECONDS - 60
    os.utime(old, (stamp, stamp))
    now = old.stat().st_mtime + build.IN_USE_SECONDS + 60
    assert build.in_use(now) == {"aaaa"}
    keys = ("aaaa", "bbbb", "c1", "c2", "c3", "c4")
    listed = "\n".join(
        f"2026-12-0{day} 10:00:00 +0000 UTC|{arch}ctx-{key}"
        for day, key in enumerate(keys, start=1)
        for arch in ("", "amd64-")
    )
    tags = [
        f"localhost/pykured:{arch}ctx-{k}"
        for k in ("aaaa", "bbbb", "c1", "c2", "c3", "c4")
        for arch in ("", "amd64-")
    ]
    untagged: list[str] = []

    def output(*args: str, **_kw: object) -> str:
        assert "{{.CreatedAt}}|{{.Tag}}" not in args
        return "\n".join(tags)

    def run(*args: str, **_kw: object) -> subprocess.CompletedProcess[bytes]:
        assert "{{.CreatedAt}}|{{.Tag}}" in args
        return subprocess.CompletedProcess(args, 0, stdout=listed.encode())

    monkeypatch.setattr(build, "output", output)
    monkeypatch.setattr(build, "run", run)

    def podman_ok(*args: str) -> bool:
        untagged.append(args[-1])
        return args[0] == "manifest"  # an index goes by `manifest rm`, and rmi is not tried after it

    monkeypatch.setattr(build, "podman_ok", podman_ok)
    monkeypatch.setattr(build.time, "time", lambda: now)
    build.prune_contexts()
    # the four newest (c1..c4) and the one used within the day (aaaa) stay; bbbb goes, and its marker with it
    assert sorted(untagged) == ["localhost/pykured:amd64-ctx-bbbb", "localhost/pykured:ctx-bbbb"]
    assert sorted(p.name for p in (tmp_path / "in-use").iterdir()) == ["aaaa"]


def test_a_store_podman_cannot_list_is_left_unpruned(
    tools: dict[str, ModuleType], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Pruning is housekeeping: when podman cannot list the store, the build it follows stands and nothing is
    untagged."""
    build = tools["image_build"]
    touched: list[tuple[str, ...]] = []

    def run(*args: str, **_kw: object) -> subprocess.CompletedProcess[bytes]:
        return subprocess.CompletedProcess(args, 125, stdout=b"")

    def untouched(*args: str, **_kw: object) -> bool:
        touched.append(args)
        return True

    monkeypatch.setattr(build, "run", run)
    monkeypatch.setattr(build, "output", untouched)
    monkeypatch.setattr(build, "podman_ok", untouched)
    build.prune_contexts()
    assert touched == []
    assert "prune" in capsys.readouterr().err


def test_only_the_build_stages_working_containers_are_removed(
    tools: dict[str, ModuleType], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Earlier builds' leftovers go (buildah names a stage's container ``<image>-working-container[-N]``); a
    container podman runs (the smoke test's, the tests') stays."""
    build = tools["image_build"]
    listed = "\n".join(
        [
            "0c05 python3-debian12-working-container",
            "2032 python3-debian12-working-container-12",
            "be73 pykured-smoke-amd64",
            "aa59 test_image-node-1",
        ]
    )
    removed: list[tuple[str, ...]] = []

    def run(*args: str, **_kw: object) -> subprocess.CompletedProcess[bytes]:
        if args[:2] == ("buildah", "containers"):
            return subprocess.CompletedProcess(args, 0, stdout=listed.encode())
        removed.append(args)
        return subprocess.CompletedProcess(args, 0, stdout=b"")

    monkeypatch.setattr(build, "run", run)
    build.prune_working_containers()
    assert removed == [("buildah", "rm", "0c05", "2032")]
