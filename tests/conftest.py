"""Shared fixtures: ``k8s``, the real etcd + kube-apiserver of ``pykured_dev.testenv``, one per test session;
and the network guard of the in-process tests (:class:`NetworkGuard`).

Kubernetes tests are never skipped: if the control plane cannot be built or started, they fail with the
tail of each component's log.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest

from pykured.kube.client import SERVICE_ACCOUNT_DIR, Kube
from pykured_dev.testenv.alertmanager import Alertmanager
from tests.testenv import TestEnv

# Nothing in the test run may reboot or signal this machine: pykured.host.reboot refuses to in safe mode.
os.environ["PYKURED_SAFE_MODE"] = "1"


@pytest.fixture(scope="session")
def k8s() -> Iterator[TestEnv]:
    """A running control plane with a simulated kubelet, shared by the session."""
    env = TestEnv().start()
    try:
        yield env
    finally:
        env.stop()


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """With ``-n N --dist loadfile`` (tools/dev test): the in-process files each on one worker, as loadfile
    does; each real-API-server test (``tests/e2e/``) a unit of its own, so the long ones spread over the
    workers, except the files in :data:`FILE_SCOPED` (their fixtures are set up once per file), the real
    kured's campaign (one unit: one launch of its scenarios) and the real-node tier, which goes out in the
    two units of :data:`REALNODE_UNITS` (a worker starts one fleet of real nodes for its run of the tier, so
    two fleets at most run at once)."""
    if getattr(config.option, "dist", "") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class Scopes(LoadFileScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid) or str(super()._split_scope(nodeid))

    return Scopes(config, log)


@pytest.fixture
def alertmanager() -> Iterator[Alertmanager]:
    """A real Alertmanager of the test's own on 127.0.0.1 (``pykured_dev.testenv.alertmanager``)."""
    with Alertmanager() as am:
        yield am


def scope_of(nodeid: str) -> str | None:
    """The unit a worker takes ``nodeid`` in, when it is not its file."""
    if nodeid.startswith(REALNODE_TIER):
        name = nodeid[len(REALNODE_TIER) :].partition("::")[0]
        return REALNODE_TIER + REALNODE_UNITS.get(name, "")
    if nodeid.startswith(KURED_CAMPAIGN):
        return KURED_CAMPAIGN  # its package fixture launches every scenario the run selected, all at once
    if nodeid.startswith(E2E) and not nodeid.startswith(FILE_SCOPED):
        return nodeid
    return None


E2E = "tests/e2e/"
REALNODE_TIER = "tests/e2e/realnode/"
REALNODE_UNITS = {
    "test_migration.py": "kured-and-stuck",
    "test_stuck_node.py": "kured-and-stuck",
    "test_npd.py": "kured-and-stuck",
    "test_release.py": "roll-and-requests",
    "test_roll.py": "roll-and-requests",
    "test_requests.py": "roll-and-requests",
}
"""The real-node tier's files in two units of about the same length (measured with ``--durations``)."""
KURED_CAMPAIGN = "tests/e2e/kured/"
FILE_SCOPED = (
    KURED_CAMPAIGN,
    "tests/e2e/cli/test_plugin_file.py",
    "tests/e2e/test_api_requests.py",
    "tests/e2e/test_image_sbom.py",
    "tests/e2e/test_manifests.py",
    "tests/e2e/test_status.py",
)
"""Real-server files whose tests share a fixture set up once per file or package (checked at collection)."""
SOAKS = "tests/e2e/soak/test_scenario.py::test_soak_under_faults["


