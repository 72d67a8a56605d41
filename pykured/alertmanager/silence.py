"""``--silence-during-reboot``: a silence in Alertmanager while a node reboots, and its record on the Node.

Concept: when a node takes the reboot lock (whoever takes it for the node: its agent, or the central
FleetLock server), a silence is made from the templated matchers, lasting ``--silence-max`` at most; its id
is kept on the Node in ``pykured.dev/silence``. When the cycle ends (the node back and its settle gates
passed, or a cycle ended without a reboot) the silence is expired and the record removed. The record is
what makes this survive a restart: an agent started mid-cycle finds it on the Node and expires the silence at
the cycle's end; a record already there means no second silence.

The keeper is an observer of the cycle (:mod:`pykured.cycle.observers`): ``slot_taken`` makes the silence,
``drain_starting`` makes it when there is none yet (an agent that resumes a cycle), ``forgetting`` expires it.

Invariants:
* A silence that cannot be made, or expired, is one log line and a warning Event (``SilenceFailed``); it
  never blocks nor holds a reboot. One not expired ends by itself at its ``endsAt`` (``--silence-max``).
* The record is parsed whole and bounded (:func:`parse_record`); a bad one is absent, with one log line.
* The URL's credentials are never shown: messages name the silence and the node only.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from pykured.alertmanager import matchers as matcher_syntax
from pykured.alertmanager.api import (
    SILENCE_ID,
    AlertmanagerError,
    Silence,
    SilenceSpec,
    create_silence,
    expire_silence,
)
from pykured.core import boundedjson, errors
from pykured.core.times import format_rfc3339, parse_rfc3339
from pykured.cycle.observers import CycleObserver
from pykured.kube.api import KubeApi
from pykured.kube.client import MERGE_PATCH
from pykured.kube.events import EventRecorder

logger = logging.getLogger(__name__)

SILENCE_ANNOTATION = "pykured.dev/silence"
MAX_RECORD = 256
CREATED_BY = "pykured"
COMMENT_PREFIX = "pykured: node "
"""How every reboot silence's comment starts (then the node's name): with ``createdBy: pykured``, the mark
that says a silence is one of pykured's reboot silences (:func:`is_reboot_silence`)."""


@dataclasses.dataclass(frozen=True, slots=True)
class SilenceRecord:
    """``pykured.dev/silence``: the silence's id in Alertmanager and when it ends by itself."""

    ident: str
    until: datetime.datetime

    def to_json(self) -> str:
        return json.dumps({"id": self.ident, "until": format_rfc3339(self.until)}, separators=(",", ":"))


def parse_record(text: object, *, log: bool = True) -> SilenceRecord | None:
    """The record from the annotation's value; ``None`` (and, with ``log``, one log line) when it is not
    one."""
    if text is None:
        return None
    try:
        value = boundedjson.loads(text, max_chars=MAX_RECORD, max_depth=2)
    except boundedjson.UnreadableJSON as exc:
        if log:
            logger.warning("Ignoring annotation %s: %s", SILENCE_ANNOTATION, exc)
        return None
    ident = value.get("id") if isinstance(value, dict) else None
    until_text = value.get("until") if isinstance(value, dict) else None
    until = parse_rfc3339(until_text) if isinstance(until_text, str) else None
    if not isinstance(ident, str) or SILENCE_ID.fullmatch(ident) is None or until is None:
        if log:
            logger.warning("Ignoring annotation %s: not a silence record", SILENCE_ANNOTATION)
        return None
    return SilenceRecord(ident, until)


def record_of(obj: Mapping[str, Any]) -> SilenceRecord | None:
    """The record on a Node object (``None`` when it has none, or a bad one)."""
    metadata = obj.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    value = annotations.get(SILENCE_ANNOTATION) if isinstance(annotations, dict) else None
    return parse_record(value)


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
    """Makes and expires one node's silence (see the module docstring)."""

    def __init__(
        self,
        kube: KubeApi,
        *,
        node: str,
        url: str,
        template: str,
        longest: datetime.timedelta,
        events: EventRecorder,
        timeout: float = 10,
        clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
    ) -> None:
        self._kube = kube
        self.node = node
        self._url = url
        self._template = template
        self._longest = longest
        self._events = events
        self._timeout = timeout
        self._clock = clock

    # -- the cycle's moments -----------------------------------------------------------------------------

    def slot_taken(self, node: str) -> None:
        self.start()

    def drain_starting(self, node: str) -> None:
        self.start()  # made at the lock; again here when a restarted agent resumes the cycle

    def forgetting(self, node: str) -> None:
        self.end()

    def _record(self) -> SilenceRecord | None:
        return record_of(self._kube.get_node(self.node))

    def _write(self, record: SilenceRecord | None) -> None:
        value = record.to_json() if record is not None else None
        patch = {"metadata": {"annotations": {SILENCE_ANNOTATION: value}}}
        self._kube.patch_node(self.node, patch, patch_type=MERGE_PATCH)

    def start(self) -> SilenceRecord | None:
        """The node took the lock: make its silence, unless its record says it has one."""
        try:
            found = self._record()
        except errors.KubeError as exc:
            self._failed(f"cannot read node {self.node} for its silence record: {exc}")
            return None
        if found is not None:
            return found
        now = self._clock()
        try:
            spec = silence_spec(self._template, node=self.node, now=now, longest=self._longest)
            ident = create_silence(self._url, spec, timeout=self._timeout)
        except (AlertmanagerError, errors.ConfigError) as exc:
            self._failed(f"cannot make a silence in Alertmanager for node {self.node}: {exc}")
            return None
        record = SilenceRecord(ident, spec.ends)
        try:
            self._write(record)
        except errors.KubeError as exc:
            self._failed(f"made silence {ident} but cannot record it on node {self.node}: {exc}")
            self._expire(ident)
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
        """The cycle ended: expire the silence its record names and remove the record; was there one?"""
        try:
            found = self._record()
        except errors.KubeError as exc:
            self._failed(f"cannot read node {self.node} for its silence record: {exc}")
            return False
        if found is None:
            return False
        expired = self._expire(found.ident)
        try:
            self._write(None)
        except errors.KubeError as exc:
            logger.warning("Cannot remove %s from node %s: %s", SILENCE_ANNOTATION, self.node, exc)
        if expired:
            logger.info("Expired silence %s of node %s in Alertmanager", found.ident, self.node)
            self._events.record("SilenceExpired", f"silence {found.ident} expired in Alertmanager")
        return True

    def _expire(self, ident: str) -> bool:
        try:
            expire_silence(self._url, ident, timeout=self._timeout)
        except AlertmanagerError as exc:
            self._failed(f"cannot expire silence {ident} of node {self.node}: {exc}; it ends by itself")
            return False
        return True

    def _failed(self, message: str) -> None:
        logger.warning("%s", message)
        self._events.record("SilenceFailed", message, warning=True)
