"""The lock tests' in-process fixtures (``kube``: a FakeKube; ``lock_ns``, ``nodes``), for ``pykured lock``'s
tests here (they are defined in tests/lock/conftest.py)."""

from tests.lock.conftest import kube, lock_ns, nodes

__all__ = ["kube", "lock_ns", "nodes"]
