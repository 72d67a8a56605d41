"""The waiters' spread: how long each watching waiter may delay its look after a slot frees (pure).

A freed slot wakes every waiter that watches the lock (the Leases, or kured's DaemonSet). Each draws a delay
of 0–*spread* seconds and looks only if its copy still shows the slot free when its delay ends, so that in the
common case the first delay to end takes the slot and the others see the take in their watch before their own
delay ends. The spread fits the crowd (:func:`fitted`) from how soon after a free the take came, and doubles
after a near tie (:func:`widened`).
"""

from __future__ import annotations

import math

GAP = 0.25
"""The time a waiter aims to leave between the first delay to end and the next (seconds): about what the
news of a take needs to reach the other waiters, so that a freed slot draws no near tie."""
STAGGER_MAX = 16.0
"""The widest spread a waiter backs off to after its looks found the slot taken (seconds)."""


def fitted(spread: float, taken_after: float, *, floor: float) -> float:
    """The spread after another waiter took a freed slot ``taken_after`` seconds after it freed.

    With ``n`` waiters drawing from ``[0, spread]`` the first delay ends after about ``spread / (n + 1)`` and
    the next one as much later; a slot taken much sooner than :data:`GAP` means a crowd whose near ties are
    likely, so the spread widens (up to :data:`STAGGER_MAX`); one taken later means few waiters left, so it
    narrows (down to ``floor``). Every waiter sees the same hand-overs, so the crowd's spreads agree. One
    hand-over is a noisy sample (the first of n delays): the spread moves halfway (geometrically), at most
    doubling or halving.
    """
    factor = min(max(math.sqrt(GAP / max(taken_after, 0.01)), 0.5), 2.0)
    return min(max(spread * factor, floor), max(STAGGER_MAX, floor))


def widened(spread: float, *, floor: float) -> float:
    """The spread after this waiter's look found the slot taken all the same (a near tie): doubled, up to
    :data:`STAGGER_MAX`."""
    return min(spread * 2, max(STAGGER_MAX, floor))
