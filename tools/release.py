#!/usr/bin/env python3
"""tools/release: publish pykured's image and chart to an OCI registry, signed, with SBOMs and provenance.

    tools/release --registry HOST[:PORT][/PATH] [--ca FILE] [--dry-run] [--key FILE] [--image NAME]

Every step, in order (one stderr line each, with its time):

1. **push** the image built by ``tools/image-build`` (this checkout's index, ``tools/image-build ref``, or
   ``--image``) to ``<registry>/pykured:<version>``: ``podman manifest push --all`` when it is a manifest
   list (an amd64+arm64 index), ``podman push`` when it is a single image; the pushed digest is what every
   later step names (never the tag).
2. **sign** that digest with cosign: with ``--key`` (a cosign key file; its password in ``COSIGN_PASSWORD``)
   or, without one, keylessly (``cosign sign --yes``: the CI job's OIDC identity, a Fulcio certificate, the
   Rekor transparency log). An index is signed with ``--recursive``: the index and each platform's manifest.
3. **attest** each platform's SBOM found in ``build/sbom/pykured-<version>-<os>-<arch>.<format>.json``
   (``cdx``, as ``tools/image-build sbom`` writes them, or ``cyclonedx``, or ``spdx``) to that platform's
   manifest digest (``cosign attest --type spdxjson`` or
   ``cyclonedx``: a signed in-toto attestation stored as an OCI artifact beside the image, which
   ``cosign verify-attestation`` checks and returns), and a SLSA provenance predicate made here (what was
   built, from which commit, by which run) to the pushed digest (``--type slsaprovenance1``).
4. **verify** the signature and the attestations as a user would (``cosign verify``,
   ``cosign verify-attestation``), so a release that users could not verify fails here.
5. **chart**: ``helm package charts/pykured`` at the version, ``helm push`` to ``oci://<registry>/charts``,
   and the pushed chart signed and verified as the image is (Artifact Hub shows a cosign-signed chart as
   signed); ``charts/pykured/artifacthub-repo.yml`` beside it as Artifact Hub's repository metadata.

The last line on standard output is a JSON summary (the image reference and digest, each platform's digest,
the chart reference, the public key when one was used). Secrets are never printed: the key's password is
read from the environment and passed only in the environment of cosign.

``--dry-run`` runs every one of those steps against a registry on this machine (loopback only: it refuses
any other host, so nothing is ever published by it), with a key instead of keyless signing (``--key``, or a
key pair made for the run with ``cosign generate-key-pair`` and a random password) and without the public
transparency log (``--tlog-upload=false``; verification with ``--insecure-ignore-tlog``). ``--ca`` is the
registry's CA certificate (PEM) when it is not publicly trusted: podman, cosign and helm are told to trust
it. Registry credentials, when the registry wants them, come from ``REGISTRY_USERNAME`` and
``REGISTRY_PASSWORD`` (the public release: the CI job's token for ghcr.io); podman and helm are logged in
with them for the run only, through a private configuration directory.

cosign is ``tools/release-build cosign``'s, helm ``tools/kured-build helm``'s (both built when missing) and
podman is ``tools/image-build podman`` (the image's private store). Needs Python 3.11 and the standard
library only.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import datetime
import hashlib
import ipaddress
import json
import os
import re
import secrets
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IMAGE_NAME = "pykured"
CHART_PATH = "charts"
SBOM_FORMATS = {"cdx": "cyclonedx", "cyclonedx": "cyclonedx", "spdx": "spdxjson"}
"""An SBOM file's format (the ``<format>`` in its name) → cosign's predicate type for it."""
SBOM_RE = re.compile(
    r"^pykured-(?P<version>[0-9A-Za-z.+-]+?)-(?P<os>[a-z0-9]+)-(?P<arch>[a-z0-9]+)"
    r"\.(?P<format>cdx|cyclonedx|spdx)\.json$"
)
INDEX_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)
MANIFEST_TYPES = (
    *INDEX_TYPES,
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
MAX_MANIFEST = 4 * 1024 * 1024
SECRET_ENV = ("COSIGN_PASSWORD", "REGISTRY_USERNAME", "REGISTRY_PASSWORD")
"""Never passed on to a tool's environment (cosign alone gets the key's password: ``Run.secret_env``)."""


class ReleaseError(RuntimeError):
    """A step failed; the message says which and why (never a secret)."""


# -- pure decisions ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Sbom:
    """One platform's SBOM file."""

    path: Path
    os: str
    arch: str
    format: str

    @property
    def platform(self) -> str:
        return f"{self.os}/{self.arch}"

    @property
    def predicate_type(self) -> str:
        return SBOM_FORMATS[self.format]


