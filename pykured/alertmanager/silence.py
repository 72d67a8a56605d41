"""``--silence-during-reboot``: a silence in Alertmanager while a node reboots, gone before its slot is.

Concept: when a node takes the reboot lock (whoever takes it for the node: its agent, or the central
FleetLock server), a silence is made from the templated matchers (:mod:`pykured.alertmanager.matchers`: they
name the node), lasting ``--silence-max`` (at most 24h); its id is kept on the Node in
``pykured.dev/silence`` (:mod:`pykured.alertmanager.record`). The record is what makes this survive a
restart: an agent started mid-cycle finds it on the Node and expires the silence at the cycle's end; a record
already there means no second silence.

The keeper is an observer of the cycle (:mod:`pykured.cycle.observers`): ``slot_taken`` makes the silence,
``drain_starting`` makes it when there is none yet (an agent that resumes a cycle), ``releasing`` expires it
— before the lock slot is freed, on every path that frees it (the cycle's release after the node is back and
settled, an abort, a failed drain, a quarantine, giving up; with either lock backend; for the daemon and for
FleetLock, central or node-local) — and ``forgetting`` expires it when the cycle ends without a release of
its own (the slot was already gone: its TTL expired and another node took it, or an operator freed it).

Decision: a failed expiry does not hold the slot. Holding the lock until Alertmanager answers would stop the
whole fleet, silently, on an Alertmanager outage; instead the slot is freed and:

* the record stays on the Node, marked ``expireDue`` (the moment the silence should have gone): one log
  line, a ``SilenceFailed`` warning Event, ``pykured_silence_expiry_failures_total`` counts the failure and
  ``pykured_silence_expiry_pending{node}`` is 1; ``pykured status`` shows it;
* the expiry is retried in the background (every :data:`RETRY_FIRST` seconds, doubling up to
  :data:`RETRY_MAX`) until it succeeds (``SilenceExpired``), or the silence ends by itself at its ``endsAt``
  (then the record goes); an agent restarted meanwhile picks the retry up at its first pass (``observed``:
  a record marked so, or one on a Node whose cycle has ended);
* the gate does not trust the silence in the meantime: an alert covered only by pykured's reboot silences
  holds every node (:mod:`pykured.blockers.alertmanager`), so the next node does not take the lock while
  the previous node's alert fires under a silence that outlived its reboot.

A new cycle that finds a leftover silence expires it first (and makes no second one while it cannot).

Invariants:
* A silence that cannot be made is one log line and a warning Event (``SilenceFailed``); it never blocks
  nor holds a reboot.
* The record is removed, or marked, only if it is still the one read (a JSON patch ``test``): a retry never
  removes the record of a newer silence.
* The URL's credentials are never shown: messages name the silence and the node only.
"""

from __future__ import annotations

import datetime
import logging
import threading
from collections.abc import Callable

from pykured.alertmanager import matchers as matcher_syntax
from pykured.alertmanager.api import (
    AlertmanagerError,
    Silence,
    SilenceSpec,
    create_silence,
    expire_silence,
)
from pykured.alertmanager.record import (
    SILENCE_ANNOTATION,
    SilenceRecord,
    leftover,
    parse_record,
    record_of,
    record_patch,
    record_text,
)
from pykured.core import errors
from pykured.core.times import format_rfc3339
from pykured.cycle.observers import CycleObserver
from pykured.cycle.state import NodeState
from pykured.kube.api import KubeApi
from pykured.kube.client import JSON_PATCH, MERGE_PATCH
from pykured.kube.events import EventRecorder
from pykured.metrics import Metrics, NullMetrics

logger = logging.getLogger(__name__)

CREATED_BY = "pykured"
COMMENT_PREFIX = "pykured: node "
"""How every reboot silence's comment starts (then the node's name): with ``createdBy: pykured``, the mark
that says a silence is one of pykured's reboot silences (:func:`is_reboot_silence`)."""
RETRY_FIRST = 5.0
"""Seconds before the first retry of a failed expiry (each next wait doubles)."""
RETRY_MAX = 30.0
"""The longest wait between two retries of a failed expiry."""


def is_reboot_silence(silence: Silence) -> bool:
    """Is ``silence`` one of pykured's reboot silences (made by :func:`silence_spec`, by any agent, for any
    node)?"""
    return silence.created_by == CREATED_BY and silence.comment.startswith(COMMENT_PREFIX)


