"""The single-file ``kubectl-pykured`` (``tools/plugin-build``): copied alone onto ``PATH``, run by kubectl.

The file is built once per session (cached by ``tools/plugin-build`` across sessions). The k8s test copies it
alone into an empty directory, gives it a fresh ``HOME`` and no virtualenv, lets the real kubectl find it on
``PATH`` and run it on the system's ``python3`` (or, where that is older than 3.11, on the virtualenv's base
interpreter, isolated), against the test API server; and once more on an interpreter that sees nothing but
its standard library (``-I -S``), which proves the file carries every module the commands load. krew
(``tools/kured-build krew``) installs it from the rendered manifest and the archive, as a user would.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import io
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from pykured import __version__
from pykured.cli import kubectl
from pykured_dev.testenv.procs import find_binaries
from pykured_dev.testenv.reference import artifact
from tests.e2e.cli.test_kubectl import two_contexts
from tests.testenv import TestEnv

pytestmark = pytest.mark.reference

ROOT = Path(__file__).resolve().parents[3]
BUILD = ROOT / "tools" / "plugin-build"
COMMANDS_LOAD = ("pydantic_core", "yaml", "kubernetes", "urllib3")
"""Packages the commands import (``python -X importtime``): the file must carry them."""


def _build(*args: str) -> Path:
    env = {**os.environ, "PYKURED_VENV": sys.prefix}
    done = subprocess.run([str(BUILD), *args], capture_output=True, text=True, timeout=1200, env=env)
    assert done.returncode == 0, done.stderr
    return Path(done.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def plugin_file() -> Iterator[Path]:
    yield _build("build", "x86_64")


def _python3() -> str:
    """The system's python3 when it is 3.11 or later, else the virtualenv's base interpreter."""
    system = shutil.which("python3", path="/usr/bin:/bin")
    if system:
        done = subprocess.run(
            [system, "-c", "import sys; print(sys.version_info >= (3, 11))"], capture_output=True, text=True
        )
        if done.stdout.strip() == "True":
            return system
    return os.path.realpath(getattr(sys, "_base_executable", sys.executable))


def _alone(plugin_file: Path, where: Path) -> tuple[Path, dict[str, str]]:
    """The file copied alone into an empty directory on PATH; a fresh HOME; python3 from _python3()."""
    bindir, shim, home = where / "bin", where / "python", where / "home"
    for directory in (bindir, shim, home):
        directory.mkdir()
    shutil.copy2(plugin_file, bindir / "kubectl-pykured")
    (shim / "python3").symlink_to(_python3())
    assert os.listdir(bindir) == ["kubectl-pykured"]
    env = {"PATH": f"{bindir}{os.pathsep}{shim}{os.pathsep}/usr/bin{os.pathsep}/bin", "HOME": str(home)}
    return bindir / "kubectl-pykured", env


def _run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.k8s
@pytest.mark.slow
@pytest.mark.timeout(1800)  # the file (and kubectl) are built on first use
def test_the_single_file_is_a_kubectl_plugin(plugin_file: Path, k8s: TestEnv, tmp_path: Path) -> None:
    exe, env = _alone(plugin_file, tmp_path)
    kubectl_bin = str(find_binaries(("kubectl",)) / "kubectl")
    config = two_contexts(k8s, tmp_path / "config")
    ns = k8s.new_namespace("plugin-file")
    k8s.create_daemonset(ns, "kured")
    (node,) = k8s.add_nodes(k8s.unique("plugin-file-node"))

    helped = _run([kubectl_bin, "pykured", "--help"], env)
    assert (helped.returncode, helped.stdout, helped.stderr) == (0, kubectl.help_text(), "")
    # the first run unpacked it under the fresh HOME (beside its lock file)
    unpacked = [p.name for p in (tmp_path / "home" / ".shiv").iterdir() if not p.name.startswith(".")]
    assert len(unpacked) == 1 and unpacked[0].startswith("kubectl-pykured_"), unpacked

    # kubectl's current context (nobody) is refused: the plugin reached the cluster through KUBECONFIG
    refused = _run([kubectl_bin, "pykured", "status", node], {**env, "KUBECONFIG": str(config)})
    assert refused.returncode == 1, refused
    assert "forbidden" in refused.stderr.lower() or "403" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr

    argv = ["pykured", "status", node, "-o", "json", "--context", "admin", "-n", ns]
    shown = _run([kubectl_bin, *argv], {**env, "KUBECONFIG": str(config)})
    assert shown.returncode == 0, shown.stderr
    assert [row["node"] for row in json.loads(shown.stdout)["nodes"]] == [node]

    locked = _run([kubectl_bin, "pykured", "lock", "status", f"-n{ns}", "--context=admin",
                   "--kubeconfig", str(config)], env)  # fmt: skip
    assert (locked.returncode, locked.stdout) == (0, "No lock holders.\n"), locked.stderr

    # Nothing but the standard library and the file: no site-packages, no PYTHONPATH, no user site
    bare = _run([_python3(), "-I", "-S", str(exe), *argv[1:]], {**env, "KUBECONFIG": str(config)})
    assert bare.returncode == 0, bare.stderr
    assert [row["node"] for row in json.loads(bare.stdout)["nodes"]] == [node]


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_file_carries_the_compiled_modules_for_each_python(plugin_file: Path) -> None:
    with zipfile.ZipFile(plugin_file) as archive:
        names = set(archive.namelist())
        environment = json.loads(archive.read("environment.json"))
    assert environment["entry_point"] == "pykured.cli.kubectl:main"
    for minor in (11, 12, 13, 14):
        so = f"site-packages/pydantic_core/_pydantic_core.cpython-3{minor}-x86_64-linux-gnu.so"
        assert so in names
    for package in COMMANDS_LOAD:
        assert f"site-packages/{package}/__init__.py" in names
    assert not any(name.startswith("site-packages/kubernetes/aio/") for name in names)  # trimmed as the image
    assert plugin_file.read_bytes().startswith(b"#!/usr/bin/env python3\n")
    with tarfile.open(f"{plugin_file}.tar.gz") as tar:
        (member,) = tar.getmembers()
        assert (member.name, member.mode & 0o111) == ("kubectl-pykured", 0o111)
        packed = tar.extractfile(member)
        assert packed is not None and packed.read() == plugin_file.read_bytes()


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_krew_manifest_names_each_platform_s_archive(plugin_file: Path) -> None:
    manifest = yaml.safe_load(_build("manifest", f"https://example.test/v{__version__}/").read_text())
    assert manifest["kind"] == "Plugin" and manifest["metadata"]["name"] == "pykured"
    assert manifest["spec"]["version"] == f"v{__version__}"
    platforms = {p["selector"]["matchLabels"]["arch"]: p for p in manifest["spec"]["platforms"]}
    assert set(platforms) == {"amd64", "arm64"}
    for arch, machine in (("amd64", "x86_64"), ("arm64", "aarch64")):
        archive = plugin_file.parent / f"kubectl-pykured-linux-{arch}.tar.gz"
        entry = platforms[arch]
        assert entry["uri"] == f"https://example.test/v{__version__}/{archive.name}"
        assert entry["sha256"] == hashlib.sha256(archive.read_bytes()).hexdigest()
        assert entry["bin"] == "kubectl-pykured"
        with tarfile.open(archive) as tar:
            packed = tar.extractfile("kubectl-pykured")
            assert packed is not None
            with zipfile.ZipFile(io.BytesIO(packed.read())) as inner:
                so = f"site-packages/pydantic_core/_pydantic_core.cpython-311-{machine}-linux-gnu.so"
                assert so in inner.namelist()


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_another_platform_s_file_says_so_in_one_line(plugin_file: Path, tmp_path: Path) -> None:
    machine = platform.machine()
    other = {"x86_64": "arm64", "aarch64": "amd64"}.get(machine)
    if other is None:
        pytest.fail(f"no plugin file is built for this machine ({machine})")
    _build("build", "aarch64" if other == "arm64" else "x86_64")
    exe, env = _alone(plugin_file.parent / f"kubectl-pykured-linux-{other}", tmp_path)
    done = _run([str(exe), "status"], env)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("kubectl-pykured: this file has no compiled modules for CPython 3.")
    assert f"on linux/{machine} " in done.stderr
    assert "it has: cpython-311-" in done.stderr and machine not in done.stderr.split("it has:")[1]


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_krew_installs_the_plugin_from_its_manifest_and_archive(plugin_file: Path, tmp_path: Path) -> None:
    """As a plugin's author checks it before publishing: ``kubectl krew install --manifest --archive``."""
    manifest = _build("manifest", f"https://example.test/v{__version__}/")
    krewdir = tmp_path / "krew-bin"
    krewdir.mkdir()
    (krewdir / "kubectl-krew").symlink_to(artifact("krew"))
    kubectl_bin = str(find_binaries(("kubectl",)) / "kubectl")
    _, env = _alone(plugin_file, tmp_path)
    krew_root = tmp_path / "krew-root"
    installing = {**env, "PATH": f"{krewdir}{os.pathsep}{env['PATH']}", "KREW_ROOT": str(krew_root)}
    install = ["krew", "install", f"--manifest={manifest}", f"--archive={plugin_file}.tar.gz"]
    done = _run([kubectl_bin, *install], installing)
    assert done.returncode == 0, done.stderr
    assert "Installed plugin: pykured" in done.stderr
    installed = krew_root / "bin" / "kubectl-pykured"
    assert installed.resolve().read_bytes() == plugin_file.read_bytes()
    # only krew's bin directory on PATH (the copy of _alone is not): kubectl finds krew's link
    using = {**env, "PATH": f"{krew_root / 'bin'}{os.pathsep}{tmp_path / 'python'}{os.pathsep}/usr/bin:/bin"}
    helped = _run([kubectl_bin, "pykured", "--help"], using)
    assert (helped.returncode, helped.stdout) == (0, kubectl.help_text()), helped.stderr


def test_an_unsupported_python_is_one_line(tmp_path: Path) -> None:
    """The preamble: a Python the file has no compiled modules for gets one line and exit 1."""
    core = tmp_path / "pydantic_core"
    core.mkdir()
    (core / "_pydantic_core.cpython-399-x86_64-linux-gnu.so").write_bytes(b"")
    script = (
        "import runpy, sys; "
        f"runpy.run_path({str(ROOT / 'tools' / 'plugin-preamble.py')!r}, "
        f"init_globals={{'site_packages': {str(tmp_path)!r}}})"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("kubectl-pykured: this file has no compiled modules for CPython 3.")
    assert "it has: cpython-399-x86_64-linux-gnu" in done.stderr
    (core / f"_pydantic_core{importlib.machinery.EXTENSION_SUFFIXES[0]}").write_bytes(b"")
    fine = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert (fine.returncode, fine.stderr) == (0, "")