def parse_sbom_name(path: Path, *, version: str) -> Sbom | None:
    """The SBOM a file name describes, for this version; None for any other file."""
    match = SBOM_RE.match(path.name)
    if match is None or match["version"] != version:
        return None
    return Sbom(path=path, os=match["os"], arch=match["arch"], format=match["format"])


def find_sboms(directory: Path, *, version: str) -> list[Sbom]:
    """Every SBOM of ``version`` in ``directory`` (none when it does not exist), sorted by name."""
    if not directory.is_dir():
        return []
    found = (parse_sbom_name(p, version=version) for p in sorted(directory.iterdir()) if p.is_file())
    return [s for s in found if s is not None]


@dataclass(frozen=True, slots=True)
class Target:
    """Where a release goes: ``<registry>/pykured`` and ``oci://<registry>/charts``."""

    registry: str

    @property
    def host(self) -> str:
        return self.registry.split("/", 1)[0]

    @property
    def image(self) -> str:
        return f"{self.registry}/{IMAGE_NAME}"

    @property
    def chart_repo(self) -> str:
        return f"oci://{self.registry}/{CHART_PATH}"

    @property
    def chart(self) -> str:
        return f"{self.chart_repo}/{IMAGE_NAME}"

    def is_loopback(self) -> bool:
        name = self.host.rsplit(":", 1)[0] if not self.host.startswith("[") else self.host[1:].split("]")[0]
        if name == "localhost":
            return True
        try:
            return ipaddress.ip_address(name).is_loopback
        except ValueError:
            return False


def parse_registry(value: str) -> Target:
    """``HOST[:PORT][/PATH]``, lower-case path components as OCI references require; raises ValueError."""
    if not re.fullmatch(r"[A-Za-z0-9.\-]+(:[0-9]{1,5})?(/[a-z0-9._\-]+)*", value):
        raise ValueError(f"not a registry HOST[:PORT][/PATH]: {value!r}")
    return Target(value)


def platforms_of_index(index: Mapping[str, object]) -> dict[str, str]:
    """``os/arch`` (``/variant`` when there is one) → manifest digest, from an OCI index or Docker list."""
    out: dict[str, str] = {}
    manifests = index.get("manifests")
    if not isinstance(manifests, list):
        raise ReleaseError("the pushed index has no manifests")
    for entry in manifests:
        if not isinstance(entry, dict):
            continue
        digest, platform = entry.get("digest"), entry.get("platform")
        if not isinstance(digest, str) or not isinstance(platform, dict):
            continue
        os_, arch, variant = platform.get("os"), platform.get("architecture"), platform.get("variant")
        if os_ == "unknown" or not isinstance(os_, str) or not isinstance(arch, str):
            continue  # attestation manifests in BuildKit's layout carry os "unknown"
        out[f"{os_}/{arch}" + (f"/{variant}" if isinstance(variant, str) and variant else "")] = digest
    return out


def digest_for(sbom: Sbom, platforms: Mapping[str, str]) -> str | None:
    """The manifest digest an SBOM describes: its ``os/arch``, or that platform with a variant
    (``linux/arm64/v8``) when the index names one; None when the image has no such platform."""
    if sbom.platform in platforms:
        return platforms[sbom.platform]
    found = [d for p, d in platforms.items() if p.startswith(f"{sbom.platform}/")]
    return found[0] if len(found) == 1 else None


