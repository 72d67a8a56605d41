"""Fixtures of the lock tests on the real API server (the helpers are in tests/lock/conftest.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.testenv import TestEnv


@pytest.fixture
def lock_ns(k8s: TestEnv) -> Iterator[str]:
    """A fresh namespace holding an empty ``kured`` DaemonSet."""
    namespace = k8s.new_namespace()
    k8s.create_daemonset(namespace, "kured")
    yield namespace


@pytest.fixture
def nodes(k8s: TestEnv) -> Callable[[int], list[str]]:
    """``nodes(n)``: n fresh Ready Nodes with unique names."""

    def make(n: int) -> list[str]:
        return k8s.add_nodes(*(k8s.unique("node") for _ in range(n)))

    return make
