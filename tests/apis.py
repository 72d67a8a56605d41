"""One test, two API servers: the in-memory fake and the real kube-apiserver, behind one face (:class:`Api`).

A test that takes the ``api`` fixture (tests/e2e/conftest.py) runs twice, ``[fake]`` and ``[real]``: the same
body proves the caller's logic on :class:`tests.fakes.FakeKube` and the API server's own rules (strategic
merge, JSON patches, optimistic concurrency, RBAC) on the real one (``k8s``, tests/conftest.py). A test that
only the real server can answer (races, a refusal by RBAC, an unreachable server) takes ``k8s`` alone.
"""

from __future__ import annotations

import itertools
from typing import Protocol

from pykured.kube.api import KubeApi
from pykured_dev.testenv.objects import ObjectHelpers
from tests.fakes import FakeKube
from tests.testenv import TestEnv


class Api(Protocol):
    """An API server a test writes to, and its clients."""

    @property
    def kube(self) -> KubeApi:
        """An administrator's client."""
        ...

    def kured(self) -> KubeApi:
        """A client with exactly kured's RBAC (the fake models no RBAC: its one client)."""
        ...

    def add_node(self, *, labels: dict[str, str] | None = None) -> str:
        """A new Ready Node with a name of its own; its name."""
        ...

    def lock_namespace(self) -> str:
        """A namespace holding an empty ``kured`` DaemonSet (kured's annotation lock lives on it)."""
        ...


class FakeApi:
    """The in-memory API server (:class:`tests.fakes.FakeKube`)."""

    def __init__(self) -> None:
        self.fake = FakeKube()
        self._names = itertools.count()

    @property
    def kube(self) -> KubeApi:
        return self.fake

    def kured(self) -> KubeApi:
        return self.fake

    def add_node(self, *, labels: dict[str, str] | None = None) -> str:
        name = f"node-{next(self._names)}"
        self.fake.add_node(name, labels=labels)
        return name

    def lock_namespace(self) -> str:
        namespace = f"ns-{next(self._names)}"
        self.fake.add_daemonset(namespace, "kured")
        return namespace


class RealApi:
    """The session's real kube-apiserver with its simulated kubelet (``k8s``)."""

    def __init__(self, k8s: TestEnv) -> None:
        self.k8s = k8s

    @property
    def kube(self) -> KubeApi:
        return self.k8s.kube()

    def kured(self) -> KubeApi:
        namespace = self.k8s.new_namespace("kured")
        self.k8s.apply_rbac_kured(namespace)
        user, groups = ObjectHelpers.kured_identity(namespace)
        return self.k8s.kube_as(user, list(groups))

    def add_node(self, *, labels: dict[str, str] | None = None) -> str:
        (name,) = self.k8s.add_nodes(self.k8s.unique("node"), labels=labels)
        return name

    def lock_namespace(self) -> str:
        namespace = self.k8s.new_namespace()
        self.k8s.create_daemonset(namespace, "kured")
        return namespace