SBOM_IMAGE_ID = "dev.pykured:image-id"
"""The property ``tools/image-build sbom`` names the described image's ID by (its config's digest)."""


def sbom_image_id(document: object) -> str | None:
    """The image ID a CycloneDX document of ``tools/image-build sbom`` says it describes; None when it
    names none (another tool's SBOM, or SPDX)."""
    metadata = document.get("metadata") if isinstance(document, dict) else None
    component = metadata.get("component") if isinstance(metadata, dict) else None
    properties = component.get("properties") if isinstance(component, dict) else None
    for prop in properties if isinstance(properties, list) else []:
        if (
            isinstance(prop, dict)
            and prop.get("name") == SBOM_IMAGE_ID
            and isinstance(prop.get("value"), str)
        ):
            return str(prop["value"])
    return None


_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def sbom_subject_digests(document: object) -> set[str]:
    """Every digest a CycloneDX document's subject (``metadata.component``) names: in its version, its
    package URL and its properties' values."""
    metadata = document.get("metadata") if isinstance(document, dict) else None
    component = metadata.get("component") if isinstance(metadata, dict) else None
    if not isinstance(component, dict):
        return set()
    texts = [component.get("version"), component.get("purl")]
    properties = component.get("properties")
    texts += (
        [p.get("value") for p in properties if isinstance(p, dict)] if isinstance(properties, list) else []
    )
    return {d for t in texts if isinstance(t, str) for d in _DIGEST.findall(t)}


def check_sbom_describes(
    sbom: Sbom, document: object, manifest: Mapping[str, object], *, digest: str
) -> None:
    """Refuse an SBOM made for another build than the platform image pushed (its image ID is not the
    pushed manifest's config digest): a stale ``build/sbom`` is never attested to a release. Refuse too an
    SBOM whose subject names any digest but the pushed image's (its config digest, or ``digest``, the
    manifest the registry holds): a scanner matching SBOMs to images by digest finds the image it names."""
    named = sbom_image_id(document)
    config = manifest.get("config")
    pushed = config.get("digest") if isinstance(config, dict) else None
    if named is not None and named != pushed:
        raise ReleaseError(
            f"{sbom.path.name} describes image {named}, but the {sbom.platform} image released is {pushed}: "
            "make the SBOMs of this build first (tools/image-build sbom)"
        )
    others = sorted(sbom_subject_digests(document) - {pushed, digest})
    if others:
        raise ReleaseError(
            f"{sbom.path.name} names {', '.join(others)}, which is neither the {sbom.platform} image's "
            f"config ({pushed}) nor its manifest in the registry ({digest}): an SBOM names the image released"
        )


def provenance(
    *, image: str, digest: str, version: str, env: Mapping[str, str], commit: str
) -> dict[str, object]:
    """A SLSA provenance v1 predicate for the pushed image (https://slsa.dev/spec/v1.0/provenance)."""
    server = env.get("GITHUB_SERVER_URL", "")
    repo = env.get("GITHUB_REPOSITORY", "")
    run = env.get("GITHUB_RUN_ID", "")
    builder = (
        f"{server}/{repo}/.github/workflows/release.yaml" if server and repo else "tools/release (local)"
    )
    return {
        "buildDefinition": {
            "buildType": "https://pykured.dev/release/v1",
            "externalParameters": {"version": version, "image": image},
            "internalParameters": {"workflow_ref": env.get("GITHUB_WORKFLOW_REF", "")},
            "resolvedDependencies": [
                {
                    "uri": f"git+{server}/{repo}" if server and repo else "git+local",
                    "digest": {"gitCommit": commit},
                }
            ],
        },
        "runDetails": {
            "builder": {"id": builder},
            "metadata": {
                "invocationId": f"{server}/{repo}/actions/runs/{run}" if run else "local",
                "startedOn": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            },
            "byproducts": [{"name": image, "digest": {"sha256": digest.removeprefix("sha256:")}}],
        },
    }


