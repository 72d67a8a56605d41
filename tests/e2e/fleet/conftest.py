"""The lock tests' real-API-server fixtures (``lock_ns``), for ``pykured lock``'s tests here (they are defined
in tests/e2e/lock/conftest.py)."""

from tests.e2e.lock.conftest import lock_ns

__all__ = ["lock_ns"]
