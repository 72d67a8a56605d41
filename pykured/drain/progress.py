"""A drain's progress: which pods it still waits on, since when, and why each one is held (pure).

Concept: the drainer (:mod:`pykured.drain.drainer`) keeps one :class:`PodHold` per pod it still waits on and
reports a :class:`DrainProgress` to whoever watches it (the agent records it in its status,
:mod:`pykured.status.drainwatch`). This module is the vocabulary and every decision about it: the reasons,
how a refusal of the eviction API is read (a PodDisruptionBudget by name, an admission webhook's message),
when a terminating pod is past its grace period, the record's JSON (written, and read back as hostile
input), when the record is due to be written again and when a drain is slow.

The reasons (:data:`REASONS`, a closed set, so they may be metric labels):

* ``evicting``: the eviction (or deletion) is asked and not answered yet, or waits its turn;
* ``pdb``: a PodDisruptionBudget refuses the eviction (HTTP 429); ``detail`` its name when the API server
  names it (``The disruption budget NAME needs …`` in the Status' causes or message), else ``""``;
* ``webhook``: an admission webhook refused the eviction (or could not be asked); ``detail`` its message;
* ``refused``: another refusal the drain retries (a 429 that names no budget, a namespace being
  terminated); ``detail`` the API server's message;
* ``terminating``: evicted, and the drain waits for the pod to go;
* ``overdue``: terminating past its grace period: the API server sets ``deletionTimestamp`` to the moment of
  the deletion plus the grace period, so a pod still there after it is held by something else than its own
  shutdown (a finalizer, a kubelet that does not answer); ``since`` is that moment.

Invariants:
* Bounded: at most :data:`MAX_PODS` pods are named (the held ones first: overdue, pdb, webhook, refused,
  terminating, evicting; then by namespace and name) with the count of all of them; every text is cut
  (:data:`MAX_DETAIL`) and has its control characters removed. Nothing but a pod's namespace, name, reason,
  a budget's name or a refusal's message is kept: no pod content.
* Total reading: :func:`from_json` never raises; what is not a record is ``None``, a pod entry that is not
  one is left out.
* Pure: no I/O, ``now`` is passed in.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pykured.core.times import format_rfc3339, parse_rfc3339

EVICTING = "evicting"
PDB = "pdb"
WEBHOOK = "webhook"
REFUSED = "refused"
TERMINATING = "terminating"
OVERDUE = "overdue"
REASONS = (OVERDUE, PDB, WEBHOOK, REFUSED, TERMINATING, EVICTING)
"""Every reason, the most telling first (the order pods are named in)."""

MAX_PODS = 10
"""Pods named in the record, an Event or ``pykured status``; the rest are counted."""
MAX_DETAIL = 200
"""A budget's name or a refusal's message is cut to this many characters."""
MAX_NAMESPACE = 63
MAX_NAME = 253
_SCAN = 2000
"""How much of an API server's message is searched for a budget's name."""
_BUDGET = re.compile(r"[Tt]he disruption budget ([a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?)\b")
_HTTP_SUFFIX = re.compile(r"\s*\(HTTP \d{3}\)\Z")


@dataclasses.dataclass(frozen=True, slots=True)
class PodHold:
    """One pod the drain still waits on: why, and since when (when it began to be held for that reason)."""

    namespace: str
    name: str
    reason: str
    since: datetime.datetime
    detail: str = ""

    @property
    def pod(self) -> str:
        return f"{self.namespace}/{self.name}"

    def describe(self) -> str:
        """Why the pod is held, for a person: ``PodDisruptionBudget web-pdb``, the webhook's message, …"""
        if self.reason == PDB:
            return f"PodDisruptionBudget {self.detail}" if self.detail else "a PodDisruptionBudget"
        if self.reason == WEBHOOK:
            return self.detail or "an admission webhook"  # its own text names it: admission webhook "…" …
        if self.reason == REFUSED:
            return f"eviction refused: {self.detail}" if self.detail else "eviction refused"
        if self.reason == OVERDUE:
            return "terminating past its grace period"
        return self.reason