# -- the tools ---------------------------------------------------------------------------------------------


def _tool(script: str, name: str) -> str:
    """``tools/<script> <name>``'s binary (the script prints its bin directory last)."""
    out = subprocess.run([str(ROOT / "tools" / script), name], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise ReleaseError(f"tools/{script} {name} failed:\n{out.stderr[-2000:]}")
    return str(Path(out.stdout.strip().splitlines()[-1]) / name)


@dataclass
class Run:
    """One release run: its target, its tools, its private directory and the environment of each tool."""

    target: Target
    dry_run: bool
    ca: Path | None
    work: Path
    cosign: str = ""
    helm: str = ""
    key: Path | None = None
    public_key: Path | None = None
    secret_env: dict[str, str] = field(default_factory=dict)
    """What cosign alone gets in its environment (the key's password); never printed."""

    def env(self, *, secret: bool = False) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in SECRET_ENV}  # tools read login()'s files
        env.update(
            HELM_REGISTRY_CONFIG=str(self.work / "helm" / "registry.json"),
            HELM_CACHE_HOME=str(self.work / "helm" / "cache"),
            HELM_CONFIG_HOME=str(self.work / "helm" / "config"),
            HELM_DATA_HOME=str(self.work / "helm" / "data"),
            DOCKER_CONFIG=str(self.work / "docker"),
        )
        env["REGISTRY_AUTH_FILE"] = str(self.work / "docker" / "config.json")  # podman's (login())
        if self.dry_run:  # nothing of sigstore's public services is reached: no TUF root to fetch either
            env["TUF_ROOT"] = str(self.work / "tuf")
        if self.ca is not None:  # Go's TLS (cosign, helm) trusts this CA for the registry
            env["SSL_CERT_FILE"] = str(self.ca)
        if secret:
            env.update(self.secret_env)
        return env

    def podman(self) -> list[str]:
        return [str(ROOT / "tools" / "image-build"), "podman"]

    def cert_dir(self) -> list[str]:
        if self.ca is None:
            return []
        d = self.work / "certs"
        d.mkdir(exist_ok=True)
        shutil.copy(self.ca, d / "ca.crt")
        return [f"--cert-dir={d}"]

    def run(self, argv: Sequence[str], *, secret: bool = False, what: str) -> str:
        out = subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            env=self.env(secret=secret),
            check=False,
            cwd=self.work,
            stdin=subprocess.DEVNULL,
        )
        if out.returncode != 0:
            raise ReleaseError(f"{what} failed (exit {out.returncode}):\n{out.stderr[-3000:]}")
        return out.stdout


@contextlib.contextmanager
def step(name: str) -> Iterator[None]:
    start = time.monotonic()
    yield
    print(f"release: {name:<28} {time.monotonic() - start:6.1f} s", file=sys.stderr)


# -- the steps ---------------------------------------------------------------------------------------------


def version_of(pyproject: Path) -> str:
    match = re.search(r'^version = "([^"]+)"$', pyproject.read_text(encoding="utf-8"), re.MULTILINE)
    if match is None:
        raise ReleaseError(f"no version in {pyproject}")
    return match[1]


def is_index(run: Run, image: str) -> bool:
    """Whether the local image is a manifest list (``podman manifest exists``) rather than one image."""
    probe = subprocess.run(
        [*run.podman(), "manifest", "exists", image], capture_output=True, check=False, env=run.env()
    )
    if probe.returncode == 0:
        return True
    has = subprocess.run(
        [*run.podman(), "image", "exists", image], capture_output=True, check=False, env=run.env()
    )
    if has.returncode != 0:
        raise ReleaseError(f"no image {image} in tools/image-build's store (run tools/image-build)")
    return False


