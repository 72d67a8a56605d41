"""pykured_dev.sbom: dpkg's records, dist-info METADATA and copyright files read; the CycloneDX document."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator

from pykured_dev import sbom

NOW = datetime(2026, 12, 3, 2, 0, tzinfo=UTC)
IMAGE = sbom.ImageRef(
    name="localhost/pykured",
    tag="1.2.3",
    image_id="sha256:" + "a" * 64,
    platform="linux/amd64",
)

LIBSSL = """Package: libssl3
Status: install ok installed
Priority: optional
Architecture: amd64
Multi-Arch: same
Source: openssl
Version: 3.0.17-1~deb12u2
Description: Secure Sockets Layer toolkit - shared libraries
 This package is part of the OpenSSL project's implementation of the SSL and TLS
 cryptographic protocols.
"""
TZDATA_RECORD = """Package: tzdata
Version: 2025b-0+deb12u1
Architecture: all
Description: time zone and daylight-saving time data
"""
PYTHON_RECORD = """Package: python3.11-minimal
Source: python3.11
Version: 3.11.2-6+deb12u6
Architecture: amd64
"""
STATUS = """Package: dpkg
Status: install ok installed
Architecture: amd64
Version: 1.21.22

Package: removed-one
Status: deinstall ok config-files
Architecture: amd64
Version: 1.0

Package: libc6
Status: install ok installed
Architecture: amd64
Source: glibc (2.36-9+deb12u10)
Version: 2.36-9+deb12u10
"""
DEP5 = """Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: OpenSSL

Files: *
Copyright: 1998-2025 The OpenSSL Project
License: Apache-2.0
 Licensed under the Apache License 2.0.

