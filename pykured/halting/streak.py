"""``--max-failed-drains``: the fleet halts after N consecutive failed drains, counted fleet-wide.

Concept: the count lives where every agent (and a central FleetLock server) sees it and may write it — the
``pykured.dev/failed-drains`` annotation of the policy ConfigMap (``{"count":2,"last":"node-3: …"}``), next to
the halt. It is the one thing of the ConfigMap an agent's token may change besides adding the halt (the
admission policy on the ConfigMap): a forged count can delay a halt, never lift one. A failed drain (any path:
the steps of :mod:`pykured.cycle.run`) adds one; a drain that completes sets it back to zero. When the count
reaches the limit, the agent that counted it halts the fleet as ``--reboot-deadline`` does
(:class:`pykured.halting.fleet.FleetHalt`: the halt added, then the log line, ``RebootHalted`` on the node and
a notification), with the reason ``N consecutive drains failed (last: node X: …)``. The halt takes the count
back to zero (the halt's reason keeps it), so after ``pykured unfreeze`` the fleet again has ``limit``
failures to go.

The streak is an observer of the cycle (:mod:`pykured.cycle.observers`): its moment is ``drained``.

Invariants:
* Each write is conditional (the ``resourceVersion`` read), retried on a conflict: two agents failing at
  once count two.
* Never raises into the cycle: an API error is logged and the count may miss that drain.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
from collections.abc import Callable
from typing import Any

from pykured.core import boundedjson, errors
from pykured.core.times import format_rfc3339
from pykured.cycle.observers import CycleObserver
from pykured.halting.fleet import FleetHalt
from pykured.kube.api import KubeApi
from pykured.kube.events import EventRecorder
from pykured.kube.node import PYKURED_PREFIX
from pykured.notify import Notifier
from pykured.policy.document import PolicyMapError
from pykured.policy.freeze import FreezeRecord
from pykured.policy.source import configmaps_path

logger = logging.getLogger(__name__)

FAILED_DRAINS_ANNOTATION = PYKURED_PREFIX + "failed-drains"
LAST_MAX = 300
"""The failure text kept with the count is cut to this many characters (an annotation, not a log)."""


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


@dataclasses.dataclass(frozen=True, slots=True)
class Streak:
    """The fleet's consecutive failed drains, as the policy ConfigMap records them."""

    count: int = 0
    last: str = ""

    def to_json(self) -> str:
        return json.dumps({"count": self.count, "last": self.last}, sort_keys=True, separators=(",", ":"))

    @classmethod
    def parse(cls, text: str | None) -> Streak:
        """Never raises: an unreadable value counts as none."""
        try:
            data = boundedjson.loads(text or "{}")
        except boundedjson.UnreadableJSON:
            return cls()
        if not isinstance(data, dict):
            return cls()
        count, last = data.get("count"), data.get("last")
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            count = 0
        return cls(count, last if isinstance(last, str) else "")


def read(obj: dict[str, Any] | None) -> Streak:
    """The streak a policy ConfigMap object carries."""
    annotations = ((obj or {}).get("metadata") or {}).get("annotations") or {}
    return Streak.parse(annotations.get(FAILED_DRAINS_ANNOTATION))


class DrainStreak(CycleObserver):
    """Counts the fleet's consecutive failed drains and halts the fleet at ``limit``."""

    def __init__(
        self,
        *,
        kube: KubeApi,
        namespace: str,
        configmap: str,
        me: str,
        limit: int,
        notifier: Notifier,
        events_for: Callable[[str], EventRecorder],
        clock: Callable[[], datetime.datetime] = _utcnow,
    ) -> None:
        self._kube = kube
        self._namespace = namespace
        self._configmap = configmap
        self.limit = limit
        self._halt = FleetHalt(
            kube=kube,
            namespace=namespace,
            configmap=configmap,
            me=me,
            notifier=notifier,
            events_for=events_for,
        )
        self._clock = clock

    def drained(self, node: str, failure: str | None) -> None:
        """One drain of ``node`` ended (``failure``: why it failed; None: it completed). Never raises."""
        try:
            streak = self._count(node, failure)
            if failure is not None and streak is not None and streak.count >= self.limit:
                self._halt_at_limit(node, streak)
        except (errors.KubeError, PolicyMapError) as exc:
            logger.warning("Could not count the drain of node %s toward --max-failed-drains: %s", node, exc)

    def _count(self, node: str, failure: str | None) -> Streak | None:
        """Write the new count (conditional, retried on a conflict); the new streak, or None: unchanged."""
        path = configmaps_path(self._namespace, self._configmap)
        for _ in range(5):
            try:
                obj = self._kube.request("GET", path)
            except errors.NotFoundError:
                if failure is None:
                    return None
                where = f"{self._namespace}/{self._configmap}"
                raise errors.KubeError(f"policy ConfigMap {where} does not exist") from None
            current = read(obj)
            if failure is None:
                if current.count == 0:
                    return None
                streak = Streak()
            else:
                streak = Streak(current.count + 1, f"{node}: {failure}"[:LAST_MAX])
            annotations = dict((obj.get("metadata") or {}).get("annotations") or {})
            if streak.count and streak.count < self.limit:
                annotations[FAILED_DRAINS_ANNOTATION] = streak.to_json()
            else:
                annotations.pop(FAILED_DRAINS_ANNOTATION, None)
            body = {**obj, "metadata": {**obj["metadata"], "annotations": annotations}}
            try:
                self._kube.request("PUT", path, body=body)
            except errors.ConflictError:
                continue
            return streak
        raise errors.KubeError(f"policy ConfigMap {self._namespace}/{self._configmap} kept changing")

    def _halt_at_limit(self, node: str, streak: Streak) -> None:
        now = self._clock()
        reason = f"{streak.count} consecutive drains failed (last: {streak.last})"
        record = FreezeRecord(reason=reason, by=self._halt.by, at=now, halted=node)
        message = (
            f"{reason} (--max-failed-drains={self.limit}, at {format_rfc3339(now)}): no new reboot starts "
            "until `pykured unfreeze`"
        )
        self._halt.halt(record, node=node, message=message, now=now)
