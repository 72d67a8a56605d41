"""Shared fixtures: ``k8s``, the real etcd + kube-apiserver of ``pykured_dev.testenv``, one per test session.

Kubernetes tests are never skipped: if the control plane cannot be built or started, they fail with the
tail of each component's log.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

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
    two units of :data:`REALNODE_UNITS` (a worker starts one fleet of real nodes for its session, so two
    fleets at most run at once; a worker that takes both units reuses its fleet)."""
    if getattr(config.option, "dist", "") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class Scopes(LoadFileScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid) or str(super()._split_scope(nodeid))

    return Scopes(config, log)


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
    "test_roll.py": "roll-and-requests",
    "test_requests.py": "roll-and-requests",
}
"""The real-node tier's files in two units of about the same length (measured with ``--durations``)."""
KURED_CAMPAIGN = "tests/e2e/kured/"
FILE_SCOPED = (
    KURED_CAMPAIGN,
    "tests/e2e/cli/test_plugin_file.py",
    "tests/e2e/test_api_requests.py",
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
