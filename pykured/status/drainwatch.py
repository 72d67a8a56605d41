"""A drain you can watch: the drainer's progress recorded in the node's status, its metrics, its slow Event.

Concept: the drainer reports its progress (:mod:`pykured.drain.progress`: the pods it still waits on, since
when, why) at every turn of its loop; this thin adapter, one per node, decides with that module's pure
rules what reaches the API server and when:

* the record, the ``drain`` field of ``pykured.dev/status`` (:meth:`StatusPublisher.drain_progress`): only
  when what the drain waits on changed (the pods, their reasons, their count), the first time once the drain
  has run :data:`RECORD_EVERY` seconds (a quick drain writes nothing), then at most every
  :data:`RECORD_EVERY` seconds; taken out at once when the drain ends (done, timed out, failed, cancelled, or
  its escalation step ended);
* ``pykured_drain_pods_waiting{node,reason}`` (:class:`pykured.metrics.Metrics`), set when the counts change
  and removed when the drain ends;
* one ``DrainSlow`` Warning Event once the drain has run ``slow_after`` seconds
  (:func:`slow_drain_after`), naming the pods it waits on (bounded) and why; another only when what it
  waits on changed and ``slow_after`` seconds have passed since the last one; ``pykured_drain_slow`` counts
  them.

Invariants: never raises into the drain (the drainer also guards its call); called from the drain's own
thread; the clocks are passed in.
"""

from __future__ import annotations

import datetime
import logging
import time
from collections.abc import Callable

from pykured.drain import Drainer
from pykured.drain import progress as drainprogress
from pykured.kube.events import EventRecorder
from pykured.metrics import Metrics
from pykured.status.publisher import StatusPublisher

logger = logging.getLogger(__name__)

DRAIN_SLOW = "DrainSlow"
"""The Event's reason (kured's Event conventions: :mod:`pykured.kube.events`)."""
RECORD_EVERY = 5.0
"""Seconds between two writes of the record (and before the first one)."""
SLOW_AFTER = 300.0
"""A drain is slow after five minutes, or half its ``--drain-timeout`` when that is shorter."""


def slow_drain_after(drain_timeout_s: float) -> float:
    """The slow-drain threshold: :data:`SLOW_AFTER`, or half of a shorter ``--drain-timeout``."""
    return min(SLOW_AFTER, drain_timeout_s / 2) if drain_timeout_s > 0 else SLOW_AFTER


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class DrainWatch:
    """Hears one node's drain progress; records it, counts it, tells when it is slow."""

    def __init__(
        self,
        publisher: StatusPublisher,
        *,
        metrics: Metrics,
        events: EventRecorder,
        slow_after: float = SLOW_AFTER,
        record_every: float = RECORD_EVERY,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime.datetime] = _utcnow,
    ) -> None:
        self._publisher = publisher
        self._metrics = metrics
        self._events = events
        self.node = publisher.node
        self.slow_after = slow_after
        self.record_every = record_every
        self._clock = clock
        self._wall_clock = wall_clock
        self._written: drainprogress.DrainProgress | None = None
        self._written_at: float | None = None
        self._drain: datetime.datetime | None = None
        """The start of the drain this watch hears (a new start begins a new watch)."""
        self._seen_at = 0.0
        self._counts: tuple[tuple[str, int], ...] | None = None
        self._event_at: float | None = None
        self._event_key: tuple[tuple[str, str, str, str], ...] | None = None

    def __call__(self, value: drainprogress.DrainProgress | None) -> None:
        try:
            self._heard(value)
        except Exception as exc:  # the drain goes on whatever its watch cannot do
            logger.debug("drain watch of node %s failed: %s", self.node, exc)

    def _heard(self, value: drainprogress.DrainProgress | None) -> None:
        now = self._clock()
        if value is not None and value.started != self._drain:
            self._drain, self._seen_at = value.started, now
            self._event_at, self._event_key = None, None
        self._count(value)
        self._record(value, now)
        if value is None:
            self._drain = None
            return
        self._slow(value, now)

    def _count(self, value: drainprogress.DrainProgress | None) -> None:
        counts = value.counts if value is not None else None
        if counts != self._counts:
            self._counts = counts
            self._metrics.set_drain_waiting(self.node, dict(counts) if counts is not None else None)

    def _record(self, value: drainprogress.DrainProgress | None, now: float) -> None:
        due = drainprogress.write_due(
            self._written,
            value,
            seen_for=now - self._seen_at,
            since_write=None if self._written_at is None else now - self._written_at,
            every=self.record_every,
        )
        if not due:
            return
        self._publisher.drain_progress(value)
        self._written = value
        self._written_at = now if value is not None else None

    def _slow(self, value: drainprogress.DrainProgress, now: float) -> None:
        due = drainprogress.slow_due(
            value,
            running=now - self._seen_at,
            threshold=self.slow_after,
            since_event=None if self._event_at is None else now - self._event_at,
            last_key=self._event_key,
        )
        if not due:
            return
        self._event_at, self._event_key = now, drainprogress.slow_key(value)
        message = drainprogress.slow_message(self.node, value, now=self._wall_clock())
        logger.warning("%s", message)
        self._events.record(DRAIN_SLOW, message, warning=True)
        self._metrics.drain_slow(self.node)


def watch_drains(
    drainer: Drainer,
    publisher: StatusPublisher,
    *,
    metrics: Metrics,
    events: EventRecorder,
    slow_after: float = SLOW_AFTER,
) -> DrainWatch:
    """Attach a :class:`DrainWatch` of ``publisher``'s node to ``drainer`` (its ``on_progress``)."""
    watch = DrainWatch(publisher, metrics=metrics, events=events, slow_after=slow_after)
    drainer.on_progress = watch
    return watch
