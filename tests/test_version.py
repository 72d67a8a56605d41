"""One version, set in pyproject.toml: the package, the image's tag, the chart, the manifests and the plugin.

``pykured.__version__`` is a constant (``pykured/_version.py``: no metadata scan at start-up) held to the
installed package's metadata (pyproject.toml's ``version``);
``tools/image-build`` tags the image with it and ``tools/plugin-build manifest`` writes it into the krew
manifest. What cannot read it (the chart's ``Chart.yaml``, the manifests' image tags, the Dockerfile's
default label) carries a copy this test holds to it, as it holds ``CHANGELOG.md`` to the version's entry.
"""

from __future__ import annotations

import re
import subprocess
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
import yaml

import pykured
from pykured.__main__ import kured
from pykured.__main__ import main as pykured_main
from pykured.cli import kubectl

ROOT = Path(__file__).resolve().parents[1]
IMAGE = "ghcr.io/pykured/pykured"


def project_version() -> str:
    with (ROOT / "pyproject.toml").open("rb") as handle:
        return str(tomllib.load(handle)["project"]["version"])


VERSION = project_version()


def test_the_package_is_pyproject_s_version() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+([.-]?[a-z0-9.]+)?", VERSION)
    assert pykured.__version__ == metadata.version("pykured") == VERSION
    constant = re.findall(r'^__version__ = "(.*)"$', (ROOT / "pykured/_version.py").read_text(), re.MULTILINE)
    assert constant == [VERSION]


def test_the_chart_s_version_and_app_version_are_the_package_s() -> None:
    chart = yaml.safe_load((ROOT / "charts/pykured/Chart.yaml").read_text())
    assert (chart["version"], chart["appVersion"]) == (VERSION, VERSION)


def test_the_manifests_run_the_image_of_this_version() -> None:
    manifests = [
        ROOT / "kustomize/base/daemonset.yaml",
        ROOT / "kustomize/overlays/fleetlock-central/deployment.yaml",
    ]
    for path in manifests:
        tags = re.findall(rf"image: {re.escape(IMAGE)}:(\S+)", path.read_text())
        assert tags == [VERSION], path


def test_the_image_is_tagged_and_labelled_with_the_version() -> None:
    tagged = subprocess.run(
        [ROOT / "tools/image-build", "version"], capture_output=True, text=True, check=True
    )
    assert tagged.stdout == f"{VERSION}\n"
    defaults = re.findall(r"^ARG VERSION=(\S+)$", (ROOT / "Dockerfile").read_text(), flags=re.MULTILINE)
    assert defaults == [VERSION]  # the label of a build that passes no VERSION (tools/image-build passes it)


def test_the_krew_manifest_has_no_version_of_its_own() -> None:
    # tools/plugin-build manifest fills in pyproject.toml's (tests/e2e/cli/test_plugin_file.py renders it)
    versions = re.findall(
        r"^\s*version:\s*(\S+)", (ROOT / "plugins/pykured.yaml").read_text(), flags=re.MULTILINE
    )
    assert versions == ["@VERSION@"]


def test_the_changelog_has_the_version_s_entry() -> None:
    releases = re.findall(r"^## \[([^\]]+)\]", (ROOT / "CHANGELOG.md").read_text(), flags=re.MULTILINE)
    assert VERSION in releases


def test_pykured_and_the_plugin_print_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert pykured_main(["--version"]) == 0
    assert capsys.readouterr().out == f"pykured {VERSION}\n"
    assert kubectl.main(["--version"]) == 0
    assert capsys.readouterr().out == f"kubectl pykured {VERSION}\n"


def test_kured_has_no_version_flag_as_kured(capsys: pytest.CaptureFixture[str]) -> None:
    assert kured(["--version"]) == 2
    assert capsys.readouterr().err.endswith("unknown flag: --version\n")