def login(run: Run) -> None:
    """podman and helm logged in with ``REGISTRY_USERNAME``/``REGISTRY_PASSWORD`` (when set), for this run."""
    user, password = os.environ.get("REGISTRY_USERNAME"), os.environ.get("REGISTRY_PASSWORD")
    (run.work / "docker").mkdir(exist_ok=True)
    auth: dict[str, object] = {"auths": {}}
    if user and password:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        auth = {"auths": {run.target.host: {"auth": token}}}
    path = run.work / "docker" / "config.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(auth, handle)
    (run.work / "helm").mkdir(exist_ok=True)
    shutil.copy(path, run.work / "helm" / "registry.json")


def push(run: Run, *, image: str, version: str, index: bool) -> str:
    """Push the image (all of an index's images) to ``<target>/pykured:<version>``; the pushed digest."""
    dest = f"docker://{run.target.image}:{version}"
    digest_file = run.work / "digest"
    verb = ["manifest", "push", "--all"] if index else ["push"]
    run.run(
        [*run.podman(), *verb, *run.cert_dir(), f"--digestfile={digest_file}", image, dest],
        what=f"podman {' '.join(verb)}",
    )
    digest = digest_file.read_text(encoding="utf-8").strip()
    if not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
        raise ReleaseError(f"podman wrote no digest for the push: {digest[:80]!r}")
    return digest


def _registry(
    run: Run, method: str, path: str, *, body: bytes | None = None, headers: Mapping[str, str] = {}
) -> tuple[bytes, Mapping[str, str]]:
    """One request to the target registry's API (``path`` under ``https://<host>``, or an absolute upload
    location), anonymous or, on a Bearer challenge, with a token for the run's credentials."""
    host = run.target.host
    url = path if path.startswith("https://") else f"https://{host}{path}"
    context = ssl.create_default_context(cafile=str(run.ca) if run.ca else None)
    sent = dict(headers)
    for _ in range(2):
        req = urllib.request.Request(url, data=body, method=method, headers=sent)  # noqa: S310 - https only
        try:
            with urllib.request.urlopen(req, timeout=60, context=context) as resp:  # noqa: S310 - https only
                answer = resp.read(MAX_MANIFEST + 1)
                if len(answer) > MAX_MANIFEST:
                    raise ReleaseError(f"{method} {path}: the answer is over 4 MiB")
                return answer, resp.headers
        except urllib.error.HTTPError as err:
            challenge = err.headers.get("WWW-Authenticate", "") if err.code == 401 else ""
            if not challenge.startswith("Bearer ") or "Authorization" in sent:
                raise ReleaseError(f"{method} {path}: HTTP {err.code}") from None
            sent["Authorization"] = f"Bearer {_token(challenge, context=context)}"
        except OSError as err:
            raise ReleaseError(f"{method} {path}: {err}") from None
    raise ReleaseError(f"{method} {path}: refused after authenticating")


def fetch_manifest(run: Run, *, digest: str) -> dict[str, object]:
    """The pushed manifest, read from the registry."""
    path = run.target.image.split("/", 1)[1]
    body, _ = _registry(
        run, "GET", f"/v2/{path}/manifests/{digest}", headers={"Accept": ", ".join(MANIFEST_TYPES)}
    )
    parsed = json.loads(body)
    if not isinstance(parsed, dict):
        raise ReleaseError("the pushed manifest is not a JSON object")
    return parsed


ARTIFACTHUB_TAG = "artifacthub.io"
ARTIFACTHUB_CONFIG = "application/vnd.cncf.artifacthub.config.v1+yaml"
ARTIFACTHUB_LAYER = "application/vnd.cncf.artifacthub.repository-metadata.layer.v1.yaml"


