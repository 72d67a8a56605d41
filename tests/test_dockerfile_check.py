"""tools/dockerfile-check: the bases are pinned by digest, through the build arguments' defaults too.

The check's lint runs on a copy of what it reads (the Dockerfile, pyproject.toml, the lock) with the bases
changed; the lint's verdict comes before its package step, which the copy cannot pass and which is not
what is tested here.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PIN = re.compile(r"^ARG (BUILDER|BASE)=(\S+)$", flags=re.MULTILINE)


def lint(tmp_path: Path, dockerfile: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "tools").mkdir()
    (tmp_path / "image").mkdir()
    shutil.copy(ROOT / "tools/dockerfile-check", tmp_path / "tools")
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    shutil.copy(ROOT / "image/requirements.txt", tmp_path / "image")
    (tmp_path / "Dockerfile").write_text(dockerfile, encoding="utf-8")
    venv = Path(sys.prefix)
    return subprocess.run(
        [tmp_path / "tools/dockerfile-check", venv], capture_output=True, text=True, timeout=120, check=False
    )


def test_the_dockerfile_s_bases_are_pinned_by_digest(tmp_path: Path) -> None:
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    pins = dict(PIN.findall(text))
    assert set(pins) == {"BUILDER", "BASE"}
    assert pins["BUILDER"].startswith("python:3.11-slim-bookworm@sha256:")
    assert pins["BASE"].startswith("gcr.io/distroless/python3-debian12@sha256:")
    done = lint(tmp_path, text)
    for image in pins.values():
        assert f"lint ok: FROM {image} is pinned by digest" in done.stdout, done.stderr


@pytest.mark.parametrize(
    ("arg", "base"),
    [
        ("BASE", "gcr.io/distroless/python3-debian12:latest"),
        ("BUILDER", "python:3.11-slim-bookworm"),
        ("BASE", "gcr.io/distroless/python3-debian12@sha256:abc"),
    ],
)
def test_a_base_pinned_by_tag_or_a_short_digest_fails(tmp_path: Path, arg: str, base: str) -> None:
    text = PIN.sub(lambda m: f"ARG {m[1]}={base}" if m[1] == arg else m[0], (ROOT / "Dockerfile").read_text())
    done = lint(tmp_path, text)
    assert done.returncode != 0
    assert f"FAIL: lint: FROM {base} is pinned by digest" in done.stderr
