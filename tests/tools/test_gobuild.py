"""``tools/gobuild.py``, the one cached build of every Go program: built once per key, then answered from the
cache; a failed build leaves nothing behind and shows its log's end. And ``tools/dev test`` holds every tool
written in Python to ruff and mypy."""

from __future__ import annotations

import hashlib
import importlib
import os
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def gobuild(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """``tools/gobuild.py`` with its cache in ``tmp_path``."""
    monkeypatch.setenv("PYKURED_TESTENV_CACHE", str(tmp_path / "cache"))
    monkeypatch.syspath_prepend(str(ROOT / "tools"))
    sys.modules.pop("gobuild", None)
    module = importlib.import_module("gobuild")
    monkeypatch.setitem(sys.modules, "gobuild", module)
    return module


def test_a_build_happens_once_per_key_and_is_linked_from_current(
    gobuild: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    builds: list[Path] = []

    def build(scratch: Path, log: Path) -> None:
        builds.append(scratch)
        log.write_text("go: compiling\n")
        (scratch / "tool").write_text("#!/bin/sh\n")
        (scratch / "tool").chmod(0o755)

    args = {"tool": "x-build", "stem": "tool-v1.0", "binaries": ["tool"], "what": "tool v1.0", "build": build}
    first = gobuild.cached(key="0123456789abcdef", **args)
    again = gobuild.cached(key="0123456789abcdef", **args)

    assert first == again == gobuild.BIN / "tool-v1.0-0123456789abcdef"
    assert len(builds) == 1 and not builds[0].exists()  # built in a scratch directory, moved into place
    assert os.readlink(gobuild.CURRENT / "tool") == str(first / "tool")
    assert (gobuild.LOGS / "tool-v1.0.log").read_text() == "go: compiling\n"
    err = capsys.readouterr().err
    assert "x-build: building tool v1.0 from source" in err
    assert f"x-build: tool v1.0 cached ({first})" in err

    other = gobuild.cached(key="fedcba9876543210", **args)  # another key: another build, current follows it
    assert len(builds) == 2
    assert os.readlink(gobuild.CURRENT / "tool") == str(other / "tool")


def test_a_failed_build_leaves_nothing_and_shows_the_log(gobuild: ModuleType) -> None:
    def build(scratch: Path, log: Path) -> None:
        log.write_text("".join(f"line {i}\n" for i in range(40)))
        raise gobuild.BuildError("go build failed")

    with pytest.raises(gobuild.BuildError) as failed:
        gobuild.cached(tool="x-build", stem="tool-v1.0", key="k", binaries=["tool"], what="tool", build=build)

    assert "FAILED to build tool" in str(failed.value)
    assert "line 39" in str(failed.value) and "line 14\n" not in str(failed.value)  # the log's last 25 lines
    assert not list(gobuild.BIN.glob("tool-v1.0-*"))


def test_the_key_is_the_first_16_hex_digits_of_the_sha256_of_its_parts(gobuild: ModuleType) -> None:
    assert gobuild.hash16(b"go.sum", b"v1 go1.26\n") == hashlib.sha256(b"go.sumv1 go1.26\n").hexdigest()[:16]


def test_the_versions_come_from_versions_env(gobuild: ModuleType) -> None:
    versions = gobuild.versions()
    assert {
        "K8S",
        "ETCD",
        "KURED",
        "HELM",
        "KREW",
        "REGISTRY",
        "COSIGN",
        "ALERTMANAGER",
        "PROMETHEUS",
    } <= set(versions)
    assert all(re.fullmatch(r"[0-9a-zA-Z.]+", value) for value in versions.values())


def test_tools_dev_test_checks_every_tool_written_in_python() -> None:
    dev = (ROOT / "tools/dev").read_text()
    (listed,) = re.findall(r"^tools_py=\(([^)]*)\)", dev, re.MULTILINE)
    checked = {Path(name).name for name in listed.split()}
    # mkdocs_hooks.py has checks of its own in tools/dev test; the plugin's preamble runs on any python3
    tools = {path.name for path in (ROOT / "tools").glob("*.py")} - {"mkdocs_hooks.py", "plugin-preamble.py"}
    assert tools == checked
    assert '"$venv/bin/mypy" "${tools_py[@]}"' in dev