def push_artifacthub_metadata(run: Run, *, data: bytes) -> str:
    """``artifacthub-repo.yml`` as the OCI artifact Artifact Hub reads beside the chart (its tag
    ``artifacthub.io``: https://artifacthub.io/docs/topics/repositories/helm-charts/); its digest."""
    repo = f"{run.target.registry.split('/', 1)[1]}/" if "/" in run.target.registry else ""
    name = f"{repo}{CHART_PATH}/{IMAGE_NAME}"
    blobs = []
    for blob in (b"", data):
        digest = "sha256:" + hashlib.sha256(blob).hexdigest()
        _, started = _registry(run, "POST", f"/v2/{name}/blobs/uploads/", body=b"")
        location = started.get("Location", "")
        if not location:
            raise ReleaseError("the registry gave no upload location")
        if not location.startswith("https://"):
            location = f"https://{run.target.host}{location}"
        sep = "&" if "?" in location else "?"
        _registry(
            run,
            "PUT",
            f"{location}{sep}digest={urllib.parse.quote(digest)}",
            body=blob,
            headers={"Content-Type": "application/octet-stream"},
        )
        blobs.append({"digest": digest, "size": len(blob)})
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": ARTIFACTHUB_CONFIG, **blobs[0]},
        "layers": [
            {
                "mediaType": ARTIFACTHUB_LAYER,
                **blobs[1],
                "annotations": {"org.opencontainers.image.title": "artifacthub-repo.yml"},
            }
        ],
    }
    _, put = _registry(
        run,
        "PUT",
        f"/v2/{name}/manifests/{ARTIFACTHUB_TAG}",
        body=json.dumps(manifest).encode(),
        headers={"Content-Type": "application/vnd.oci.image.manifest.v1+json"},
    )
    return str(put.get("Docker-Content-Digest", ""))


def _token(challenge: str, *, context: ssl.SSLContext) -> str:
    params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
    realm = params.pop("realm", "")
    if not realm.startswith("https://"):
        raise ReleaseError("the registry's token realm is not https")
    query = "&".join(f"{k}={urllib.parse.quote(v)}" for k, v in params.items())
    req = urllib.request.Request(f"{realm}?{query}")  # noqa: S310 - realm checked https above
    user, password = os.environ.get("REGISTRY_USERNAME"), os.environ.get("REGISTRY_PASSWORD")
    if user and password:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        req.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(req, timeout=30, context=context) as resp:  # noqa: S310 - https
            answer = json.loads(resp.read(65536))
    except (OSError, ValueError):
        raise ReleaseError("the registry's token service did not answer") from None
    value = answer.get("token") or answer.get("access_token") if isinstance(answer, dict) else None
    if not isinstance(value, str):
        raise ReleaseError("the registry's token service gave no token")
    return value


def platforms(run: Run, *, image: str, digest: str, index: bool) -> dict[str, str]:
    """``os/arch`` → the digest its SBOM is attached to: each child of an index, or the one image."""
    if index:
        return platforms_of_index(fetch_manifest(run, digest=digest))
    out = run.run(
        [*run.podman(), "image", "inspect", "--format={{.Os}}/{{.Architecture}}", image],
        what="podman image inspect",
    )
    return {out.strip(): digest}


def make_key(run: Run) -> None:
    """A key pair for this run (``cosign generate-key-pair``), its password random unless one is given."""
    run.secret_env["COSIGN_PASSWORD"] = os.environ.get("COSIGN_PASSWORD") or secrets.token_urlsafe(24)
    keys = run.work / "keys"
    keys.mkdir()
    run.run(
        [run.cosign, "generate-key-pair", f"--output-key-prefix={keys / 'cosign'}"],
        secret=True,
        what="cosign generate-key-pair",
    )
    run.key, run.public_key = keys / "cosign.key", keys / "cosign.pub"


def public_key_of(run: Run, key: Path) -> Path:
    """The public half of a cosign key file (``cosign public-key``)."""
    pem = run.run([run.cosign, "public-key", f"--key={key}"], secret=True, what="cosign public-key")
    path = run.work / "cosign.pub"
    path.write_text(pem, encoding="utf-8")
    return path


def signing_flags(run: Run) -> list[str]:
    if run.key is None:
        return ["--yes"]  # keyless: the CI job's OIDC identity
    flags = [f"--key={run.key}", "--yes"]
    if run.dry_run:
        flags += ["--tlog-upload=false", "--use-signing-config=false"]
    return flags