@dataclasses.dataclass(frozen=True, slots=True)
class DrainProgress:
    """What a running drain still waits on: the first :data:`MAX_PODS` pods, how many there are, by reason."""

    started: datetime.datetime
    pods: tuple[PodHold, ...]
    total: int
    counts: tuple[tuple[str, int], ...] = ()
    """Pods per reason, over all of them (not only those named), in :data:`REASONS` order, zeros left out."""

    def count(self, reason: str) -> int:
        return dict(self.counts).get(reason, 0)


def clean(text: str, limit: int = MAX_DETAIL) -> str:
    """``text`` on one line, its control characters (and other unprintable ones) removed, cut to ``limit``."""
    kept = "".join(ch if ch.isprintable() else (" " if ch in "\t\n\r" else "") for ch in text[: limit * 4])
    kept = " ".join(kept.split())
    return kept if len(kept) <= limit else kept[: max(0, limit - 1)] + "…"


def budget_name(message: str, causes: Sequence[tuple[str, str]] = ()) -> str:
    """The PodDisruptionBudget a 429 of the eviction API names (its Status' causes first, then its message),
    or ``""``; never raises, whatever the texts."""
    ordered = [m for kind, m in causes if kind == "DisruptionBudget"] + [m for _, m in causes] + [message]
    for text in ordered:
        found = _BUDGET.search(str(text)[:_SCAN])
        if found is not None:
            return found.group(1)
    return ""


def refusal(
    message: str, *, too_many: bool, webhook: bool, causes: Sequence[tuple[str, str]] = ()
) -> tuple[str, str]:
    """``(reason, detail)`` of a refusal the drain retries: a webhook's, a budget's (a 429 naming one, or the
    eviction API's own disruption-budget text), else ``refused``."""
    text = _HTTP_SUFFIX.sub("", message)
    if webhook:
        return WEBHOOK, clean(text)
    name = budget_name(text, causes)
    if too_many and (name or "disruption budget" in text[:_SCAN]):
        return PDB, name
    return REFUSED, clean(text)


def overdue_since(pod: Mapping[str, Any], *, now: datetime.datetime) -> datetime.datetime | None:
    """When a terminating pod's grace period ran out, if it has (its ``deletionTimestamp``, which the API
    server sets to the deletion plus the grace), else ``None``."""
    meta = pod.get("metadata")
    stamp = meta.get("deletionTimestamp") if isinstance(meta, Mapping) else None
    moment = parse_rfc3339(stamp) if isinstance(stamp, str) else None
    return moment if moment is not None and now > moment else None


def held(previous: PodHold | None, namespace: str, name: str, reason: str, detail: str, *,
         now: datetime.datetime) -> PodHold:  # fmt: skip
    """The pod's hold now: the previous one while its reason and detail stay the same (its ``since`` kept),
    else a new one since ``now``."""
    if previous is not None and (previous.reason, previous.detail) == (reason, detail):
        return previous
    return PodHold(namespace, name, reason, now, detail)


def _order(hold: PodHold) -> tuple[int, str, str]:
    rank = REASONS.index(hold.reason) if hold.reason in REASONS else len(REASONS)
    return rank, hold.namespace, hold.name


def progress(holds: Iterable[PodHold], *, started: datetime.datetime) -> DrainProgress:
    """The bounded progress of a drain begun at ``started`` that waits on ``holds``."""
    every = sorted(holds, key=_order)
    counts: dict[str, int] = {}
    for hold in every:
        counts[hold.reason] = counts.get(hold.reason, 0) + 1
    ordered = tuple((r, counts[r]) for r in REASONS if r in counts)
    return DrainProgress(started, tuple(every[:MAX_PODS]), len(every), ordered)


# -- the record ---------------------------------------------------------------------------------------------


def to_json(value: DrainProgress) -> dict[str, Any]:
    """The record's JSON (the ``drain`` field of the agent's status): bounded by construction."""
    pods = []
    for hold in value.pods[:MAX_PODS]:
        entry = {"namespace": hold.namespace, "name": hold.name, "reason": hold.reason,
                 "since": format_rfc3339(hold.since)}  # fmt: skip
        if hold.detail:
            entry["detail"] = clean(hold.detail)
        pods.append(entry)
    return {"since": format_rfc3339(value.started), "total": value.total, "pods": pods,
            "counts": dict(value.counts)}  # fmt: skip