Files: debian/*
License: Apache-2.0

Files: crypto/x.c
License: GPL-2+ or Artistic
"""
METADATA = """Metadata-Version: 2.4
Name: {name}
Version: {version}
{extra}
"""


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def rootfs(tmp_path: Path) -> Path:
    root = tmp_path / "rootfs"
    write(
        root / "etc/os-release", 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n'
    )
    write(root / "var/lib/dpkg/status.d/libssl3", LIBSSL)
    write(root / "var/lib/dpkg/status.d/libssl3.md5sums", "0123  usr/lib/x86_64-linux-gnu/libssl.so.3\n")
    write(root / "var/lib/dpkg/status.d/tzdata", TZDATA_RECORD)
    write(root / "var/lib/dpkg/status.d/python3.11-minimal", PYTHON_RECORD)
    write(root / "var/lib/dpkg/status", STATUS)
    write(root / "usr/share/doc/libssl3/copyright", DEP5)
    write(root / "usr/share/doc/tzdata/copyright", "This is the public domain, not in Debian's format.\n")
    site = root / "usr/local/lib/python3.11/dist-packages"
    write(
        site / "kubernetes-37.0.2.dist-info/METADATA",
        METADATA.format(name="kubernetes", version="37.0.2", extra="License: Apache License Version 2.0"),
    )
    write(
        site / "pykured-1.2.3.dist-info/METADATA",
        METADATA.format(name="pykured", version="1.2.3", extra="License-Expression: Apache-2.0"),
    )
    write(
        site / "Google_Re2-1.1.dist-info/METADATA",
        METADATA.format(
            name="google_re2", version="1.1", extra="Classifier: License :: OSI Approved :: BSD License"
        ),
    )
    write(
        site / "dual-2.0.dist-info/METADATA",
        METADATA.format(name="dual", version="2.0", extra="License-Expression: MIT OR Apache-2.0"),
    )
    write(  # the same package as google_re2 (one package URL): listed once
        root / "usr/lib/python3/dist-packages/google.re2-1.1.dist-info/METADATA",
        METADATA.format(name="google.re2", version="1.1", extra=""),
    )
    write(site / "broken-0.1.dist-info/METADATA", "Metadata-Version: 2.1\n")  # no name or version: skipped
    return root


def test_stanzas_keep_continuation_lines_and_split_on_blank_lines() -> None:
    stanzas = sbom.parse_stanzas(LIBSSL + "\n" + TZDATA_RECORD)
    assert [s["Package"] for s in stanzas] == ["libssl3", "tzdata"]
    assert stanzas[0]["Description"].splitlines()[1].startswith("This package is part of")
    assert sbom.parse_stanzas("\n\n") == []


def test_a_package_is_installed_named_and_versioned_or_left_out() -> None:
    (libc,) = [s for s in sbom.parse_stanzas(STATUS) if s["Package"] == "libc6"]
    package = sbom.deb_package(libc)
    assert package == sbom.DebPackage(name="libc6", version="2.36-9+deb12u10", arch="amd64", source="glibc")
    record = sbom.deb_package(sbom.parse_stanzas(TZDATA_RECORD)[0])  # distroless: no Status field
    assert record is not None and record.version == "2025b-0+deb12u1" and record.source == ""
    removed = next(s for s in sbom.parse_stanzas(STATUS) if s["Package"] == "removed-one")
    assert sbom.deb_package(removed) is None
    assert sbom.deb_package({"Package": "x", "Architecture": "amd64"}) is None  # no version
    assert sbom.deb_package({"Package": "../x", "Version": "1", "Architecture": "amd64"}) is None


def test_licenses_come_from_debian_copyright_format_files_only() -> None:
    assert sbom.copyright_licenses(DEP5) == ("Apache-2.0", "GPL-2+ or Artistic")
    assert sbom.copyright_licenses("Copyright 2020 someone. All rights reserved.\n") == ()


def test_a_python_distributions_license_prefers_its_expression_then_its_field_then_classifiers() -> None:
    classifiers = ["License :: OSI Approved :: MIT License", "Programming Language :: Python"]
    assert sbom.python_licenses(expression="MIT", license_field="x", classifiers=classifiers) == ("MIT",)
    assert sbom.python_licenses(expression="", license_field="BSD", classifiers=classifiers) == ("BSD",)
    assert sbom.python_licenses(expression="", license_field="a\nlong text", classifiers=classifiers) == (
        "MIT License",
    )
    assert sbom.python_licenses(expression="", license_field="UNKNOWN", classifiers=[]) == ()


def test_the_distro_comes_from_os_release() -> None:
    assert sbom.os_release_distro('ID=debian\nVERSION_ID="12"\n') == "debian-12"
    assert sbom.os_release_distro("ID=debian\n") == ""


def test_a_root_file_system_is_read_from_status_d_the_status_file_and_dist_info(tmp_path: Path) -> None:
    contents = sbom.read_rootfs(rootfs(tmp_path))
    assert contents.distro == "debian-12"
    assert [(p.name, p.version) for p in contents.debs] == [
        ("dpkg", "1.21.22"),
        ("libc6", "2.36-9+deb12u10"),
        ("libssl3", "3.0.17-1~deb12u2"),
        ("python3.11-minimal", "3.11.2-6+deb12u6"),
        ("tzdata", "2025b-0+deb12u1"),
    ]
    libssl = next(p for p in contents.debs if p.name == "libssl3")
    assert libssl.licenses == ("Apache-2.0", "GPL-2+ or Artistic") and libssl.source == "openssl"
    assert next(p for p in contents.debs if p.name == "tzdata").licenses == ()
    assert [(d.name, d.version, d.licenses) for d in contents.dists] == [
        ("dual", "2.0", ("MIT OR Apache-2.0",)),
        ("google_re2", "1.1", ("BSD License",)),
        ("kubernetes", "37.0.2", ("Apache License Version 2.0",)),
        ("pykured", "1.2.3", ("Apache-2.0",)),
    ]


def test_the_document_names_the_image_and_every_package_with_its_purl_and_conforms(tmp_path: Path) -> None:
    contents = sbom.read_rootfs(rootfs(tmp_path))
    text = sbom.render(sbom.build_bom(image=IMAGE, contents=contents, now=NOW))
    document = json.loads(text)
    assert document["bomFormat"] == "CycloneDX" and document["specVersion"] == "1.6"
    assert document["metadata"]["timestamp"].startswith("2026-12-03T02:00:00")
    subject = document["metadata"]["component"]
    assert subject["type"] == "container" and subject["version"] == IMAGE.image_id
    # named by its configuration's digest alone, which a push does not change: no local manifest digest
    assert subject["purl"].startswith("pkg:oci/pykured@sha256:" + "a" * 64 + "?arch=amd64&os=linux")
    assert not [p for p in subject["properties"] if "manifest" in p["name"]]
    assert {"name": "dev.pykured:platform", "value": "linux/amd64"} in subject["properties"]
    purls = {c["name"]: c["purl"] for c in document["components"]}
    assert purls["libssl3"] == (
        "pkg:deb/debian/libssl3@3.0.17-1~deb12u2?arch=amd64&distro=debian-12&upstream=openssl"
    )
    assert purls["libc6"] == (
        "pkg:deb/debian/libc6@2.36-9%2Bdeb12u10?arch=amd64&distro=debian-12&upstream=glibc"
    )
    assert purls["google_re2"] == "pkg:pypi/google-re2@1.1"
    assert purls["pykured"] == "pkg:pypi/pykured@1.2.3"
    licenses = {c["name"]: c.get("licenses", []) for c in document["components"]}
    assert licenses["pykured"] == [{"license": {"id": "Apache-2.0"}}]
    assert licenses["dual"] == [{"expression": "MIT OR Apache-2.0"}]
    assert licenses["libssl3"] == [
        {"license": {"id": "Apache-2.0"}},
        {"license": {"name": "GPL-2+ or Artistic"}},
    ]
    (root,) = [d for d in document["dependencies"] if d["ref"] == "image"]
    assert len(root["dependsOn"]) == len(document["components"]) == 9
    again = sbom.render(sbom.build_bom(image=IMAGE, contents=contents, now=NOW))
    assert json.loads(again)["serialNumber"] == document["serialNumber"]  # the same image, the same document


def test_the_schema_check_rejects_what_does_not_conform(tmp_path: Path) -> None:
    document = json.loads(
        sbom.render(sbom.build_bom(image=IMAGE, contents=sbom.read_rootfs(rootfs(tmp_path)), now=NOW))
    )
    document["components"][0]["type"] = "not-a-type"
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(json.dumps(document)) is not None


def test_the_command_writes_the_document_and_refuses_an_empty_root(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out/x.cdx.json"
    args = [
        "--image",
        IMAGE.name,
        "--tag",
        IMAGE.tag,
        "--image-id",
        IMAGE.image_id,
        "--platform",
        IMAGE.platform,
    ]
    assert sbom.main(["--rootfs", str(rootfs(tmp_path)), *args, "--output", str(out)]) == 0
    assert "5 Debian packages, 4 Python distributions" in capsys.readouterr().out
    assert json.loads(out.read_text())["metadata"]["component"]["name"] == IMAGE.name
    (tmp_path / "empty").mkdir()
    assert sbom.main(["--rootfs", str(tmp_path / "empty"), *args, "--output", str(tmp_path / "y.json")]) == 1
    assert not (tmp_path / "y.json").exists()


def test_the_same_image_gets_the_same_bytes_stamped_with_its_creation_time(tmp_path: Path) -> None:
    """Made twice for one image (two checkouts, or a test beside a release that already read it), the
    document is the same file: stamped with the image's creation time, never the clock's."""
    root = rootfs(tmp_path)
    args = [
        "--image",
        IMAGE.name,
        "--tag",
        IMAGE.tag,
        "--image-id",
        IMAGE.image_id,
        "--platform",
        IMAGE.platform,
    ]
    first, second = tmp_path / "a.cdx.json", tmp_path / "b.cdx.json"
    for out in (first, second):
        assert sbom.main(["--rootfs", str(root), *args, "--created", "1767225600", "--output", str(out)]) == 0
    assert first.read_bytes() == second.read_bytes()
    assert json.loads(first.read_text())["metadata"]["timestamp"].startswith("2026-01-01T00:00:00")
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".json") == ["a.cdx.json", "b.cdx.json"]
    with pytest.raises(SystemExit):
        sbom.main(["--rootfs", str(root), *args, "--created", "yesterday", "--output", str(first)])
