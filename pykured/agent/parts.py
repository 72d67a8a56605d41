"""The daemon's own parts beside the cycle's hands: the reboot requests' keeper and their watch, the status
publisher, the node's turns in a roll (``--resume-rolls``) and the keeper of its Node conditions
(``--reboot-condition``).

They are built here, once, from the hands and what the daemon is configured with: the composition root
(:mod:`pykured.agent.wiring`) builds them and passes them to the :class:`~pykured.agent.daemon.Daemon`, so
the daemon constructs none of its collaborators; a daemon built without them (as the tests build one) gets
the same ones, from here.
"""

from __future__ import annotations

import dataclasses
import datetime
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from pykured import __version__
from pykured.cycle.steps import Hands
from pykured.kube.api import KubeApi
from pykured.metrics import Metrics
from pykured.requests.keeper import RequestKeeper
from pykured.requests.watch import RequestWatch
from pykured.status.agent import reported_boot_ids
from pykured.status.drainwatch import SLOW_AFTER, watch_drains
from pykured.status.publisher import StatusPublisher

if TYPE_CHECKING:  # --resume-rolls and --reboot-condition only: imported where they are built
    from pykured.conditions.keeper import ConditionKeeper
    from pykured.roll.queue import RollQueue
    from pykured.roll.turns import RollTurns


@dataclasses.dataclass(frozen=True, slots=True)
class Parts:
    """What the daemon keeps, watches and publishes beside the cycle its hands act through."""

    requests: RequestKeeper
    """Reboot requests bound to a boot (pykured.requests.keeper)."""
    watch: RequestWatch
    """The watch that wakes the daemon on a new request (pykured.requests.watch); the daemon runs it."""
    status: StatusPublisher
    """The status published on the Node for ``pykured status`` (pykured.status.publisher)."""
    turns: RollTurns | None = None
    """``--resume-rolls``: the node's turn in the roll (pykured.roll.turns); None = kured's race for the
    lock."""
    conditions: ConditionKeeper | None = None
    """``--reboot-condition``: the Node conditions that are needs, and their breakers
    (pykured.conditions.keeper); None = off."""


def build_parts(
    kube: KubeApi,
    hands: Hands,
    *,
    node: str,
    period: float,
    wake: threading.Event,
    clock: Callable[[], datetime.datetime],
    metrics: Metrics,
    queue: RollQueue | None = None,
    conditions: ConditionKeeper | None = None,
    status: StatusPublisher | None = None,
    slow_after: float = SLOW_AFTER,
) -> Parts:
    """The parts of ``node``'s daemon on ``kube``: its requests are watched every ``period`` seconds at
    least and a new one sets ``wake``; the drain's blocker is published as it happens, its progress as
    :mod:`pykured.status.drainwatch` paces it (a drain slow after ``slow_after`` seconds is told in an
    Event); ``queue`` is the lock queue of ``--resume-rolls`` (None: off); ``conditions`` the keeper of
    ``--reboot-condition`` (None: off), whose conditions the same watch follows; ``status``: the node's
    publisher (shared with a node-local FleetLock server; a new one by default)."""
    requests = RequestKeeper(
        kube,
        node=node,
        events=hands.events,
        notifier=hands.notifier,
        metrics=metrics,
        reported_boots=reported_boot_ids,
    )
    status = status or StatusPublisher(kube, node=node, version=__version__)
    hands.drainer.on_blocked = status.drain_blocked  # the drain's blocker, published as it happens
    watch_drains(hands.drainer, status, metrics=metrics, events=hands.events, slow_after=slow_after)
    turns = None
    if queue is not None:
        from pykured.roll.turns import RollTurns

        turns = RollTurns(queue, hands.lock, node)
    watch = RequestWatch(
        kube,
        requests,
        on_request=wake.set,
        clock=clock,
        poll_seconds=period,
        copy=hands.book.copy,
        also=conditions.see if conditions is not None else None,
    )
    return Parts(requests=requests, watch=watch, status=status, turns=turns, conditions=conditions)