LONG_FIRST = (
    SOAKS,
    REALNODE_TIER,
    "tests/e2e/kured/",
    "tests/e2e/test_policy_agents.py",
    "tests/e2e/test_daemon.py",
    "tests/e2e/test_demo.py",
    "tests/e2e/test_halt_agents.py",
    "tests/e2e/parity/test_parity.py",
    "tests/e2e/test_rbac_profiles.py",
    "tests/e2e/cli/test_plugin_file.py",
    "tests/e2e/requests/test_requests_agents.py",
    "tests/e2e/test_image.py",
    "tests/e2e/fleetlock/test_cycle.py",
)
"""The longest files (measured with ``--durations``), started first so that the workers end together
(``tools/dev test`` keeps this order; the order of other files is kept; a test's outcome never depends on
it)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None or scope_of(item.nodeid) != item.nodeid:
            continue
        shared = sorted(
            name
            for name, defs in info.name2fixturedefs.items()
            if any(d.scope in ("module", "package", "class") for d in defs)
        )
        if shared:
            raise pytest.UsageError(
                f"{item.nodeid} uses {', '.join(shared)}, set up once per file: add its file to FILE_SCOPED"
            )

    def rank(item: pytest.Item) -> int:
        found = [i for i, prefix in enumerate(LONG_FIRST) if item.nodeid.startswith(prefix)]
        return found[0] if found else len(LONG_FIRST)

    items.sort(key=rank)


# -- the network guard of the in-process tests -------------------------------------------------------------


class NetworkGuardError(OSError):
    """An in-process test reached for the network (raised where it did, and failing the test at its end)."""


USER_KUBECONFIGS = frozenset(
    str(Path(p).expanduser().resolve())
    for p in [*os.environ.get("KUBECONFIG", "").split(os.pathsep), "~/.kube/config"]
    if p
)
"""The kubeconfigs of whoever runs the tests (as the run started): a cluster no in-process test may reach."""


def is_address(host: str) -> bool:
    """An IP address literal (nothing to look up)."""
    try:
        ipaddress.ip_address(host.partition("%")[0])
    except ValueError:
        return False
    return True


def is_local(host: str) -> bool:
    """A loopback (or unspecified: this machine) address, or ``localhost``."""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(host.partition("%")[0])
    except ValueError:
        return False  # a name: looking it up is already the network
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback or ip.is_unspecified


class NetworkGuard:
    """Refuses, in an in-process test (not ``tests/e2e/``), a connection or datagram to anything but loopback,
    a name lookup other than ``localhost``, and a Kubernetes client of the machine's own cluster (the user's
    kubeconfig or the pod's service account): the call raises :class:`NetworkGuardError` and the test fails
    at its end with what it tried, even where the code under test swallows the error. Servers a test starts
    on 127.0.0.1 (or ::1) are reachable as ever.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._refused: list[str] = []

    def refuse(self, what: str) -> NoReturn:
        with self._lock:
            self._refused.append(what)
        raise NetworkGuardError(f"in-process test touched the network: {what}")

    def take(self) -> list[str]:
        """What was refused so far (and forget it: a test of the guard itself)."""
        with self._lock:
            refused, self._refused = self._refused, []
        return refused

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        guard = self

        def checked(name: str) -> Callable[..., Any]:
            real = getattr(socket.socket, name)

            def call(sock: socket.socket, *args: Any) -> Any:
                address = args[-1]  # connect(address), connect_ex(address), sendto(data[, flags], address)
                inet = sock.family in (socket.AF_INET, socket.AF_INET6) and isinstance(address, tuple)
                if inet and not is_local(str(address[0])):
                    guard.refuse(f"{name} to {address[0]}:{address[1]}")
                return real(sock, *args)

            return call

        for name in ("connect", "connect_ex", "sendto"):
            monkeypatch.setattr(socket.socket, name, checked(name))

        real_getaddrinfo = socket.getaddrinfo

        def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
            name = host.decode() if isinstance(host, bytes) else host
            if name is not None and not is_address(str(name)) and not is_local(str(name)):
                guard.refuse(f"name lookup of {name!r}")
            return real_getaddrinfo(host, *args, **kwargs)

        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)

        real_from_kubeconfig = vars(Kube)["from_kubeconfig"]  # the classmethods, unbound
        real_in_cluster = vars(Kube)["in_cluster"]

        def from_kubeconfig(cls: type[Kube], /, path: str, **kwargs: Any) -> Kube:
            if str(Path(path).expanduser().resolve()) in USER_KUBECONFIGS:
                guard.refuse(f"a Kubernetes client from {path}, this machine's kubeconfig, not a test server")
            return real_from_kubeconfig.__get__(None, cls)(path, **kwargs)  # type: ignore[no-any-return]

        def in_cluster(cls: type[Kube], /, *, token_dir: str = SERVICE_ACCOUNT_DIR, **kwargs: Any) -> Kube:
            if Path(token_dir) == Path(SERVICE_ACCOUNT_DIR):
                guard.refuse(f"a Kubernetes client from {token_dir}, this pod's service account")
            return real_in_cluster.__get__(None, cls)(token_dir=token_dir, **kwargs)  # type: ignore[no-any-return]

        monkeypatch.setattr(Kube, "from_kubeconfig", classmethod(from_kubeconfig))
        monkeypatch.setattr(Kube, "in_cluster", classmethod(in_cluster))


@pytest.fixture(autouse=True)
def logging_left_as_found() -> Iterator[None]:
    """A command or agent run in-process configures logging for its process (kured's format on the stream it
    was given, its level, on the root logger): none of that may outlive the test. A handler the test left
    on the root logger is removed (pytest's own stay), and the root logger's level is put back; otherwise a
    later test on the same worker logs to a closed stream, or captures nothing below the level left."""
    root = logging.getLogger()
    before, level = set(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        if handler not in before and not type(handler).__module__.startswith("_pytest"):
            root.removeHandler(handler)
    root.setLevel(level)


@pytest.fixture(autouse=True)
def network_guard(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[NetworkGuard]:
    """Every in-process test runs under a :class:`NetworkGuard` (the real-server tests, ``tests/e2e/``, reach
    their API server and nothing else by construction)."""
    guard = NetworkGuard()
    if not request.node.nodeid.startswith(E2E):
        guard.install(monkeypatch)
    yield guard
    refused = guard.take()
    if refused:
        pytest.fail(
            f"{request.node.nodeid} touched the network ({'; '.join(refused)}): an in-process test may reach"
            " only servers it starts on loopback; what needs the real API server goes under tests/e2e/",
            pytrace=False,
        )
