"""What the host tests share: a child process standing in for PID 1."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A ``sleep`` to signal in PID 1's place (the guard refuses PID 1 under pytest)."""
    child = subprocess.Popen(["sleep", "60"])
    try:
        yield child
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