def silence_spec(
    template: str, *, node: str, now: datetime.datetime, longest: datetime.timedelta
) -> SilenceSpec:
    """The silence for ``node`` (pure): the matchers rendered, from ``now`` for ``longest``."""
    found = matcher_syntax.render(template, node=node)
    now = now.replace(microsecond=0)  # whole seconds, as the record on the Node keeps it
    comment = f"{COMMENT_PREFIX}{node} is rebooting; expired when it is back and settled"
    return SilenceSpec(found, starts=now, ends=now + longest, comment=comment, created_by=CREATED_BY)


class SilenceKeeper(CycleObserver):
    """Makes and expires one node's silence, and retries an expiry that failed (see the module docstring).

    ``stopping``: set when the agent stops; a retry running in the background ends then (the next agent
    picks it up from the record)."""

    def __init__(
        self,
        kube: KubeApi,
        *,
        node: str,
        url: str,
        template: str,
        longest: datetime.timedelta,
        events: EventRecorder,
        metrics: Metrics | None = None,
        stopping: threading.Event | None = None,
        timeout: float = 10,
        retry_first: float = RETRY_FIRST,
        retry_max: float = RETRY_MAX,
        clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
    ) -> None:
        self._kube = kube
        self.node = node
        self._url = url
        self._template = template
        self._longest = longest
        self._events = events
        self._metrics = metrics or NullMetrics()
        self._stopping = stopping or threading.Event()
        self._timeout = timeout
        self._retry_first = retry_first
        self._retry_max = retry_max
        self._clock = clock
        self._guard = threading.Lock()
        """One change of the record at a time: the cycle's and the background retry's."""
        self._retrier: threading.Thread | None = None
        self._starting = threading.Lock()
        """One retry thread per keeper, whichever thread asks for it (a pass, a drain worker)."""

    # -- the cycle's moments -----------------------------------------------------------------------------

    def slot_taken(self, node: str) -> None:
        self.start()

    def drain_starting(self, node: str) -> None:
        self.start()  # made at the lock; again here when a restarted agent resumes the cycle

    def releasing(self, node: str) -> None:
        self.end()  # before the slot is freed: the next node never finds this silence active

    def forgetting(self, node: str) -> None:
        self.end()  # a cycle whose slot was already gone; after a release, nothing is left (or it retries)

    def observed(self, view: NodeState) -> None:
        found = leftover(view)
        self._metrics.set_silence_expiry_pending(self.node, found is not None and found.due is not None)
        if found is not None:
            self.retry_in_background()

    # -- making and expiring -----------------------------------------------------------------------------

    def _read(self) -> tuple[str | None, SilenceRecord | None, NodeState]:
        obj = self._kube.get_node(self.node)
        text = record_text(obj)
        return text, record_of(obj), NodeState.from_obj(obj)

    def start(self) -> SilenceRecord | None:
        """The node took the lock: make its silence, unless its record says it has one (a leftover of an
        earlier cycle is expired first: while it cannot be, no second silence is made)."""
        with self._guard:
            try:
                text, found, _view = self._read()
            except errors.KubeError as exc:
                self._failed(f"cannot read node {self.node} for its silence record: {exc}")
                return None
            if found is not None:
                if found.due is None and self._clock() < found.until:
                    return found
                if not self._finish(text, found):
                    return None
            return self._make()

    def _make(self) -> SilenceRecord | None:
        now = self._clock()
        try:
            spec = silence_spec(self._template, node=self.node, now=now, longest=self._longest)
            ident = create_silence(self._url, spec, timeout=self._timeout)
        except (AlertmanagerError, errors.ConfigError) as exc:
            self._failed(f"cannot make a silence in Alertmanager for node {self.node}: {exc}")
            return None
        record = SilenceRecord(ident, spec.ends)
        try:
            self._kube.patch_node(
                self.node,
                {"metadata": {"annotations": {SILENCE_ANNOTATION: record.to_json()}}},
                patch_type=MERGE_PATCH,
            )
        except errors.KubeError as exc:
            self._failed(f"made silence {ident} but cannot record it on node {self.node}: {exc}")
            try:
                expire_silence(self._url, ident, timeout=self._timeout)
            except AlertmanagerError as failed:
                self._failed(f"cannot expire silence {ident} of node {self.node}: {failed}")
            return None
        matchers = ", ".join(str(m) for m in spec.matchers)
        logger.info(
            "Silenced %s in Alertmanager until %s (silence %s)", matchers, format_rfc3339(spec.ends), ident
        )
        self._events.record(
            "Silenced", f"silence {ident} in Alertmanager until {format_rfc3339(spec.ends)}: {matchers}"
        )
        return record

    def end(self) -> bool:
        """The slot is about to be freed, or the cycle ended: expire the silence its record names and remove
        the record (on failure, mark it and retry in the background); was there one?"""
        with self._guard:
            try:
                text, found, _view = self._read()
            except errors.KubeError as exc:
                self._failed(f"cannot read node {self.node} for its silence record: {exc}")
                return False
            if found is None:
                return False
            if found.due is not None:
                self.retry_in_background()  # already failed once: the retry has it
            else:
                self._finish(text, found)
            return True

    def retry_once(self) -> bool:
        """One retry of a leftover's expiry; is nothing left to retry?"""
        with self._guard:
            try:
                text, found, view = self._read()
            except errors.KubeError as exc:
                logger.warning("Cannot read node %s for its silence record: %s", self.node, exc)
                return False
            if found is None or (found.due is None and view.has_memory):
                self._metrics.set_silence_expiry_pending(self.node, False)
                return True  # gone, or the silence of a running cycle (which ends it itself)
            return self._finish(text, found)

    def _finish(self, text: str | None, record: SilenceRecord) -> bool:
        """Expire ``record``'s silence and remove the record (``text`` is its value as read); on failure,
        mark it ``expireDue`` and retry in the background. Is it done?"""
        now = self._clock()
        if now >= record.until:  # Alertmanager ended it by itself
            if not self._remove(text):
                return False
            logger.info("Silence %s of node %s ended by itself at %s", record.ident, self.node,
                        format_rfc3339(record.until))  # fmt: skip
            self._metrics.set_silence_expiry_pending(self.node, False)
            return True
        try:
            expire_silence(self._url, record.ident, timeout=self._timeout)
        except AlertmanagerError as exc:
            self._expiry_failed(text, record, exc, now)
            return False
        if not self._remove(text):
            self.retry_in_background()  # expired; the record goes at the next try
            return False
        self._metrics.set_silence_expiry_pending(self.node, False)
        late = f" ({format_rfc3339(record.due)} it was due)" if record.due is not None else ""
        logger.info("Expired silence %s of node %s in Alertmanager%s", record.ident, self.node, late)
        self._events.record("SilenceExpired", f"silence {record.ident} expired in Alertmanager{late}")
        return True

    def _expiry_failed(
        self, text: str | None, record: SilenceRecord, exc: AlertmanagerError, now: datetime.datetime
    ) -> None:
        self._metrics.silence_expiry_failed()
        self._metrics.set_silence_expiry_pending(self.node, True)
        if record.due is None:
            marked = record.overdue(now)
            try:
                self._kube.patch_node(self.node, record_patch(text, marked.to_json()), patch_type=JSON_PATCH)
            except errors.KubeError as failed:
                logger.warning("Cannot mark %s on node %s: %s", SILENCE_ANNOTATION, self.node, failed)
            self._failed(
                f"cannot expire silence {record.ident} of node {self.node}: {exc}; retrying until it is "
                f"expired (it ends by itself at {format_rfc3339(record.until)})"
            )
        else:
            logger.warning("Still cannot expire silence %s of node %s (due since %s): %s", record.ident,
                           self.node, format_rfc3339(record.due), exc)  # fmt: skip
        self.retry_in_background()

    def _remove(self, text: str | None) -> bool:
        """Remove the record if it is still ``text``; was it removed (or already gone)?"""
        if text is None:
            return True
        try:
            self._kube.patch_node(self.node, record_patch(text, None), patch_type=JSON_PATCH)
        except errors.NotFoundError:
            return True
        except errors.KubeError as exc:
            logger.warning("Cannot remove %s from node %s: %s", SILENCE_ANNOTATION, self.node, exc)
            return False
        return True

    # -- the retry in the background ---------------------------------------------------------------------

    def retry_in_background(self) -> None:
        """Retry the leftover's expiry on a thread of its own, until it is done or the agent stops (one
        thread per keeper)."""
        with self._starting:
            if self._retrier is not None and self._retrier.is_alive():
                return
            self._retrier = threading.Thread(target=self._retry, name=f"silence-{self.node}", daemon=True)
            self._retrier.start()

    def _retry(self) -> None:
        wait = self._retry_first
        while not self._stopping.wait(wait):
            try:
                if self.retry_once():
                    return
            except Exception:  # the retry never dies of a surprise: it logs it and tries again later
                logger.exception("Retrying the expiry of node %s's silence failed", self.node)
            wait = min(wait * 2, self._retry_max)

    def _failed(self, message: str) -> None:
        logger.warning("%s", message)
        self._events.record("SilenceFailed", message, warning=True)


__all__ = [
    "COMMENT_PREFIX",
    "CREATED_BY",
    "SILENCE_ANNOTATION",
    "SilenceKeeper",
    "SilenceRecord",
    "is_reboot_silence",
    "parse_record",
    "record_of",
    "silence_spec",
]