def verify_flags(run: Run) -> list[str]:
    if run.public_key is None:  # keyless: the identity the public release signs with
        repo = os.environ.get("GITHUB_REPOSITORY", "pykured/pykured")
        server = os.environ.get("GITHUB_SERVER_URL", "https://github.com")
        return [
            f"--certificate-identity-regexp=^{re.escape(server)}/{re.escape(repo)}/\\.github/workflows/release\\.yaml@",
            "--certificate-oidc-issuer=https://token.actions.githubusercontent.com",
        ]
    flags = [f"--key={run.public_key}"]
    if run.dry_run:
        flags += ["--insecure-ignore-tlog=true"]
    return flags


def sign(run: Run, *, ref: str, index: bool) -> None:
    run.run(
        [run.cosign, "sign", *signing_flags(run), *(["--recursive"] if index else []), ref],
        secret=True,
        what="cosign sign",
    )


def attest(run: Run, *, ref: str, predicate: Path, kind: str) -> None:
    run.run(
        [run.cosign, "attest", *signing_flags(run), f"--type={kind}", f"--predicate={predicate}", ref],
        secret=True,
        what=f"cosign attest --type={kind}",
    )


def verify(run: Run, *, ref: str, attestations: Sequence[tuple[str, str]]) -> None:
    run.run([run.cosign, "verify", *verify_flags(run), ref], what="cosign verify")
    for kind, at in attestations:
        run.run(
            [run.cosign, "verify-attestation", *verify_flags(run), f"--type={kind}", at],
            what=f"cosign verify-attestation --type={kind}",
        )


def chart(run: Run, *, version: str) -> str:
    """``helm package`` charts/pykured at ``version``, ``helm push`` to the target; the pushed digest."""
    out = run.work / "chart"
    out.mkdir()
    run.run(
        [
            run.helm,
            "package",
            str(ROOT / "charts" / "pykured"),
            f"--version={version}",
            f"--app-version={version}",
            f"--destination={out}",
        ],
        what="helm package",
    )
    (package,) = out.glob("pykured-*.tgz")
    ca = [f"--ca-file={run.ca}"] if run.ca else []
    pushed = subprocess.run(
        [run.helm, "push", str(package), run.target.chart_repo, *ca],
        capture_output=True,
        text=True,
        env=run.env(),
        check=False,
        cwd=run.work,
    )
    if pushed.returncode != 0:
        raise ReleaseError(f"helm push failed:\n{pushed.stderr[-2000:]}")
    match = re.search(r"Digest: (sha256:[0-9a-f]{64})", pushed.stdout + pushed.stderr)
    return match[1] if match else ""


def publish_chart(run: Run, *, version: str) -> str:
    """The chart pushed, signed and verified; Artifact Hub's metadata beside it. The chart's digest."""
    with step("chart"):
        digest = chart(run, version=version)
        if not digest:
            raise ReleaseError("helm push reported no digest for the chart")
        ref = f"{run.target.registry}/{CHART_PATH}/{IMAGE_NAME}@{digest}"
        sign(run, ref=ref, index=False)
        verify(run, ref=ref, attestations=())
    with step("artifact hub metadata"):
        push_artifacthub_metadata(
            run, data=(ROOT / "charts" / "pykured" / "artifacthub-repo.yml").read_bytes()
        )
    return digest


def git_commit() -> str:
    out = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    )
    return out.stdout.strip() if out.returncode == 0 else ""


