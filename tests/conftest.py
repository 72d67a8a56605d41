"""Shared fixtures: ``k8s``, the real etcd + kube-apiserver of ``pykured_dev.testenv``, one per test session.

Kubernetes tests are never skipped: if the control plane cannot be built or started, they fail with the
tail of each component's log.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

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
