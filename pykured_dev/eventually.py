"""Waiting for an effect that another thread or process brings about: the tests' one way to wait.

A test never sleeps a fixed time hoping that the agent, the API server or a watch has caught up; it names
the effect and waits for it, up to a bound that is generous on a loaded machine and never reached when all
is well.
"""

from __future__ import annotations

import time
from collections.abc import Callable


def eventually(condition: Callable[[], bool], *, timeout: float = 30.0, every: float = 0.05) -> bool:
    """Poll ``condition`` until it holds (True) or ``timeout`` seconds pass (False, after one last look)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(every)
    return True