def checkout_image() -> str:
    """This checkout's image index (``tools/image-build ref``), never ``localhost/pykured:<version>``, which
    whichever checkout on this machine built last has tagged."""
    out = subprocess.run(
        [str(ROOT / "tools" / "image-build"), "ref"], capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise ReleaseError(f"no image of this checkout to release: {out.stderr.strip()} (tools/dev image)")
    return out.stdout.strip()


def release(args: argparse.Namespace) -> dict[str, object]:
    target = parse_registry(args.registry)
    if args.dry_run and not target.is_loopback():
        raise ReleaseError(f"--dry-run publishes only to a registry on this machine, not {target.host}")
    if not args.dry_run and args.key is None and not os.environ.get("ACTIONS_ID_TOKEN_REQUEST_URL"):
        raise ReleaseError("keyless signing needs the CI job's OIDC token (or give --key, or --dry-run)")
    version = version_of(ROOT / "pyproject.toml")
    image = args.image or checkout_image()
    with tempfile.TemporaryDirectory(prefix="pykured-release-") as tmp:
        run = Run(target=target, dry_run=args.dry_run, ca=args.ca, work=Path(tmp))
        login(run)
        run.cosign = args.cosign or _tool("release-build", "cosign")
        run.helm = args.helm or _tool("kured-build", "helm")
        if args.key is not None:
            if "COSIGN_PASSWORD" in os.environ:
                run.secret_env["COSIGN_PASSWORD"] = os.environ["COSIGN_PASSWORD"]
            run.key = args.key.resolve()
            run.public_key = public_key_of(run, run.key)
        elif args.dry_run:
            make_key(run)
        index = is_index(run, image)
        with step("push " + ("index" if index else "image")):
            digest = push(run, image=image, version=version, index=index)
        ref = f"{target.image}@{digest}"
        by_platform = platforms(run, image=image, digest=digest, index=index)
        with step("sign"):
            sign(run, ref=ref, index=index)
        attested: list[tuple[str, str]] = []
        sboms = find_sboms(args.sbom_dir, version=version)
        with step(f"attest {len(sboms)} SBOM(s)"):
            for sbom in sboms:
                at = digest_for(sbom, by_platform)
                if at is None:
                    raise ReleaseError(f"{sbom.path.name}: the image has no {sbom.platform} platform")
                document = json.loads(sbom.path.read_text(encoding="utf-8"))
                check_sbom_describes(sbom, document, fetch_manifest(run, digest=at), digest=at)
                attest(run, ref=f"{target.image}@{at}", predicate=sbom.path, kind=sbom.predicate_type)
                attested.append((sbom.predicate_type, f"{target.image}@{at}"))
        with step("attest provenance"):
            predicate = run.work / "provenance.json"
            predicate.write_text(
                json.dumps(
                    provenance(
                        image=target.image,
                        digest=digest,
                        version=version,
                        env=os.environ,
                        commit=git_commit(),
                    )
                ),
                encoding="utf-8",
            )
            attest(run, ref=ref, predicate=predicate, kind="slsaprovenance1")
            attested.append(("slsaprovenance1", ref))
        with step("verify"):
            verify(run, ref=ref, attestations=attested)
        chart_digest = publish_chart(run, version=version)
        public = run.public_key.read_text(encoding="utf-8") if run.public_key else ""
    return {
        "image": target.image,
        "digest": digest,
        "reference": ref,
        "index": index,
        "platforms": by_platform,
        "sboms": [s.path.name for s in sboms],
        "chart": target.chart,
        "chart_version": version,
        "chart_digest": chart_digest,
        "public_key": public,
    }


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tools/release", description=__doc__.split("\n\n")[0] if __doc__ else "")
    p.add_argument("--registry", required=True, help="HOST[:PORT][/PATH] (e.g. ghcr.io/pykured)")
    p.add_argument("--ca", type=Path, help="the registry's CA certificate (PEM)")
    p.add_argument("--dry-run", action="store_true", help="every step, against a registry on this machine")
    p.add_argument("--key", type=Path, help="a cosign key file (password in COSIGN_PASSWORD)")
    p.add_argument(
        "--image",
        help="the local image or manifest list (default this checkout's index: tools/image-build ref)",
    )
    p.add_argument("--sbom-dir", type=Path, default=ROOT / "build" / "sbom", help="default build/sbom")
    p.add_argument("--cosign", help=argparse.SUPPRESS)
    p.add_argument("--helm", help=argparse.SUPPRESS)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        summary = release(args)
    except (ReleaseError, ValueError) as err:
        print(f"release: FAIL: {err}", file=sys.stderr)
        return 1
    print(json.dumps(summary, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