def _text(entry: Mapping[str, Any], key: str, limit: int) -> str:
    value = entry.get(key, "")
    return clean(value, limit) if isinstance(value, str) else ""


def _hold(entry: Any) -> PodHold | None:
    if not isinstance(entry, dict):
        return None
    namespace, name = _text(entry, "namespace", MAX_NAMESPACE), _text(entry, "name", MAX_NAME)
    reason = entry.get("reason")
    since = parse_rfc3339(entry["since"]) if isinstance(entry.get("since"), str) else None
    if not namespace or not name or reason not in REASONS or since is None:
        return None
    return PodHold(namespace, name, str(reason), since, _text(entry, "detail", MAX_DETAIL))


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 10**7 else None


def from_json(data: Any) -> DrainProgress | None:
    """Read a record back (hostile input): ``None`` when it is not one; pod entries that are not are left
    out, at most :data:`MAX_PODS` are read; never raises."""
    if not isinstance(data, dict):
        return None
    started = parse_rfc3339(data["since"]) if isinstance(data.get("since"), str) else None
    total = _count(data.get("total"))
    entries = data.get("pods")
    if started is None or total is None or not isinstance(entries, list):
        return None
    pods = tuple(hold for hold in (_hold(e) for e in entries[:MAX_PODS]) if hold is not None)
    raw = data.get("counts")
    counts = raw if isinstance(raw, dict) else {}
    ordered = tuple((r, n) for r in REASONS if (n := _count(counts.get(r))) is not None and n > 0)
    return DrainProgress(started, pods, max(total, len(pods)), ordered)


# -- when to write it, when a drain is slow ---------------------------------------------------------------


def write_due(
    written: DrainProgress | None,
    current: DrainProgress | None,
    *,
    seen_for: float,
    since_write: float | None,
    every: float,
) -> bool:
    """Is ``current`` to be written over ``written`` now? A change only, and: a clear at once (when something
    was written); the first record once the drain has run ``every`` seconds (a quick drain writes nothing);
    later ones at most every ``every`` seconds (``since_write``: seconds since the last write); never one that
    waits on no pod (the drain is ending)."""
    if current == written:
        return False
    if current is None:
        return True
    if current.total == 0:  # nothing left to wait on: the drain ends, and its end clears the record
        return False
    if since_write is None:
        return seen_for >= every
    return since_write >= every


def slow_key(value: DrainProgress) -> tuple[tuple[str, str, str, str], ...]:
    """What a slow-drain Event says, without its times: a new Event only when this changed."""
    named = [(h.namespace, h.name, h.reason, h.detail) for h in value.pods]
    return (*named, ("", "", "", str(value.total)))


def slow_due(
    value: DrainProgress | None,
    *,
    running: float,
    threshold: float,
    since_event: float | None,
    last_key: tuple[tuple[str, str, str, str], ...] | None,
) -> bool:
    """Is a slow-drain Event due? Once the drain has run ``threshold`` seconds; again only when what it waits
    on changed and ``threshold`` seconds have passed since the last one."""
    if value is None or value.total == 0 or running < threshold:
        return False
    if since_event is None:
        return True
    return since_event >= threshold and slow_key(value) != last_key


def _duration(seconds: float) -> str:
    s = max(0, int(seconds))
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def waited(now: datetime.datetime, since: datetime.datetime) -> str:
    """``45s``, ``4m05s``, ``2h10m``: how long since ``since``."""
    return _duration((now - since).total_seconds())


def slow_message(node: str, value: DrainProgress, *, now: datetime.datetime) -> str:
    """The slow-drain Event's message: the drain's age, the pods it waits on (bounded) and why."""
    named = "; ".join(f"{h.pod}: {h.describe()} (for {waited(now, h.since)})" for h in value.pods)
    more = value.total - len(value.pods)
    tail = f"; and {more} more" if more > 0 else ""
    return (
        f"Drain of node {node} is slow: running for {waited(now, value.started)}, waiting for "
        f"{value.total} pods: {named}{tail}"
    )
