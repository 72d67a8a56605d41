"""Waiting for an effect that another thread or process brings about: the tests' one way to wait.

A test never sleeps a fixed time hoping that the agent, the API server or a watch has caught up; it names
the effect and waits for it, up to a bound that is generous on a loaded machine and never reached when all
is well. The looks start ``every`` seconds apart and spread out (half as long again each time, up to
``MAX_EVERY``): an effect that comes at once is seen at once, and a wait of minutes for a fleet does not
cost the API server and the machine's two cores twenty requests a second.
"""

from __future__ import annotations

import time
from collections.abc import Callable

MAX_EVERY = 0.5
"""The longest time between two looks (unless ``every`` itself is longer)."""


def eventually(condition: Callable[[], bool], *, timeout: float = 30.0, every: float = 0.05) -> bool:
    """Poll ``condition`` until it holds (True) or ``timeout`` seconds pass (False, after one last look)."""
    deadline = time.monotonic() + timeout
    pause = every
    while not condition():
        now = time.monotonic()
        if now >= deadline:
            return False
        time.sleep(min(pause, max(deadline - now, 0.0)))
        pause = min(pause * 1.5, max(every, MAX_EVERY))
    return True
