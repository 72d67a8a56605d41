"""The built image's SBOM (``tools/image-build sbom``): what it lists is what the image holds.

``tools/image-build`` (run by ``.ci/run`` and ``tools/dev test`` before pytest) builds the image; this runs
``tools/image-build sbom`` on it and checks the document against the CycloneDX schema (the library's strict
validator) and against the image itself: the versions it gives for pykured, the Kubernetes client, apprise,
Debian's python3.11, OpenSSL, tzdata and util-linux (nsenter) are the ones the image's own files report when
the image runs (no network, read-only root).
"""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
IMAGE_BUILD = str(ROOT / "tools" / "image-build")

# Printed by the image's Python: each package's version as its own files give it.
PROBE = """
import apprise, json, kubernetes, platform, ssl, subprocess
from importlib.metadata import version
zone = open("/usr/share/zoneinfo/tzdata.zi").readline().split()
nsenter = subprocess.run(["/usr/bin/nsenter", "--version"], capture_output=True, text=True).stdout.split()
print(json.dumps({
    "pykured": version("pykured"),
    "kubernetes": kubernetes.__version__,
    "apprise": apprise.__version__,
    "python": platform.python_version(),
    "openssl": ssl.OPENSSL_VERSION.split()[1],
    "tzdata": zone[2] if zone[:2] == ["#", "version"] else "",
    "util-linux": nsenter[-1],
}))
"""


def image_build(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([IMAGE_BUILD, *args], capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def built() -> tuple[str, dict[str, Any], dict[str, str]]:
    """The image of this checkout, its SBOM, and what its files report."""
    ref = image_build("ref", timeout=60)
    assert ref.returncode == 0, f"{ref.stderr}run tools/image-build first (tools/dev test does)"
    image = ref.stdout.strip()
    done = image_build("sbom")
    assert done.returncode == 0, done.stderr
    version = image_build("version", timeout=60).stdout.strip()
    arch = image_build("podman", "image", "inspect", "--format", "{{.Architecture}}", image).stdout.strip()
    path = ROOT / "build" / "sbom" / f"pykured-{version}-linux-{arch}.cdx.json"
    assert path.name in done.stderr, done.stderr
    run = image_build(
        "podman", "run", "--rm", "--read-only", "--network", "none", "--entrypoint", "/usr/bin/python3.11",
        image, "-c", PROBE, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    return path.read_text(encoding="utf-8"), {"image": image, "arch": arch}, json.loads(run.stdout)


def components(text: str) -> dict[str, dict[str, Any]]:
    return {c["purl"].split("@", 1)[0]: c for c in json.loads(text)["components"]}


def test_the_sbom_conforms_to_the_cyclonedx_schema(built: tuple[str, dict[str, Any], dict[str, str]]) -> None:
    text, _, _ = built
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    assert json.loads(text)["specVersion"] == "1.6"


def test_the_sbom_names_the_image_it_describes(built: tuple[str, dict[str, Any], dict[str, str]]) -> None:
    text, image, _ = built
    subject = json.loads(text)["metadata"]["component"]
    inspected = image_build("podman", "image", "inspect", "--format", "{{.Id}} {{.Digest}}", image["image"])
    image_id, digest = inspected.stdout.split()
    assert subject["type"] == "container" and subject["version"] == f"sha256:{image_id}"
    # by its configuration's digest, which a push keeps; never the local store's manifest digest, which it
    # changes (the registry would hold no image of that digest)
    assert subject["purl"].startswith(f"pkg:oci/pykured@sha256:{image_id}?arch={image['arch']}&os=linux")
    assert digest.removeprefix("sha256:") not in text


def test_the_sbom_lists_what_the_image_holds_at_its_versions(
    built: tuple[str, dict[str, Any], dict[str, str]],
) -> None:
    text, image, found = built
    listed = components(text)
    with (ROOT / "pyproject.toml").open("rb") as handle:
        assert listed["pkg:pypi/pykured"]["version"] == tomllib.load(handle)["project"]["version"]
    assert listed["pkg:pypi/pykured"]["version"] == found["pykured"]
    assert listed["pkg:pypi/kubernetes"]["version"] == found["kubernetes"]
    assert listed["pkg:pypi/apprise"]["version"] == found["apprise"]
    debian = {name: c["version"] for name, c in listed.items() if name.startswith("pkg:deb/debian/")}
    # Debian's versions are the upstream one, a hyphen and Debian's revision (3.0.17-1~deb12u2)
    assert debian["pkg:deb/debian/python3.11-minimal"].startswith(found["python"] + "-")
    assert debian["pkg:deb/debian/libpython3.11-stdlib"].startswith(found["python"] + "-")
    assert debian["pkg:deb/debian/libssl3"].startswith(found["openssl"] + "-")
    assert debian["pkg:deb/debian/tzdata"].startswith(found["tzdata"] + "-")
    assert debian["pkg:deb/debian/util-linux"].startswith(found["util-linux"] + "-")  # nsenter's package
    libssl = listed["pkg:deb/debian/libssl3"]
    assert f"arch={image['arch']}" in libssl["purl"] and "distro=debian-12" in libssl["purl"]
    assert {"license": {"id": "Apache-2.0"}} in libssl["licenses"]
    assert listed["pkg:pypi/kubernetes"]["licenses"] == [{"license": {"id": "Apache-2.0"}}]
