"""pykured.kube.client's transport: the in-cluster path (token re-read, errors) without the kubernetes
package."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pykured.core import errors
from pykured.kube import client as kube


def test_the_token_is_read_again_after_a_minute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token = tmp_path / "token"
    token.write_text("first")
    clock = [1000.0]
    monkeypatch.setattr("pykured.kube.client.time.monotonic", lambda: clock[0])
    read = kube._TokenFile(str(token))
    assert read() == "bearer first"
    token.write_text("second")
    clock[0] += kube.TOKEN_REFRESH - 1
    assert read() == "bearer first"
    clock[0] += 2
    assert read() == "bearer second"


def test_an_empty_token_file_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("")
    with pytest.raises(errors.KubeError, match="Token file exists but empty"):
        kube._TokenFile(str(tmp_path / "token"))


@pytest.mark.parametrize(
    ("host", "files", "message"),
    [
        ("", ("token", "ca.crt"), "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be defined"),
        ("10.0.0.1", ("ca.crt",), "token: no such file or directory"),
        ("10.0.0.1", ("token",), "Service certification file does not exist"),
    ],
)
def test_in_cluster_configuration_errors(
    tmp_path: Path, host: str, files: tuple[str, ...], message: str
) -> None:
    for name in files:
        (tmp_path / name).write_text("x")
    with pytest.raises(errors.KubeError, match=message):
        kube.Kube.in_cluster(token_dir=str(tmp_path), host=host, port="443")


def test_in_cluster_host_and_ipv6_host() -> None:
    assert kube._join_host_port("10.0.0.1", "443") == "10.0.0.1:443"
    assert kube._join_host_port("fd00::1", "443") == "[fd00::1]:443"


def test_an_agent_in_a_pod_never_imports_the_kubernetes_package(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("t")
    (tmp_path / "ca.crt").write_text("not read before the first request")
    code = (
        "import sys, pykured.cli.agent, pykured.agent.wiring\n"
        "from pykured.kube.client import Kube\n"
        f"k = Kube.in_cluster(token_dir={str(tmp_path)!r}, host='127.0.0.1', port='1')\n"
        "assert k.server == 'https://127.0.0.1:1', k.server\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('kubernetes', 'pydantic', 'yaml')))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_a_status_names_its_first_causes_bounded() -> None:
    import json as _json

    from pykured.kube.client import error_from_status

    body = {"kind": "Status", "message": "Cannot evict pod as it would violate the pod's disruption budget.",
            "details": {"causes": [{"type": "DisruptionBudget", "message": "The disruption budget p needs 1"}]
                        + [{"type": "x", "message": "m" * 5000}] * 50 + ["junk"]}}  # fmt: skip
    exc = error_from_status(429, _json.dumps(body))
    assert exc.causes[0] == ("DisruptionBudget", "The disruption budget p needs 1")
    assert len(exc.causes) == 4 and all(len(m) <= 300 for _, m in exc.causes)
    assert error_from_status(429, '{"details": {"causes": "x"}}').causes == ()
    assert error_from_status(429, "[" * 100_000).causes == ()
