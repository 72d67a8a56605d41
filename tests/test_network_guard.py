"""The network guard of the in-process tests (tests/conftest.py): the loopback servers a test starts are
reachable; another address, a name lookup, or a Kubernetes client of this machine's own cluster is refused,
and a test that tried fails, even where the code under test swallowed the error."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from pykured.core.errors import KubeError
from pykured.kube.client import Kube
from tests import conftest
from tests.conftest import NetworkGuard, NetworkGuardError, is_local

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("host", "local"),
    [
        ("127.0.0.1", True),
        ("127.1.2.3", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("0.0.0.0", True),
        ("localhost", True),
        ("api.localhost", True),
        ("192.0.2.1", False),
        ("10.96.0.1", False),
        ("2001:db8::1", False),
        ("::ffff:192.0.2.1", False),
        ("kubernetes.default.svc", False),
    ],
)
def test_what_is_local(host: str, local: bool) -> None:
    assert is_local(host) is local


def test_a_loopback_server_of_the_test_is_reachable(network_guard: NetworkGuard) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        accepted: list[bytes] = []

        def serve() -> None:
            conn, _ = server.accept()
            with conn:
                accepted.append(conn.recv(5))

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        with socket.create_connection(("localhost", port), timeout=5) as client:
            client.sendall(b"hello")
        thread.join(timeout=5)
    assert accepted == [b"hello"]
    assert network_guard.take() == []


def test_another_address_is_refused_before_a_packet_leaves(network_guard: NetworkGuard) -> None:
    with pytest.raises(NetworkGuardError, match=r"touched the network: connect to 192\.0\.2\.1:443"):
        socket.create_connection(("192.0.2.1", 443), timeout=1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp, pytest.raises(NetworkGuardError):
        udp.sendto(b"x", ("198.51.100.7", 53))
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp, pytest.raises(NetworkGuardError):
        tcp.connect_ex(("203.0.113.9", 80))
    with pytest.raises(NetworkGuardError, match=r"name lookup of 'example\.com'"):
        socket.getaddrinfo("example.com", 443)
    assert network_guard.take() == [
        "connect to 192.0.2.1:443",
        "sendto to 198.51.100.7:53",
        "connect_ex to 203.0.113.9:80",
        "name lookup of 'example.com'",
    ]


def test_a_kubernetes_client_of_this_machine_is_refused(
    network_guard: NetworkGuard, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "https://192.0.2.10:6443"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(json.dumps(config))
    monkeypatch.setattr(conftest, "USER_KUBECONFIGS", frozenset({str(kubeconfig.resolve())}))
    with pytest.raises(NetworkGuardError, match="this machine's kubeconfig"):
        Kube.from_kubeconfig(str(kubeconfig))
    with pytest.raises(NetworkGuardError, match="this pod's service account"):
        Kube.in_cluster()
    with pytest.raises(KubeError):  # Kube.auto wraps what the in-cluster loader raised: the guard saw it
        Kube.auto()
    assert [what.split(",")[1] for what in network_guard.take()] == [
        " this machine's kubeconfig",
        " this pod's service account",
        " this pod's service account",
    ]
    monkeypatch.setattr(conftest, "USER_KUBECONFIGS", frozenset())
    kube = Kube.from_kubeconfig(str(kubeconfig))  # a kubeconfig the test wrote: built, but not to be used
    with pytest.raises(KubeError, match=r"touched the network: connect to 192\.0\.2\.10:6443"):
        kube.get_node("n1")
    assert set(network_guard.take()) == {"connect to 192.0.2.10:6443"}  # each of the client's retries


def test_a_test_that_swallowed_the_refusal_still_fails(tmp_path: Path) -> None:
    probe = tmp_path / "tests" / "probe"
    probe.mkdir(parents=True)
    (probe / "conftest.py").write_text("from tests.conftest import network_guard  # noqa: F401\n")
    (probe / "test_probe.py").write_text(
        textwrap.dedent(
            """
            import socket

            def test_swallows() -> None:
                try:
                    socket.create_connection(("192.0.2.1", 443), timeout=1)
                except OSError:
                    pass
            """
        )
    )
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", str(probe)],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "1 passed, 1 error" in run.stdout, run.stdout
    assert "touched the network (connect to 192.0.2.1:443)" in run.stdout, run.stdout
