"""Reboots from Node conditions: which conditions are needs, and the breakers that bound them. Pure.

``--reboot-condition TYPE[=STATUS][:FOR]`` names a condition a node agent (Node Problem Detector, a health
agent of one's own) writes on the Node: ``KernelDeadlock=True:5m``. A condition on the agent's own Node is a
need, as the sentinel is, when (:func:`held`):

* its type is named and its status is the one named (``True`` by default);
* its ``lastTransitionTime`` is after the node's current boot: a condition left from before the reboot (its
  agent not yet started again, or one that never resets it) never asks for another reboot;
* it has held for ``FOR`` (``0`` by default) since then.

Two breakers bound what the conditions can do:

* per node, ``--reboot-condition-max`` reboots per ``--reboot-condition-period``: the reboots a condition
  asked for are counted on the Node (``pykured.dev/condition-reboots``, :class:`RebootCount`, one entry per
  boot left); a need beyond the count quarantines the node instead (:func:`tripped`);
* for the fleet, ``--reboot-condition-fleet-max`` (nodes, or a share of them): when more nodes than that show
  a configured condition at once, the cause is the cluster's, not the node's, and rebooting does not cure it:
  the fleet halts instead (:func:`fleet_tripped`).

Every read is total and bounded: a record that does not parse counts as the breaker's limit (fail safe: the
next need quarantines, and says why).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import re
from collections.abc import Iterable, Sequence
from typing import Any, Final

from pykured.core import boundedjson
from pykured.core.printable import cut, one_line
from pykured.core.times import format_rfc3339, parse_rfc3339
from pykured.gocompat.goflags import Duration, GoValueError
from pykured.kube.node import PYKURED_PREFIX, NodeCondition
from pykured.lock.budget import Budget

COUNT_ANNOTATION: Final = PYKURED_PREFIX + "condition-reboots"
"""The reboots a condition asked for on this node: a JSON list of ``{"boot", "at", "condition"}``."""
MAX_ENTRIES: Final = 50
"""At most this many reboots are remembered (the newest); a longer record reads as unreadable."""
MAX_RECORD: Final = 16 * 1024
MAX_SPECS: Final = 32
"""At most this many ``--reboot-condition`` flags."""
_TYPE: Final = re.compile(
    r"([A-Za-z0-9][-A-Za-z0-9_.]{0,252}/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
)
"""A condition type: a Kubernetes qualified name (NPD's ``KernelDeadlock``, ``example.com/Broken``)."""
_STATUS: Final = re.compile(r"[A-Za-z]{1,16}")


@dataclasses.dataclass(frozen=True, slots=True)
class ConditionSpec:
    """One ``--reboot-condition``: the type, the status that asks for a reboot, and how long it must hold."""

    type: str
    status: str = "True"
    hold_for: datetime.timedelta = datetime.timedelta(0)

    def __str__(self) -> str:
        held = f":{Duration(int(self.hold_for.total_seconds() * 1e9))}" if self.hold_for else ""
        return f"{self.type}={self.status}{held}"


def parse_spec(text: str) -> ConditionSpec:
    """``TYPE[=STATUS][:FOR]``: raises :class:`GoValueError` saying what is wanted."""
    want = "want TYPE[=STATUS][:FOR], e.g. KernelDeadlock=True:5m"
    head, colon, hold = text.strip().partition(":")
    kind, eq, status = head.partition("=")
    if not _TYPE.fullmatch(kind):
        raise GoValueError(f"condition type {kind!r} is not a qualified name; {want}")
    if eq and not _STATUS.fullmatch(status):
        raise GoValueError(f"condition status {status!r} must be a word (True, False, Unknown); {want}")
    hold_for = datetime.timedelta(0)
    if colon:
        try:
            duration = Duration.parse(hold)
        except GoValueError as exc:
            raise GoValueError(f"{exc}; {want}") from exc
        if duration.ns < 0:
            raise GoValueError(f"FOR must not be negative; {want}")
        hold_for = datetime.timedelta(microseconds=duration.ns // 1000)
    return ConditionSpec(kind, status if eq else "True", hold_for)


def parse_specs(texts: Sequence[str]) -> tuple[ConditionSpec, ...]:
    """Every ``--reboot-condition`` (raises :class:`GoValueError`; a type named twice is an error)."""
    if len(texts) > MAX_SPECS:
        raise GoValueError(f"at most {MAX_SPECS} conditions")
    specs = tuple(parse_spec(text) for text in texts)
    types = [spec.type for spec in specs]
    if twice := sorted({t for t in types if types.count(t) > 1}):
        raise GoValueError(f"condition {', '.join(twice)} named twice")
    return specs


@dataclasses.dataclass(frozen=True, slots=True)
class Held:
    """A condition that is a need, or will be once it has held for its ``FOR``."""

    spec: ConditionSpec
    condition: NodeCondition
    due: datetime.datetime
    """When it has held for ``FOR`` (a need from then)."""

    def is_need(self, now: datetime.datetime) -> bool:
        return now >= self.due

    def describe(self) -> str:
        """``KernelDeadlock=True since 2026-…Z: reason: message``, one line, bounded."""
        cond = self.condition
        since = format_rfc3339(cond.since) if cond.since else "?"
        why = ": ".join(filter(None, [cond.reason, cond.message]))
        return cut(one_line(f"{cond.type}={cond.status} since {since}" + (f": {why}" if why else "")), 300)


def held(
    specs: Sequence[ConditionSpec],
    conditions: Iterable[NodeCondition],
    *,
    booted: datetime.datetime | None,
) -> tuple[Held, ...]:
    """The configured conditions the Node shows with the configured status since its current boot (``booted``;
    ``None``: unknown, and then none: a condition cannot be shown to be newer than the boot), in the order of
    ``specs``, each with when it is a need. A condition without a ``lastTransitionTime`` is none either."""
    if booted is None:
        return ()
    by_type = {c.type: c for c in conditions}
    out = []
    for spec in specs:
        cond = by_type.get(spec.type)
        if cond is None or cond.status != spec.status or cond.since is None or cond.since <= booted:
            continue
        out.append(Held(spec, cond, cond.since + spec.hold_for))
    return tuple(out)


def need(found: Sequence[Held], now: datetime.datetime) -> Held | None:
    """The first condition that is a need now."""
    return next((h for h in found if h.is_need(now)), None)


def next_due(found: Sequence[Held], now: datetime.datetime) -> datetime.datetime | None:
    """When the next condition not yet held long enough becomes a need (``None``: none waits)."""
    return min((h.due for h in found if not h.is_need(now)), default=None)


def shows(specs: Sequence[ConditionSpec], conditions: Iterable[NodeCondition]) -> bool:
    """Does a Node show a configured condition with its status (whatever its age: the fleet's count)?"""
    wanted = {(spec.type, spec.status) for spec in specs}
    return any((c.type, c.status) in wanted for c in conditions)


def fleet_tripped(*, showing: int, nodes: int, budget: Budget) -> bool:
    """More nodes show a configured condition than ``budget`` allows of ``nodes`` (a share rounded down, at
    least one: one node alone never halts the fleet)."""
    return showing > budget.limit(nodes)


# -- the per-node count --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Entry:
    """One reboot a condition asked for: the boot it left, when, and which condition."""

    boot: str
    at: datetime.datetime
    condition: str


@dataclasses.dataclass(frozen=True, slots=True)
class RebootCount:
    """The record on the Node: the reboots conditions asked for (newest last), or why it cannot be read."""

    entries: tuple[Entry, ...] = ()
    unreadable: str = ""

    def within(self, now: datetime.datetime, period: datetime.timedelta, *, boot: str) -> int:
        """Reboots within ``period`` before ``now``, from boots other than ``boot`` (the current one: its
        own entry is the reboot under way, counted once it is done)."""
        return sum(1 for e in self.entries if e.boot != boot and now - e.at < period)

    def with_reboot(self, *, boot: str, at: datetime.datetime, condition: str) -> RebootCount:
        """The record with this boot's reboot (replacing an entry of the same boot: a step repeated after a
        restart counts once), the newest :data:`MAX_ENTRIES` kept."""
        kept = [e for e in self.entries if e.boot != boot]
        kept.append(Entry(cut(boot, 64), at, cut(condition, MAX_TYPE_TEXT)))
        return RebootCount(tuple(kept[-MAX_ENTRIES:]))

    def to_json(self) -> str:
        body = [{"boot": e.boot, "at": format_rfc3339(e.at), "condition": e.condition} for e in self.entries]
        return json.dumps(body, separators=(",", ":"), ensure_ascii=False)


MAX_TYPE_TEXT: Final = 320


def read_count(text: str | None) -> RebootCount:
    """The record under :data:`COUNT_ANNOTATION` (``None``: none yet). Total: a value that does not parse is a
    record that says why (:attr:`RebootCount.unreadable`)."""
    if text is None:
        return RebootCount()
    try:
        data: Any = boundedjson.loads(text, max_chars=MAX_RECORD)
    except boundedjson.UnreadableJSON as exc:
        return RebootCount(unreadable=str(exc))
    if not isinstance(data, list) or len(data) > MAX_ENTRIES:
        return RebootCount(unreadable=f"not a list of at most {MAX_ENTRIES} reboots")
    entries = []
    for item in data:
        if not isinstance(item, dict):
            return RebootCount(unreadable="an entry is not an object")
        boot, at, condition = item.get("boot"), item.get("at"), item.get("condition", "")
        moment = parse_rfc3339(at) if isinstance(at, str) else None
        if not isinstance(boot, str) or moment is None or not isinstance(condition, str):
            return RebootCount(unreadable="an entry needs a boot, an RFC 3339 time at and a condition")
        entries.append(Entry(boot, moment, cut(condition, MAX_TYPE_TEXT)))
    return RebootCount(tuple(entries))


def tripped(
    count: RebootCount, *, now: datetime.datetime, period: datetime.timedelta, limit: int, boot: str
) -> str:
    """Why a new need of this node quarantines it instead ("" when it may reboot): ``limit`` reboots asked
    for by conditions within ``period`` already, or a record that cannot be read (fail safe)."""
    if count.unreadable:
        return f"the count of condition reboots ({COUNT_ANNOTATION}) cannot be read: {count.unreadable}"
    done = count.within(now, period, boot=boot)
    if done >= limit:
        return f"{done} reboots for node conditions within {_period(period)} (--reboot-condition-max={limit})"
    return ""


def _period(period: datetime.timedelta) -> str:
    return str(Duration(int(period.total_seconds()) * 1_000_000_000))
