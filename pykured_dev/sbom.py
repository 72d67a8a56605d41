"""The container image's software bill of materials: a CycloneDX 1.6 JSON document from the image's own files.

``tools/image-build sbom`` mounts each platform's image (``podman image mount``) and runs this on its root
file system, which it reads without running anything in it:

* the Debian packages, from dpkg's records: ``/var/lib/dpkg/status.d/<package>`` (distroless writes one file
  per package and has no dpkg; so does the stand-in base) and ``/var/lib/dpkg/status`` (an image with dpkg,
  such as ``python:3.11-slim``), each with the license names of its machine-readable copyright file
  (``/usr/share/doc/<package>/copyright``, Debian's copyright format 1.0) when it has one;
* the Python distributions, from each ``*.dist-info`` directory's ``METADATA`` on Python's paths under
  ``/usr/local/lib`` and ``/usr/lib`` (the standard library's ``importlib.metadata`` reads them).

The document model, its JSON and its schema check are cyclonedx-python-lib's; the package URLs are
packageurl-python's (``pkg:deb/debian/<name>@<version>?arch=…&distro=debian-12``,
``pkg:pypi/<name>@<version>``).
The document describes the image by its ID alone (the digest of its configuration, in the subject's version,
its package URL and a property), with its platform and tag: pushing to a registry recompresses the layers and
so changes the manifest's digest, but never the configuration's, so the document names the image the
registry holds, not one that exists only in the local store (``tools/release`` refuses a document that names
any other). Its timestamp is the
image's creation time (``--created``), so the same image always gets the same bytes: a second run beside a
reader (another checkout's tool, a test) never changes a document the reader already holds, and the file is
replaced whole (written beside it, then renamed), never seen half written.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from importlib.metadata import Distribution, PackageMetadata
from pathlib import Path

from cyclonedx.contrib.license.factories import LicenseFactory
from cyclonedx.contrib.this.builders import this_component
from cyclonedx.exception.factory import InvalidSpdxLicenseException
from cyclonedx.model import Property
from cyclonedx.model.bom import Bom
from cyclonedx.model.component import Component, ComponentType
from cyclonedx.model.license import License
from cyclonedx.output.json import JsonV1Dot6
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from packageurl import PackageURL

SCHEMA = SchemaVersion.V1_6
MAX_FILE = 4 * 1024 * 1024  # one dpkg record, status file, METADATA or copyright file; larger is not read
MAX_LICENSES = 32  # license names taken from one copyright file
_SITE_GLOBS = (
    "usr/local/lib/python3*/*-packages",
    "usr/lib/python3*/*-packages",
    "usr/lib/python3/dist-packages",
)
_NAME = re.compile(r"^[a-z0-9][a-z0-9+.-]*$")  # a Debian package name
_PROPERTY_PREFIX = "dev.pykured:"
_NOT_RECORDS = (".md5sums", ".list", ".conffiles", ".shlibs", ".symbols", ".triggers")  # dpkg's other files


@dataclass(frozen=True, kw_only=True)
class DebPackage:
    """One Debian package as dpkg records it, and the license names of its copyright file."""

    name: str
    version: str
    arch: str
    source: str = ""  # the source package, when it has another name than the binary one
    source_version: str = ""  # the source package's version, when it differs from the binary one
    licenses: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class PythonDist:
    """One installed Python distribution (a ``*.dist-info`` directory)."""

    name: str
    version: str
    licenses: tuple[
        str, ...
    ] = ()  # an SPDX expression (License-Expression), or the License field, or classifiers


@dataclass(frozen=True, kw_only=True)
class ImageRef:
    """The image a document describes."""

    name: str  # localhost/pykured
    tag: str  # pykured's version
    image_id: str  # sha256:<digest of the image's configuration>
    platform: str  # linux/amd64


@dataclass(frozen=True, kw_only=True)
class ImageContents:
    """What a root file system holds: its Debian release, packages and Python distributions."""

    distro: str  # debian-12 ("" when /etc/os-release does not say)
    debs: tuple[DebPackage, ...]
    dists: tuple[PythonDist, ...]


# ---- parsing (pure) --------------------------------------------------------------------------------------


def parse_stanzas(text: str) -> list[dict[str, str]]:
    """Debian control-file stanzas (dpkg's status, a copyright file): fields by name, continuation lines kept.

    A line that is neither a field nor a continuation is dropped; so is a stanza without fields.
    """
    stanzas: list[dict[str, str]] = []
    fields: dict[str, str] = {}
    last = ""
    for line in text.splitlines():
        if not line.strip():
            if fields:
                stanzas.append(fields)
            fields, last = {}, ""
        elif line[0] in " \t":
            if last:
                fields[last] += "\n" + line.strip()
        elif ":" in line:
            key, _, value = line.partition(":")
            last = key.strip()
            fields[last] = value.strip()
        else:
            last = ""
    if fields:
        stanzas.append(fields)
    return stanzas


def deb_package(fields: dict[str, str]) -> DebPackage | None:
    """The package of one dpkg stanza; None for one that is not installed or lacks a name, version or arch."""
    name, version, arch = fields.get("Package", ""), fields.get("Version", ""), fields.get("Architecture", "")
    status = fields.get("Status", "install ok installed")  # distroless's records have no Status field
    if not (_NAME.match(name) and version and arch) or not status.endswith(" installed"):
        return None
    source, _, rest = fields.get("Source", "").partition(" ")
    source_version = rest.strip().strip("()")
    return DebPackage(
        name=name,
        version=version,
        arch=arch,
        source=source if source and source != name else "",
        source_version=source_version if source_version and source_version != version else "",
    )


def copyright_licenses(text: str) -> tuple[str, ...]:
    """The license names of a machine-readable Debian copyright file, in order, each once; () for others.

    Debian's copyright format 1.0: a header stanza with ``Format:``, then stanzas whose ``License:`` field's
    first line names a license (``GPL-2+``, ``Apache-2.0``, ``GPL-2+ or Artistic``).
    """
    stanzas = parse_stanzas(text)
    if not stanzas or "copyright-format" not in stanzas[0].get("Format", ""):
        return ()
    names: list[str] = []
    for stanza in stanzas:
        name = stanza.get("License", "").split("\n", 1)[0].strip()
        if name and name not in names and len(name) <= 200:
            names.append(name)
    return tuple(names[:MAX_LICENSES])


def python_licenses(*, expression: str, license_field: str, classifiers: Iterable[str]) -> tuple[str, ...]:
    """A distribution's license: its License-Expression, else a one-line License field, else classifiers."""
    if expression.strip():
        return (expression.strip(),)
    field = license_field.strip()
    if field and "\n" not in field and len(field) <= 100 and field.upper() != "UNKNOWN":
        return (field,)
    prefix = "License :: OSI Approved :: "
    return tuple(c.removeprefix(prefix) for c in classifiers if c.startswith(prefix))


def os_release_distro(text: str) -> str:
    """``debian-12`` from /etc/os-release's ID and VERSION_ID; "" when either is missing."""
    values = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip().strip('"')
    distro, version = values.get("ID", ""), values.get("VERSION_ID", "")
    return (
        f"{distro}-{version}"
        if re.fullmatch(r"[a-z0-9.-]+", f"{distro}-{version}") and distro and version
        else ""
    )


# ---- the document (pure) ---------------------------------------------------------------------------------


def _licenses(names: Sequence[str]) -> list[License]:
    factory = LicenseFactory()
    if len(names) == 1:  # one value: an SPDX id, an SPDX expression or a name
        return [factory.make_from_string(names[0])]
    licenses: list[License] = []
    for name in names:  # several: each an SPDX id or a name (an expression must stand alone)
        try:
            licenses.append(factory.make_with_id(name))
        except InvalidSpdxLicenseException:
            licenses.append(factory.make_with_name(name))
    return licenses


def deb_purl(package: DebPackage, *, distro: str) -> PackageURL:
    qualifiers = {"arch": package.arch}
    if distro:
        qualifiers["distro"] = distro
    if package.source:
        qualifiers["upstream"] = package.source + (
            f"@{package.source_version}" if package.source_version else ""
        )
    return PackageURL(
        type="deb", namespace="debian", name=package.name, version=package.version, qualifiers=qualifiers
    )


def pypi_purl(dist: PythonDist) -> PackageURL:
    return PackageURL(type="pypi", name=re.sub(r"[-_.]+", "-", dist.name).lower(), version=dist.version)


def build_bom(*, image: ImageRef, contents: ImageContents, now: datetime) -> Bom:
    """The CycloneDX document of one platform's image: the image as its subject, one component per package."""
    os_name, _, arch = image.platform.partition("/")
    repository = image.name.rsplit("/", 1)[-1]
    qualifiers = {"arch": arch, "os": os_name, "tag": image.tag, "repository_url": image.name}
    root = Component(
        type=ComponentType.CONTAINER,
        name=image.name,
        version=image.image_id,
        bom_ref="image",
        purl=PackageURL(type="oci", name=repository, version=image.image_id, qualifiers=qualifiers),
        properties=[
            Property(name=f"{_PROPERTY_PREFIX}image-id", value=image.image_id),
            Property(name=f"{_PROPERTY_PREFIX}platform", value=image.platform),
            Property(name=f"{_PROPERTY_PREFIX}tag", value=f"{image.name}:{image.tag}"),
        ],
    )
    components: list[Component] = []
    for package in contents.debs:
        purl = deb_purl(package, distro=contents.distro)
        components.append(
            Component(
                type=ComponentType.LIBRARY if package.name.startswith("lib") else ComponentType.APPLICATION,
                name=package.name,
                version=package.version,
                bom_ref=purl.to_string(),
                purl=purl,
                licenses=_licenses(package.licenses),
            )
        )
    for dist in contents.dists:
        purl = pypi_purl(dist)
        components.append(
            Component(
                type=ComponentType.LIBRARY,
                name=dist.name,
                version=dist.version,
                bom_ref=purl.to_string(),
                purl=purl,
                licenses=_licenses(dist.licenses),
            )
        )
    bom = Bom(
        components=components,
        serial_number=uuid.uuid5(uuid.NAMESPACE_URL, f"pykured-sbom:{image.image_id}:{image.platform}"),
    )
    bom.metadata.timestamp = now
    bom.metadata.component = root
    bom.metadata.tools.components.add(this_component())
    bom.register_dependency(root, components)
    for component in components:
        bom.register_dependency(component)
    return bom


def render(bom: Bom) -> str:
    """The document as CycloneDX 1.6 JSON, checked against the schema (ValueError if it does not conform)."""
    text = JsonV1Dot6(bom).output_as_string(indent=2)
    error = JsonStrictValidator(SCHEMA).validate_str(text)
    if error is not None:
        raise ValueError(f"the SBOM does not conform to CycloneDX {SCHEMA.to_version()}: {error}")
    return text + "\n"


# ---- reading a root file system (the adapter) --------------------------------------------------------------


def _read(path: Path) -> str:
    """A small text file of the image; "" when it is missing, not a regular file or too large."""
    try:
        if not path.is_file() or path.is_symlink() or path.stat().st_size > MAX_FILE:
            return ""
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _inside(root: Path, path: Path) -> bool:
    return path.resolve().is_relative_to(root.resolve())


def _copyright(root: Path, name: str) -> tuple[str, ...]:
    path = root / "usr/share/doc" / name / "copyright"
    return copyright_licenses(_read(path)) if _inside(root, path.parent) else ()


def read_debs(root: Path) -> list[DebPackage]:
    """The Debian packages dpkg records in the root file system (status.d's files, then the status file)."""
    stanzas: list[dict[str, str]] = []
    status_d = root / "var/lib/dpkg/status.d"
    if status_d.is_dir() and not status_d.is_symlink():
        for path in sorted(status_d.iterdir()):
            if not path.name.endswith(_NOT_RECORDS):  # <package> (python3.11-minimal), not <package>.md5sums
                stanzas += parse_stanzas(_read(path))
    stanzas += parse_stanzas(_read(root / "var/lib/dpkg/status"))
    found: dict[tuple[str, str], DebPackage] = {}
    for fields in stanzas:
        package = deb_package(fields)
        if package is not None and (package.name, package.arch) not in found:
            found[package.name, package.arch] = replace(package, licenses=_copyright(root, package.name))
    return sorted(found.values(), key=lambda p: (p.name, p.arch))


def _field(metadata: PackageMetadata, key: str) -> str:
    values = metadata.get_all(key) or []
    return str(values[0]) if values else ""


def read_dists(root: Path) -> list[PythonDist]:
    """The Python distributions installed in the root file system (each ``*.dist-info`` on Python's paths)."""
    found: dict[tuple[str, str], PythonDist] = {}
    # in the order Debian's Python searches them (/usr/local first): a package found twice is the first one
    sites = dict.fromkeys(site for pattern in _SITE_GLOBS for site in sorted(root.glob(pattern)))
    for site in sites:
        if not site.is_dir() or not _inside(root, site):
            continue
        for info in sorted(site.glob("*.dist-info")):
            if not _read(info / "METADATA"):
                continue
            metadata = Distribution.at(info).metadata
            name, version = _field(metadata, "Name"), _field(metadata, "Version")
            if not name or not version:
                continue
            licenses = python_licenses(
                expression=_field(metadata, "License-Expression"),
                license_field=_field(metadata, "License"),
                classifiers=[str(c) for c in metadata.get_all("Classifier") or []],
            )
            dist = PythonDist(name=name, version=version, licenses=licenses)
            found.setdefault((pypi_purl(dist).name, version), dist)  # one component per package URL
    return sorted(found.values(), key=lambda d: d.name.lower())


def read_rootfs(root: Path) -> ImageContents:
    distro = os_release_distro(_read(root / "etc/os-release") or _read(root / "usr/lib/os-release"))
    return ImageContents(distro=distro, debs=tuple(read_debs(root)), dists=tuple(read_dists(root)))


def _unix_time(value: str) -> datetime:
    """``--created``: whole seconds since the epoch, as ``podman image inspect --format {{.Created.Unix}}``
    prints them."""
    try:
        return datetime.fromtimestamp(int(value), UTC)
    except (ValueError, OverflowError, OSError) as exc:
        raise argparse.ArgumentTypeError(f"not seconds since the epoch: {value!r}") from exc


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pykured_dev.sbom", description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rootfs", required=True, type=Path, help="the image's root file system (mounted)")
    parser.add_argument("--image", required=True, help="the image's name (localhost/pykured)")
    parser.add_argument("--tag", required=True, help="its tag (pykured's version)")
    parser.add_argument("--image-id", required=True, help="sha256:<the image's ID>")
    parser.add_argument("--platform", required=True, help="os/arch, e.g. linux/amd64")
    parser.add_argument("--output", required=True, type=Path)
    parser.add_argument(
        "--created",
        type=_unix_time,
        default=None,
        help="the image's creation time, in seconds since the epoch (the document's timestamp; default now)",
    )
    args = parser.parse_args(argv)
    contents = read_rootfs(args.rootfs)
    if not contents.debs or not contents.dists:
        print(f"sbom: {args.rootfs} holds no dpkg records or no Python distributions", file=sys.stderr)
        return 1
    image = ImageRef(name=args.image, tag=args.tag, image_id=args.image_id, platform=args.platform)
    text = render(build_bom(image=image, contents=contents, now=args.created or datetime.now(UTC)))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    partial = args.output.with_name(f".{args.output.name}.{os.getpid()}.partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, args.output)
    print(f"{args.output}: {len(contents.debs)} Debian packages, {len(contents.dists)} Python distributions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
