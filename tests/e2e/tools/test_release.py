"""``tools/release --dry-run`` against a real registry (the CNCF distribution registry, TLS from a test CA).

The checkout's own image (``tools/image-build``) is pushed by digest, signed with a cosign key made for the
test, its platform's SBOM attested, and the chart pushed; then, as a user would: the signature verifies with
the public key, the SBOM attestation verifies and holds the SBOM, the chart is pulled back, and a changed
image does not verify (another manifest pushed to the same tag, or the tampered manifest by its digest), nor
does the real image with another key. The whole index (linux/amd64 and linux/arm64) is released as the
public release does, each platform's manifest signed and attested with its own SBOM. The SBOMs are the
image's own (``build/sbom``, made by ``tools/image-build sbom`` when missing), naming the image by the config
digest a push keeps.

Each proof is also broken once, to see it fail: each signature (the index's, each platform's) removed, then
replaced by another subject's — ``cosign verify`` of cosign 3 still passes on the attestations beside it, so a
signature is found by its predicate type, never by the exit code; the provenance and each SBOM attestation
removed; the chart's signature removed, and another chart pushed under its version; and an SBOM naming a
manifest the registry does not hold is refused by the release.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import secrets
import shutil
import ssl
import subprocess
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from pykured_dev.testenv.images import build_platform
from pykured_dev.testenv.procs import cache_dir, run_build
from pykured_dev.testenv.registry import Registry
from tests.tools.release_options import DRY_RUN_ONLY, PUBLIC, ROOT, load_release

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
release = load_release()
VERSION = release.version_of(ROOT / "pyproject.toml")
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
INDEX = "application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.list.v2+json"


def cosign_binary() -> str:
    path = cache_dir() / "bin" / "current" / "cosign"
    if not path.exists():
        run_build("release-build", ["cosign"], missing="cosign (tools/release-build cosign)")
    return str(path)


def helm_binary() -> str:
    path = cache_dir() / "bin" / "current" / "helm"
    if not path.exists():
        run_build("kured-build", ["helm"], missing="helm (tools/kured-build helm)")
    return str(path)


def image_ref() -> str:
    """This machine's image in this checkout's index, a single image (the index tests make their own)."""
    tool = str(ROOT / "tools" / "image-build")
    out = subprocess.run([tool, "ref", build_platform()], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        pytest.fail(f"the pykured image is not built (tools/image-build): {out.stderr.strip()}")
    return out.stdout.strip()


@pytest.fixture
def registry() -> Iterator[Registry]:
    with Registry() as reg:
        yield reg


def keypair(directory: Path, password: str) -> tuple[Path, Path]:
    directory.mkdir()
    subprocess.run(
        [cosign_binary(), "generate-key-pair", f"--output-key-prefix={directory / 'cosign'}"],
        env={**os.environ, "COSIGN_PASSWORD": password},
        capture_output=True,
        check=True,
        stdin=subprocess.DEVNULL,
    )
    return directory / "cosign.key", directory / "cosign.pub"


@functools.cache
def image_id(platform: str) -> str:
    tool = str(ROOT / "tools" / "image-build")
    ref = subprocess.run([tool, "ref", platform], capture_output=True, text=True, check=True).stdout.strip()
    inspect = [tool, "podman", "image", "inspect", "--format={{.Id}}", ref]
    return "sha256:" + subprocess.run(inspect, capture_output=True, text=True, check=True).stdout.strip()


@functools.cache
def real_sboms() -> dict[str, Path]:
    """This checkout's SBOMs as ``tools/image-build sbom`` writes them (``build/sbom/*.cdx.json``), by
    platform; made again unless each describes this build's image of its platform (``tools/dev image``,
    which ``.ci/run`` runs first, writes them)."""
    directory = ROOT / "build" / "sbom"

    def current() -> dict[str, Path]:
        found = {s.platform: s.path for s in release.find_sboms(directory, version=VERSION)}
        return {
            platform: path
            for platform, path in found.items()
            if release.sbom_image_id(json.loads(path.read_text())) == image_id(platform)
        }

    found = current()
    if set(found) != {"linux/amd64", "linux/arm64"}:
        tool = str(ROOT / "tools" / "image-build")
        made = subprocess.run([tool, "sbom"], capture_output=True, text=True, check=False, timeout=600)
        assert made.returncode == 0, made.stderr[-2000:]
        found = current()
    assert set(found) == {"linux/amd64", "linux/arm64"}, found
    return found


def sbom_dir(tmp: Path, platforms: Sequence[str] = ("linux/amd64",)) -> Path:
    """A directory with the real SBOMs of ``platforms`` only (the image released is that platform's)."""
    directory = tmp / "sbom"
    directory.mkdir(exist_ok=True)
    sboms = real_sboms()
    for platform in platforms:
        shutil.copyfile(sboms[platform], directory / sboms[platform].name)
    return directory


def attested_sboms(registry: Registry, pub: Path, ref: str) -> list[Any]:
    """The CycloneDX documents attested to ``ref`` that verify with ``pub``."""
    att = cosign(
        registry, "verify-attestation", f"--key={pub}", "--insecure-ignore-tlog=true", "--type=cyclonedx", ref
    )
    assert att.returncode == 0, att.stderr
    statements = [
        json.loads(base64.b64decode(json.loads(line)["payload"]))
        for line in att.stdout.splitlines()
        if line.strip()
    ]
    digest = ref.rpartition("@")[2].removeprefix("sha256:")
    assert all(s["subject"][0]["digest"]["sha256"] == digest for s in statements)
    return [s["predicate"] for s in statements if s["predicateType"] == "https://cyclonedx.org/bom"]


def cosign(registry: Registry, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SSL_CERT_FILE": str(registry.ca_file), "TUF_ROOT": "/nonexistent-tuf-root"}
    return subprocess.run(
        [cosign_binary(), *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def _request(
    registry: Registry, method: str, path: str, *, body: bytes | None = None, headers: dict[str, str]
) -> tuple[int, bytes, dict[str, str]]:
    context = ssl.create_default_context(cafile=str(registry.ca_file))
    req = urllib.request.Request(f"https://{registry.host}{path}", data=body, method=method, headers=headers)
    with urllib.request.urlopen(req, timeout=30, context=context) as resp:
        return int(resp.status), resp.read(), dict(resp.headers)


def get_manifest(
    registry: Registry, ref: str, *, accept: str = MANIFEST, repo: str = "pykured"
) -> dict[str, Any]:
    _, body, _ = _request(registry, "GET", f"/v2/{repo}/manifests/{ref}", headers={"Accept": accept})
    parsed = json.loads(body)
    assert isinstance(parsed, dict)
    return parsed


def put_manifest(
    registry: Registry,
    tag: str,
    manifest: dict[str, Any],
    *,
    media_type: str = MANIFEST,
    repo: str = "pykured",
) -> str:
    status, _, headers = _request(
        registry,
        "PUT",
        f"/v2/{repo}/manifests/{tag}",
        body=json.dumps(manifest).encode(),
        headers={"Content-Type": media_type},
    )
    assert status == 201
    return headers["Docker-Content-Digest"]


SIGNATURE = "https://sigstore.dev/cosign/sign/v1"
"""The predicate type of a cosign 3 signature (a DSSE bundle, like the attestations stored beside it)."""
OCI_INDEX = "application/vnd.oci.image.index.v1+json"


def verified(registry: Registry, pub: Path, digest: str, *, repo: str = "pykured") -> list[str]:
    """What ``cosign verify`` accepts for the image ``digest`` with ``pub``, by type. cosign 3 also accepts
    an attestation stored beside the image as if it were a signature, so a release's signature is proven by
    ``SIGNATURE`` among these, never by the exit code alone ([] when nothing verifies)."""
    out = cosign(
        registry, "verify", f"--key={pub}", "--insecure-ignore-tlog=true", "--output=json",
        f"{registry.host}/{repo}@{digest}",
    )  # fmt: skip
    if out.returncode != 0:
        return []
    entries = json.loads(out.stdout.strip().splitlines()[0])
    assert all(e["critical"]["image"]["docker-manifest-digest"] == digest for e in entries)
    return [str(e["critical"]["type"]) for e in entries]


def referrers(registry: Registry, digest: str, *, repo: str = "pykured") -> dict[str, Any]:
    """The referrers of ``digest`` as cosign stores them on a registry without the referrers API: an index
    under the tag ``sha256-<hex>``."""
    return get_manifest(registry, digest.replace(":", "-"), accept=OCI_INDEX, repo=repo)


def predicate_type(registry: Registry, entry: dict[str, Any], *, repo: str = "pykured") -> str:
    manifest = get_manifest(registry, entry["digest"], repo=repo)
    return str(manifest["annotations"]["dev.sigstore.bundle.predicateType"])


def with_signature_of(
    registry: Registry, digest: str, source: str | None, *, kind: str = SIGNATURE, repo: str = "pykured"
) -> None:
    """Replace ``digest``'s signature (or its attestation of predicate type ``kind``) among its referrers by
    ``source``'s (None: remove it); the others stay."""
    index = referrers(registry, digest, repo=repo)
    kept = [e for e in index["manifests"] if predicate_type(registry, e, repo=repo) != kind]
    if source is not None:
        theirs = referrers(registry, source, repo=repo)["manifests"]
        kept += [e for e in theirs if predicate_type(registry, e, repo=repo) == kind]
    tag = digest.replace(":", "-")
    put_manifest(registry, tag, {**index, "manifests": kept}, media_type=OCI_INDEX, repo=repo)


def run_release(
    registry: Registry,
    tmp: Path,
    key: Path,
    password: str,
    image: str,
    platforms: Sequence[str] = ("linux/amd64",),
) -> dict[str, Any]:
    out = release_run(registry, sbom_dir(tmp, platforms), key, password, image)
    assert out.returncode == 0, out.stderr[-4000:]
    assert password not in out.stdout + out.stderr
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert isinstance(summary, dict)
    return summary


def release_run(
    registry: Registry, sboms: Path, key: Path, password: str, image: str
) -> subprocess.CompletedProcess[str]:
    options = {
        "--registry": registry.host,
        "--ca": str(registry.ca_file),
        "--key": str(key),
        "--image": image,
    }
    assert set(options) | {"--dry-run"} == set(PUBLIC) | set(DRY_RUN_ONLY)
    argv = [str(ROOT / "tools" / "release"), "--dry-run", *(f"{k}={v}" for k, v in options.items())]
    out = subprocess.run(
        [
            *argv,
            f"--sbom-dir={sboms}",
            f"--cosign={cosign_binary()}",
            f"--helm={helm_binary()}",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "COSIGN_PASSWORD": password},
        check=False,
        timeout=800,
        stdin=subprocess.DEVNULL,
    )
    return out


def test_dry_run_release_verifies_and_a_changed_image_does_not(registry: Registry, tmp_path: Path) -> None:
    password = secrets.token_urlsafe(16)
    key, pub = keypair(tmp_path / "keys", password)
    summary = run_release(registry, tmp_path, key, password, image_ref())
    ref, digest = summary["reference"], summary["digest"]
    assert ref == f"{registry.host}/pykured@{digest}"
    assert summary["index"] is False and summary["platforms"] == {"linux/amd64": digest}
    assert summary["sboms"]

    # the signature verifies with the public key, by digest and by the tag (a signature, not only the
    # attestations cosign 3 also accepts)
    assert SIGNATURE in verified(registry, pub, digest)
    tagged = cosign(
        registry,
        "verify",
        f"--key={pub}",
        "--insecure-ignore-tlog=true",
        f"{registry.host}/pykured:{VERSION}",
    )
    assert tagged.returncode == 0, tagged.stderr

    # the SBOM attestation verifies and carries the image's own SBOM, which names the image the registry
    # holds: its config digest, which the push kept (the manifest's it changed)
    assert summary["sboms"] == [real_sboms()["linux/amd64"].name]
    released = json.loads((tmp_path / "sbom" / real_sboms()["linux/amd64"].name).read_text())
    assert released in attested_sboms(registry, pub, ref)
    config = get_manifest(registry, digest)["config"]["digest"]
    assert release.sbom_subject_digests(released) == {config}
    assert released["metadata"]["component"]["purl"].startswith(f"pkg:oci/pykured@{config}")

    prov = cosign(
        registry,
        "verify-attestation",
        f"--key={pub}",
        "--insecure-ignore-tlog=true",
        "--type=slsaprovenance1",
        ref,
    )
    assert prov.returncode == 0, prov.stderr

    # the chart comes back from the registry
    shown = subprocess.run(
        [
            helm_binary(),
            "show",
            "chart",
            f"oci://{registry.host}/charts/pykured",
            f"--version={VERSION}",
            f"--ca-file={registry.ca_file}",
        ],
        capture_output=True,
        text=True,
        check=False,
        env={
            **os.environ,
            "HELM_REGISTRY_CONFIG": str(tmp_path / "helm.json"),
            "HELM_CACHE_HOME": str(tmp_path / "hc"),
        },
    )
    assert shown.returncode == 0, shown.stderr
    assert "name: pykured" in shown.stdout and f"version: {VERSION}" in shown.stdout

    # the chart is signed (by its digest and its version's tag); broken on purpose: its signature removed,
    # and a chart of another content pushed under its version, neither verifies
    chart, chart_digest = "charts/pykured", summary["chart_digest"]
    assert SIGNATURE in verified(registry, pub, chart_digest, repo=chart)
    original = referrers(registry, chart_digest, repo=chart)
    with_signature_of(registry, chart_digest, None, repo=chart)
    assert SIGNATURE not in verified(registry, pub, chart_digest, repo=chart)
    put_manifest(registry, chart_digest.replace(":", "-"), original, media_type=OCI_INDEX, repo=chart)
    assert SIGNATURE in verified(registry, pub, chart_digest, repo=chart)
    packaged = get_manifest(registry, chart_digest, repo=chart)
    packaged["annotations"] = {**packaged.get("annotations", {}), "tampered": "yes"}
    other_chart = put_manifest(registry, VERSION, packaged, repo=chart)
    assert other_chart != chart_digest and not verified(registry, pub, other_chart, repo=chart)
    by_tag = cosign(
        registry,
        "verify",
        f"--key={pub}",
        "--insecure-ignore-tlog=true",
        f"{registry.host}/{chart}:{VERSION}",
    )
    assert by_tag.returncode != 0, by_tag.stdout

    # another key does not verify the real image
    _, other_pub = keypair(tmp_path / "other", secrets.token_urlsafe(16))
    other = cosign(registry, "verify", f"--key={other_pub}", "--insecure-ignore-tlog=true", ref)
    assert other.returncode != 0

    # a changed manifest pushed to the same tag: neither the tag nor its digest verifies; the release does
    manifest = get_manifest(registry, digest)
    manifest["annotations"] = {**manifest.get("annotations", {}), "tampered": "yes"}
    changed = put_manifest(registry, VERSION, manifest)
    assert changed != digest
    for target in (f"{registry.host}/pykured:{VERSION}", f"{registry.host}/pykured@{changed}"):
        bad = cosign(registry, "verify", f"--key={pub}", "--insecure-ignore-tlog=true", target)
        assert bad.returncode != 0, target
    assert SIGNATURE in verified(registry, pub, digest)

    # broken on purpose: an SBOM naming a manifest the registry does not hold is refused
    wrong = tmp_path / "wrong-sbom"
    wrong.mkdir()
    local = "sha256:" + "0" * 64
    naming_local = {**released, "metadata": {**released["metadata"], "component": {
        **released["metadata"]["component"], "purl": f"pkg:oci/pykured@{local}?arch=amd64&os=linux",
    }}}  # fmt: skip
    (wrong / real_sboms()["linux/amd64"].name).write_text(json.dumps(naming_local))
    with Registry() as elsewhere:  # a registry of its own: this one's tags stay as released
        refused = release_run(elsewhere, wrong, key, password, image_ref())
    assert refused.returncode != 0 and f"names {local}, which is neither" in refused.stderr, refused.stderr


def test_the_checkouts_index_is_released_whole_each_platform_signed_and_attested(
    registry: Registry, tmp_path: Path
) -> None:
    """The release itself: the checkout's amd64+arm64 index (``tools/image-build ref``) goes out by
    ``manifest push --all``; the index and each platform's manifest are signed, and each platform's manifest
    carries its own SBOM from ``build/sbom`` (``tools/image-build sbom``'s ``.cdx.json``) as a verified
    attestation."""
    index = subprocess.run(
        [str(ROOT / "tools" / "image-build"), "ref"], capture_output=True, text=True, check=True
    ).stdout.strip()
    password = secrets.token_urlsafe(16)
    key, pub = keypair(tmp_path / "keys", password)
    platforms = ("linux/amd64", "linux/arm64")
    summary = run_release(registry, tmp_path, key, password, index, platforms)
    assert summary["index"] is True
    assert sorted(summary["platforms"]) == list(platforms)
    sboms = real_sboms()
    assert sorted(summary["sboms"]) == sorted(p.name for p in sboms.values())
    listed = get_manifest(registry, summary["digest"], accept=INDEX)
    assert sorted(m["digest"] for m in listed["manifests"]) == sorted(summary["platforms"].values())
    subjects = [summary["digest"], *summary["platforms"].values()]
    for digest in subjects:  # the index and each platform carry a signature of their own, beside attestations
        types = verified(registry, pub, digest)
        assert types.count(SIGNATURE) == 1 and len(types) > 1, (digest, types)

    # broken on purpose, each signature: removed, the attestations still pass `cosign verify` but no
    # signature is found; another subject's in its place is refused; restored, it verifies again
    for digest in subjects:
        original = referrers(registry, digest)
        with_signature_of(registry, digest, None)
        assert SIGNATURE not in verified(registry, pub, digest), digest
        other = next(s for s in subjects if s != digest)
        with_signature_of(registry, digest, other)
        assert SIGNATURE not in verified(registry, pub, digest), digest
        put_manifest(registry, digest.replace(":", "-"), original, media_type=OCI_INDEX)
        assert SIGNATURE in verified(registry, pub, digest), digest

    # broken on purpose, each attestation: the provenance of the index and each platform's SBOM, removed,
    # no longer verify; restored, they do
    checks = [(summary["digest"], "https://slsa.dev/provenance/v1", "slsaprovenance1")]
    checks += [(d, "https://cyclonedx.org/bom", "cyclonedx") for d in summary["platforms"].values()]
    for digest, kind, flag in checks:
        ref = f"{registry.host}/pykured@{digest}"
        args = ("verify-attestation", f"--key={pub}", "--insecure-ignore-tlog=true", f"--type={flag}", ref)
        assert cosign(registry, *args).returncode == 0, (digest, kind)
        original = referrers(registry, digest)
        with_signature_of(registry, digest, None, kind=kind)
        assert cosign(registry, *args).returncode != 0, (digest, kind)
        put_manifest(registry, digest.replace(":", "-"), original, media_type=OCI_INDEX)
        assert cosign(registry, *args).returncode == 0, (digest, kind)
    for platform, digest in summary["platforms"].items():
        documents = attested_sboms(registry, pub, f"{registry.host}/pykured@{digest}")
        assert json.loads(sboms[platform].read_text()) in documents, platform
        others = [p for p in platforms if p != platform]
        assert all(json.loads(sboms[o].read_text()) not in documents for o in others), platform
