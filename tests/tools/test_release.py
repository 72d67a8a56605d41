"""``tools/release``'s decisions, and the public release workflow that runs it.

The steps themselves (push, sign, attest, verify, the chart) run against a real registry with real cosign
and helm in ``tests/e2e/tools/test_release.py``.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from pykured_dev import sbom as sbomtool
from tests.tools.release_options import DRY_RUN_ONLY, PUBLIC, ROOT, load_release

release = load_release()
Sbom = release.Sbom
WORKFLOW = ROOT / ".github" / "workflows" / "release.yaml"
D1 = "sha256:" + "1" * 64
D2 = "sha256:" + "2" * 64


def test_sbom_names_give_platform_and_cosign_type(tmp_path: Path) -> None:
    for name in (
        "pykured-0.1.0-linux-amd64.spdx.json",
        "pykured-0.1.0-linux-arm64.cyclonedx.json",
        "pykured-0.1.0-linux-riscv64.cdx.json",  # as tools/image-build sbom names them
        "pykured-0.2.0-linux-amd64.spdx.json",  # another version
        "pykured-0.1.0-linux-amd64.txt",
        "notes.json",
    ):
        (tmp_path / name).write_text("{}")
    (tmp_path / "pykured-0.1.0-linux-s390x.spdx.json").mkdir()  # not a file
    found = release.find_sboms(tmp_path, version="0.1.0")
    assert [(s.platform, s.predicate_type) for s in found] == [
        ("linux/amd64", "spdxjson"),
        ("linux/arm64", "cyclonedx"),
        ("linux/riscv64", "cyclonedx"),
    ]
    assert release.find_sboms(tmp_path / "absent", version="0.1.0") == []


def test_a_prerelease_version_is_parsed_whole() -> None:
    sbom = release.parse_sbom_name(Path("pykured-1.0.0-rc.1-linux-arm64.spdx.json"), version="1.0.0-rc.1")
    assert sbom is not None and sbom.platform == "linux/arm64"
    assert release.parse_sbom_name(Path("pykured-1.0.0-rc.1-linux-arm64.spdx.json"), version="1.0.0") is None


def test_index_platforms_skip_attestation_entries_and_keep_variants() -> None:
    index = {
        "manifests": [
            {"digest": D1, "platform": {"os": "linux", "architecture": "amd64"}},
            {"digest": D2, "platform": {"os": "linux", "architecture": "arm64", "variant": "v8"}},
            {"digest": "sha256:" + "3" * 64, "platform": {"os": "unknown", "architecture": "unknown"}},
            {"digest": 7, "platform": {"os": "linux", "architecture": "s390x"}},
            "garbage",
        ]
    }
    assert release.platforms_of_index(index) == {"linux/amd64": D1, "linux/arm64/v8": D2}
    with pytest.raises(release.ReleaseError):
        release.platforms_of_index({"layers": []})


def test_an_sbom_goes_to_its_platform_with_or_without_a_variant() -> None:
    amd, arm = (Sbom(path=Path("x"), os="linux", arch=a, format="spdx") for a in ("amd64", "arm64"))
    assert release.digest_for(amd, {"linux/amd64": D1, "linux/arm64/v8": D2}) == D1
    assert release.digest_for(arm, {"linux/amd64": D1, "linux/arm64/v8": D2}) == D2
    assert release.digest_for(arm, {"linux/amd64": D1}) is None
    assert release.digest_for(arm, {"linux/arm64/v7": D1, "linux/arm64/v8": D2}) is None  # ambiguous


def test_no_secret_reaches_a_tool_but_the_key_password_cosign_gets(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("COSIGN_PASSWORD", "REGISTRY_USERNAME", "REGISTRY_PASSWORD"):
        monkeypatch.setenv(name, "not-to-be-seen")
    run = release.Run(target=release.parse_registry("127.0.0.1:1"), dry_run=True, ca=None, work=Path("/x"))
    assert "not-to-be-seen" not in run.env().values()
    run.secret_env["COSIGN_PASSWORD"] = "p"
    assert {k for k, v in run.env(secret=True).items() if v in ("p", "not-to-be-seen")} == {"COSIGN_PASSWORD"}


@pytest.mark.parametrize(
    ("value", "loopback"),
    [
        ("127.0.0.1:5000", True),
        ("localhost:5000/team", True),
        ("ghcr.io/pykured", False),
        ("10.0.0.2", False),
    ],
)
def test_registry_targets(value: str, loopback: bool) -> None:
    target = release.parse_registry(value)
    assert target.is_loopback() is loopback
    assert target.image == f"{value}/pykured"
    assert target.chart == f"oci://{value}/charts/pykured"


@pytest.mark.parametrize("bad", ["", "ghcr.io/Pykured", "https://ghcr.io", "host:port", "a b", "ghcr.io//x"])
def test_bad_registries_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="not a registry"):
        release.parse_registry(bad)


def test_a_dry_run_refuses_a_registry_that_is_not_on_this_machine(capsys: pytest.CaptureFixture[str]) -> None:
    assert release.main(["--registry", "ghcr.io/pykured", "--dry-run"]) == 1
    assert "only to a registry on this machine" in capsys.readouterr().err


def test_keyless_signing_outside_ci_is_refused(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ACTIONS_ID_TOKEN_REQUEST_URL", raising=False)
    assert release.main(["--registry", "ghcr.io/pykured"]) == 1
    assert "OIDC" in capsys.readouterr().err


def test_provenance_names_the_commit_the_run_and_the_pushed_digest() -> None:
    env = {
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_REPOSITORY": "pykured/pykured",
        "GITHUB_RUN_ID": "42",
    }
    image = "ghcr.io/pykured/pykured"
    pred = release.provenance(image=image, digest=D1, version="0.1.0", env=env, commit="abc")
    assert pred["buildDefinition"]["resolvedDependencies"] == [
        {"uri": "git+https://github.com/pykured/pykured", "digest": {"gitCommit": "abc"}}
    ]
    assert pred["runDetails"]["builder"]["id"].endswith("/.github/workflows/release.yaml")
    assert (
        pred["runDetails"]["metadata"]["invocationId"] == "https://github.com/pykured/pykured/actions/runs/42"
    )
    assert pred["runDetails"]["byproducts"] == [
        {"name": "ghcr.io/pykured/pykured", "digest": {"sha256": "1" * 64}}
    ]
    json.dumps(pred)  # a predicate file is JSON


def test_signing_and_verifying_flags() -> None:
    run = release.Run(target=release.parse_registry("127.0.0.1:1"), dry_run=True, ca=None, work=Path("/x"))
    assert release.signing_flags(run) == ["--yes"]  # keyless
    assert any(f.startswith("--certificate-oidc-issuer=") for f in release.verify_flags(run))
    run.key, run.public_key = Path("/k/cosign.key"), Path("/k/cosign.pub")
    assert "--tlog-upload=false" in release.signing_flags(run)
    assert release.verify_flags(run) == ["--key=/k/cosign.pub", "--insecure-ignore-tlog=true"]
    run.dry_run = False
    assert "--tlog-upload=false" not in release.signing_flags(run)
    assert release.verify_flags(run) == ["--key=/k/cosign.pub"]


def test_the_key_password_stays_out_of_every_tool_but_cosign(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COSIGN_PASSWORD", "not-to-be-seen")
    run = release.Run(target=release.parse_registry("127.0.0.1:1"), dry_run=True, ca=None, work=Path("/x"))
    run.secret_env["COSIGN_PASSWORD"] = "not-to-be-seen"
    assert "COSIGN_PASSWORD" not in run.env()
    assert run.env(secret=True)["COSIGN_PASSWORD"] == "not-to-be-seen"


# -- the workflow ------------------------------------------------------------------------------------------


def _workflow() -> dict[Any, Any]:
    parsed = yaml.safe_load(WORKFLOW.read_text())
    assert isinstance(parsed, dict)
    return parsed


def _release_calls(workflow: dict[Any, Any]) -> list[list[str]]:
    calls = []
    for job in workflow["jobs"].values():
        for step in job["steps"]:
            for line in str(step.get("run", "")).splitlines():
                words = shlex.split(line)
                if "tools/release" in words:  # after the sudo that keeps its environment
                    calls.append(words[words.index("tools/release") :])
    return calls


def test_the_workflow_runs_on_a_tag_with_an_oidc_token_and_package_writes() -> None:
    wf = _workflow()
    on = wf["on"] if "on" in wf else wf[True]  # YAML 1.1 reads the key `on` as true
    assert on["push"]["tags"]
    (job,) = wf["jobs"].values()
    assert job["permissions"]["id-token"] == "write"
    assert job["permissions"]["packages"] == "write"
    assert wf["permissions"] == {"contents": "read"}


def test_the_workflow_publishes_with_tools_release_and_the_dry_runs_options() -> None:
    (call,) = _release_calls(_workflow())
    options = tuple(w.split("=", 1)[0] for w in call[1:] if w.startswith("--"))
    assert options == PUBLIC
    assert not set(options) & set(DRY_RUN_ONLY)  # never a dry run, a key file or a local image
    assert call[call.index("--registry") + 1] == "$REGISTRY"
    env = _workflow()["jobs"]["release"]["env"]
    assert env["REGISTRY"] == "ghcr.io/pykured"  # where Chart.yaml's artifacthub.io/images points
    kept = env["KEEP_ENV"].replace(" ", "").split(",")
    assert {"REGISTRY_PASSWORD", "ACTIONS_ID_TOKEN_REQUEST_URL", "ACTIONS_ID_TOKEN_REQUEST_TOKEN"} <= set(
        kept
    )
    parser_options = {o for a in release.parser()._actions for o in a.option_strings}
    assert set(PUBLIC) | set(DRY_RUN_ONLY) <= parser_options


def test_the_chart_carries_artifact_hub_annotations() -> None:
    chart = yaml.safe_load((ROOT / "charts" / "pykured" / "Chart.yaml").read_text())
    notes = chart["annotations"]
    (image,) = yaml.safe_load(notes["artifacthub.io/images"])
    assert image["image"] == f"ghcr.io/pykured/pykured:{chart['appVersion']}"
    assert set(image["platforms"]) == {"linux/amd64", "linux/arm64"}
    assert notes["artifacthub.io/license"] == "Apache-2.0"
    assert all({"kind", "description"} <= set(c) for c in yaml.safe_load(notes["artifacthub.io/changes"]))
    repo_meta = yaml.safe_load((ROOT / "charts" / "pykured" / "artifacthub-repo.yml").read_text())
    assert isinstance(repo_meta, dict)


def _cdx(image_id: str | None) -> dict[str, object]:
    props = [{"name": "dev.pykured:platform", "value": "linux/amd64"}]
    if image_id is not None:
        props.append({"name": release.SBOM_IMAGE_ID, "value": image_id})
    return {"bomFormat": "CycloneDX", "metadata": {"component": {"type": "container", "properties": props}}}


def test_an_sbom_of_another_build_is_refused() -> None:
    sbom = Sbom(path=Path("pykured-0.1.0-linux-amd64.cdx.json"), os="linux", arch="amd64", format="cdx")
    manifest = {"config": {"digest": D1}}
    pushed = "sha256:" + "9" * 64
    release.check_sbom_describes(sbom, _cdx(D1), manifest, digest=pushed)  # this build's
    release.check_sbom_describes(sbom, _cdx(None), manifest, digest=pushed)  # names no image: another tool's
    release.check_sbom_describes(sbom, {"spdxVersion": "SPDX-2.3"}, manifest, digest=pushed)
    with pytest.raises(release.ReleaseError, match=r"describes image sha256:2+, but the linux/amd64 image"):
        release.check_sbom_describes(sbom, _cdx(D2), manifest, digest=pushed)
    garbled: list[object] = [[], {"metadata": []}, {"metadata": {"component": {"properties": "x"}}}]
    for document in garbled:
        assert release.sbom_image_id(document) is None


def test_an_sbom_naming_a_manifest_the_registry_does_not_hold_is_refused() -> None:
    """The subject may name the pushed image's config digest and its manifest in the registry, nothing else
    (a local store's manifest digest, which a push changes, is refused)."""
    sbom = Sbom(path=Path("pykured-0.1.0-linux-amd64.cdx.json"), os="linux", arch="amd64", format="cdx")
    manifest = {"config": {"digest": D1}}
    pushed, local = "sha256:" + "9" * 64, "sha256:" + "8" * 64
    document = _cdx(D1)
    subject = document["metadata"]["component"]  # type: ignore[index]
    for purl_version in (D1, pushed):
        subject["purl"] = f"pkg:oci/pykured@{purl_version}?arch=amd64"
        release.check_sbom_describes(sbom, document, manifest, digest=pushed)
    subject["purl"] = f"pkg:oci/pykured@{local}?arch=amd64"
    with pytest.raises(release.ReleaseError, match=rf"names {local}, which is neither"):
        release.check_sbom_describes(sbom, document, manifest, digest=pushed)
    subject["purl"] = f"pkg:oci/pykured@{D1}"
    subject["properties"].append({"name": "dev.pykured:manifest-digest", "value": local})
    with pytest.raises(release.ReleaseError, match=r"neither the linux/amd64 image's config"):
        release.check_sbom_describes(sbom, document, manifest, digest=pushed)
    assert release.sbom_subject_digests([]) == set() == release.sbom_subject_digests({"metadata": []})


def test_the_sbom_tool_names_the_image_as_the_release_reads_it() -> None:
    assert f"{sbomtool._PROPERTY_PREFIX}image-id" == release.SBOM_IMAGE_ID


def test_the_workflow_writes_this_builds_sboms_before_it_releases() -> None:
    """``tools/dev image`` builds, smoke-tests and writes ``build/sbom`` (``tools/image-build build`` alone
    writes no SBOM, and ``tools/release`` refuses one of another build)."""
    steps = [s.get("run", "") for s in yaml.safe_load(WORKFLOW.read_text())["jobs"]["release"]["steps"]]
    (build,) = [i for i, run in enumerate(steps) if "tools/dev image" in run]
    (publish,) = [i for i, run in enumerate(steps) if "tools/release " in run]
    assert build < publish
    assert not [run for run in steps if "image-build build" in run]


def test_every_action_of_the_release_workflow_is_pinned_by_commit() -> None:
    """The job can write packages and mint OIDC tokens: a moved tag of an action it runs would run with those
    rights, so each ``uses:`` names a full commit (the version it is stays in a comment)."""
    workflow = yaml.safe_load(WORKFLOW.read_text())
    uses = [step["uses"] for job in workflow["jobs"].values() for step in job["steps"] if "uses" in step]
    assert uses, "the workflow runs actions"
    for use in uses:
        _action, _, ref = use.partition("@")
        assert len(ref) == 40 and all(c in "0123456789abcdef" for c in ref), use
