"""``pykured status`` as a pure function: Nodes (and the lock holders) in, one row per node out.

Concept: the fleet view reads only what the API server holds — each agent's ``pykured.dev/status``
(:mod:`pykured.status.agent`), its roll record (``pykured.dev/roll``, :mod:`pykured.roll.record`: the last
reboot and since when it waits), the reboot request (:mod:`pykured.requests.record`), pykured's cycle memory
(``pykured.dev/*``, :mod:`pykured.kube.node`) and the lock holders — and renders a table or JSON. What the
caller may not read (Leases under kured's RBAC, say) is passed in as an error and shown, not guessed.
A node whose record cannot be read (a garbled ``pykured.dev/status``, reboot request or roll record, or
anything else its row could not be built from) is one row that says so; it never fails the whole view.
Every cell is one line of terminal-safe text (:func:`pykured.core.printable.one_line`).
A node whose agent (or a FleetLock server) records a running drain (the status' ``drain``,
:mod:`pykured.drain.progress`) says so in its STEP, and ``pykured status NODE`` prints the pods the drain
waits on, for how long and why (:func:`render_drains`); ``-o json`` carries the same under ``drain``.
Pure: no I/O, ``now`` is passed in.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Sequence
from typing import Any

from pykured.alertmanager.record import SILENCE_ANNOTATION, SilenceRecord, parse_record
from pykured.core.printable import one_line
from pykured.core.times import format_rfc3339, parse_rfc3339
from pykured.cycle.state import FLEETLOCK_ID_ANNOTATION, NodeState
from pykured.drain import progress as drainprogress
from pykured.kube.node import PYKURED_PREFIX
from pykured.lock.budget import Budget, effective_limit, explain
from pykured.policy.quarantine import quarantine_record
from pykured.requests import record as rebootrequest
from pykured.roll import order as roll
from pykured.roll import record as rollrecord
from pykured.status import agent as agentstatus

BACKOFF_UNTIL_ANNOTATION = PYKURED_PREFIX + "backoff-until"
HEADER = ("NODE", "NEEDS-REBOOT", "REASON", "BLOCKED-BY", "CORDONED", "STEP", "LAST-REBOOT", "ROLL", "AGENT")


@dataclasses.dataclass(frozen=True, slots=True)
class LockInfo:
    """The holders of one lock backend, or why they could not be read."""

    backend: str
    holders: tuple[str, ...] = ()
    error: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class LockLimit:
    """The nodes that may hold the lock at once: the agents' ``--concurrency``, lowered by their
    ``--max-unavailable`` (a percentage of ``nodes``, the DaemonSet's ``status.desiredNumberScheduled``;
    ``None``: it could not be read, and the agents then allow one)."""

    concurrency: int
    budget: Budget | None = None
    nodes: int | None = None

    @property
    def value(self) -> int:
        return effective_limit(concurrency=self.concurrency, budget=self.budget, count=self.nodes)

    def line(self) -> str:
        """``limit: 3 (--concurrency 5, --max-unavailable 25% of 12 nodes)``."""
        return "limit: " + explain(concurrency=self.concurrency, budget=self.budget, count=self.nodes)

    def to_json(self) -> dict[str, Any]:
        return {
            "limit": self.value,
            "concurrency": max(self.concurrency, 1),
            "maxUnavailable": None if self.budget is None else self.budget.config_value(),
            "nodes": self.nodes,
        }


@dataclasses.dataclass(frozen=True, slots=True)
class Row:
    """One node of the fleet view."""

    node: str
    needs_reboot: str
    reason: str
    blocked_by: str
    cordoned: str
    step: str
    last_reboot: datetime.datetime | None
    agent: str
    boot_id: str
    waiting_since: datetime.datetime | None = None
    ordered: bool = False
    """Its agent takes the lock in the roll's order (``--resume-rolls``)."""
    roll: str = ""
    """The node's place in the current roll (:meth:`pykured.roll.order.Roll.place`)."""
    drain_blocked_by: str = ""
    """The latest refusal holding the node's drain back, as its agent published it (webhook, 429)."""
    unreadable: str = ""
    """What on the Node could not be read, and why ("" when everything could)."""
    quarantined: str = ""
    """The node's quarantine (``--drain-escalation``), described ("" when it is not quarantined)."""
    silenced_until: datetime.datetime | None = None
    """``--silence-during-reboot``: the node's silence in Alertmanager ends by itself then (its record,
    ``pykured.dev/silence``); it is expired sooner, before the node's slot is freed."""
    silence_due: datetime.datetime | None = None
    """The silence outlived its cycle: its expiry failed then and is being retried (``expireDue``)."""
    condition: str = ""
    """The Node condition that makes the node need a reboot, as its agent last reported it."""
    drain: drainprogress.DrainProgress | None = None
    """The running drain's record: the pods it waits on, since when, why (None: none recorded)."""

    def cells(self, now: datetime.datetime) -> tuple[str, ...]:
        last = rebootrequest.ago(now, self.last_reboot, future="0s ago") if self.last_reboot else "-"
        unreadable = f"UNREADABLE: {self.unreadable}" if self.unreadable else ""
        condition = f"condition {self.condition}" if self.condition else ""
        reason = "; ".join(filter(None, [unreadable, self.reason, condition])) or "-"
        step = self.step
        if self.silence_due is not None:
            step += f", silence not expired since {format_rfc3339(self.silence_due)} (retrying)"
        elif self.silenced_until is not None:
            step += f", silenced until {format_rfc3339(self.silenced_until)}"
        if self.drain is not None:
            step += f", waiting for {self.drain.total} pods"
        cells = (self.node, self.needs_reboot, reason, self.blocked_by or "-", self.cordoned, step, last,
                 self.roll or "-", self.agent)  # fmt: skip
        return tuple(one_line(cell) for cell in cells)


def _needs(view: NodeState, status: agentstatus.AgentStatus | None, req: rebootrequest.Classified) -> str:
    parts = []
    if status is not None and status.sentinel:
        parts.append("sentinel")
    if req.pending:
        parts.append("request")
    elif req.state is rebootrequest.RequestState.UNBOUND:
        parts.append("request(no bootID)")
    if status is not None and status.condition is not None:
        parts.append("condition")
    return "+".join(parts) if parts else ("no" if status is not None else "?")


def _blocked_by(view: NodeState, status: agentstatus.AgentStatus | None, holders: Sequence[str]) -> str:
    quarantine = quarantine_record(view.annotations)
    if quarantine is not None and view.name not in holders:
        return quarantine.describe()
    return _agent_blocked_by(view, status, holders)


def _agent_blocked_by(view: NodeState, status: agentstatus.AgentStatus | None, holders: Sequence[str]) -> str:
    backoff = parse_rfc3339(view.annotations.get(BACKOFF_UNTIL_ANNOTATION, ""))
    if status is None:
        return ""
    if status.window_opens is not None and status.needs_reboot:
        return f"window closed until {format_rfc3339(status.window_opens)}"
    if status.blocked:
        return status.blocked_by or status.blocked
    if status.step == "acquire" and status.lock_wait:
        others = [h for h in holders if h != view.name]
        return "lock held by " + ",".join(others) if others else "waiting for the lock"
    drain = f"drain: {status.drain_blocked_by}" if status.drain_blocked_by else ""
    if backoff is not None and status.needs_reboot and status.step == "wait":
        return f"back-off until {format_rfc3339(backoff)}" + (f" ({drain})" if drain else "")
    return drain


def _cordoned(view: NodeState) -> str:
    if not view.unschedulable:
        return "no"
    if view.unschedulable_before is False:
        return "pykured"
    return "yes (not by pykured)"


def _memory_step(view: NodeState, holding: bool) -> str:
    """The step pykured's cycle memory on the Node shows ("" when the node is not in a cycle)."""
    if FLEETLOCK_ID_ANNOTATION in view.annotations:
        return "fleetlock (zincati)"
    if view.release_after is not None:
        return f"rebooted, lock release after {format_rfc3339(view.release_after)}"
    if view.reboot_boot_id is not None:
        return "rebooting" if view.boot_id == view.reboot_boot_id else "rebooted, uncordoning"
    if view.unschedulable_before is not None:
        return "draining" if view.unschedulable else "holding lock"
    return "holding lock" if holding else ""


_AGENT_STEPS = {"acquire": ("acquiring lock", "waiting for lock"), "wait": ("idle", "waiting")}


def _step(view: NodeState, status: agentstatus.AgentStatus | None, holding: bool) -> str:
    memory = _memory_step(view, holding)
    if not memory and quarantine_record(view.annotations) is not None:
        return "quarantined"
    if memory or status is None:
        return memory or "no agent status"
    names = _AGENT_STEPS.get(status.step)
    if names is None:
        return status.step or "-"
    flag = status.lock_wait if status.step == "acquire" else status.needs_reboot
    return names[flag]


def _status(view: NodeState) -> tuple[agentstatus.AgentStatus | None, str]:
    """The agent's status on the Node, or why it cannot be read ("" when it can, or is absent)."""
    text = view.annotations.get(agentstatus.STATUS_ANNOTATION)
    if not text:
        return None, ""
    try:
        return agentstatus.parse(text), ""
    except ValueError as exc:
        return None, f"{agentstatus.STATUS_ANNOTATION}: {exc}"


def node_row(view: NodeState, *, holders: Sequence[str] = (), now: datetime.datetime) -> Row:
    """One node's row. ``holders``: every node holding a lock slot (any backend)."""
    record, unreadable = _status(view)
    status = record if record is not None and record.from_agent else None  # not a FleetLock drain's alone
    previous = (status.boot_id,) if status and status.boot_id != view.boot_id else ()
    req = rebootrequest.classify(view.annotations, view.boot_id, previous_boot_ids=previous, now=now)
    if req.state is rebootrequest.RequestState.INVALID:
        unreadable = "; ".join(filter(None, [unreadable, f"{rebootrequest.REQUEST_ANNOTATION}: {req.why}"]))
    reason = req.request.reason if req.request and req.state is not rebootrequest.RequestState.STALE else ""
    place = rollrecord.read(view.annotations)
    last = place.last_reboot if place else None
    done_text = view.annotations.get(rebootrequest.SATISFIED_ANNOTATION)
    if done_text:
        try:
            done = rebootrequest.parse_satisfied(done_text)
        except ValueError:
            done = None
        if done is not None and (last is None or done.satisfied_at > last):
            last = done.satisfied_at
    return Row(
        node=view.name,
        needs_reboot=_needs(view, status, req),
        reason=reason,
        blocked_by=_blocked_by(view, status, holders),
        cordoned=_cordoned(view),
        step=_step(view, status, view.name in holders),
        last_reboot=last,
        agent=(status.version or "?") if status else "-",
        boot_id=view.boot_id,
        waiting_since=place.waiting_since if place else None,
        ordered=status.resume_rolls if status else False,
        drain_blocked_by=status.drain_blocked_by if status else "",
        unreadable=unreadable,
        quarantined=quarantine.describe() if (quarantine := quarantine_record(view.annotations)) else "",
        silenced_until=silence.until if (silence := _silence(view)) else None,
        silence_due=silence.due if silence else None,
        condition=(status.condition or "") if status else "",
        drain=record.drain if record is not None else None,
    )


def _silence(view: NodeState) -> SilenceRecord | None:
    text = view.annotations.get(SILENCE_ANNOTATION)
    return parse_record(text, log=False) if text is not None else None


def unreadable_row(view: NodeState, why: str) -> Row:
    """The row of a node whose row could not be built: it says so, and nothing else is guessed."""
    return Row(node=view.name, needs_reboot="?", reason="", blocked_by="", cordoned=_cordoned(view),
               step="unreadable", last_reboot=None, agent="?", boot_id=view.boot_id,
               unreadable=why)  # fmt: skip


def _row_or_unreadable(view: NodeState, *, holders: Sequence[str], now: datetime.datetime) -> Row:
    try:
        return node_row(view, holders=holders, now=now)
    except Exception as exc:  # a value no parser foresaw: this node's row says so, the others are shown
        return unreadable_row(view, f"{type(exc).__name__}: {exc}"[:300])


def current_roll(table: Sequence[Row]) -> roll.Roll:
    """The roll in progress among these nodes (:mod:`pykured.roll.order`)."""
    return roll.current([roll.Member(r.node, r.last_reboot, r.waiting_since) for r in table])


def rows(views: Sequence[NodeState], locks: Sequence[LockInfo], *, now: datetime.datetime) -> list[Row]:
    """Every node's row, sorted by name, with its place in the current roll."""
    holders = sorted({h for info in locks for h in info.holders})
    table = [_row_or_unreadable(v, holders=holders, now=now) for v in sorted(views, key=lambda v: v.name)]
    current = current_roll(table)
    return [dataclasses.replace(r, roll=current.place(r.node, numbered=r.ordered)) for r in table]


def _ordered(table: Sequence[Row], current: roll.Roll) -> bool:
    """Every waiting node's agent follows the roll's order (else the lock goes to whoever asks first)."""
    return bool(current.waiting) and all(r.ordered for r in table if r.node in current.waiting)


def _roll_line(table: Sequence[Row], current: roll.Roll) -> str:
    if current.since is None:
        return "roll: none in progress"
    rebooted = f" ({', '.join(current.rebooted)})" if current.rebooted else ""
    nxt = f" (next: {current.waiting[0]})" if _ordered(table, current) else ""
    return (
        f"roll since {format_rfc3339(current.since)}: {len(current.rebooted)} rebooted{rebooted}, "
        f"{len(current.waiting)} waiting{nxt}"
    )


def lock_lines(locks: Sequence[LockInfo]) -> list[str]:
    """One line per lock backend: its holders, ``free``, or why it could not be read."""
    out = []
    for info in locks:
        if info.error:
            out.append(f"lock ({info.backend}): cannot read: {one_line(info.error)}")
        else:
            held = ", ".join(one_line(h) for h in info.holders) if info.holders else "free"
            out.append(f"lock ({info.backend}): {held}")
    return out


def render_table(
    table: Sequence[Row], locks: Sequence[LockInfo], *, now: datetime.datetime, limit: LockLimit | None = None
) -> str:
    """The text table, then one line per lock backend (and the lock's limit, when a budget is given)."""
    cells = [HEADER, *(r.cells(now) for r in table)]
    widths = [max(len(c[i]) for c in cells) for i in range(len(HEADER))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    if not table:
        lines.append("(no nodes)")
    limits = [limit.line()] if limit is not None else []
    return "\n".join([*lines, _roll_line(table, current_roll(table)), *lock_lines(locks), *limits]) + "\n"


def render_drains(table: Sequence[Row], *, now: datetime.datetime) -> str:
    """For each node with a running drain recorded: since when, how many pods it waits on, and the first
    few of them, each with why it is held and for how long (``""`` when none is)."""
    lines: list[str] = []
    for row in table:
        drain = row.drain
        if drain is None:
            continue
        lines.append(
            one_line(
                f"drain of {row.node}: running for {drainprogress.waited(now, drain.started)} (since "
                f"{format_rfc3339(drain.started)}), waiting for {drain.total} pods"
            )
        )
        cells = [
            (one_line(h.pod), one_line(h.describe()), f"for {drainprogress.waited(now, h.since)}")
            for h in drain.pods
        ]
        widths = [max((len(c[i]) for c in cells), default=0) for i in range(2)]
        lines += [f"  {pod.ljust(widths[0])}  {why.ljust(widths[1])}  {age}" for pod, why, age in cells]
        if drain.total > len(drain.pods):
            lines.append(f"  and {drain.total - len(drain.pods)} more")
    return "".join(line + "\n" for line in lines)


def drain_json(drain: drainprogress.DrainProgress, *, now: datetime.datetime | None) -> dict[str, Any]:
    """A drain's record for ``-o json``: the record itself, each pod's reason told, and (given ``now``)
    how many seconds each has been held."""
    data = drainprogress.to_json(drain)
    for entry, hold in zip(data["pods"], drain.pods, strict=True):
        entry["why"] = hold.describe()
        if now is not None:
            entry["seconds"] = max(0, int((now - hold.since).total_seconds()))
    if now is not None:
        data["seconds"] = max(0, int((now - drain.started).total_seconds()))
    return data


def _roll_json(table: Sequence[Row], current: roll.Roll) -> dict[str, Any] | None:
    if current.since is None:
        return None
    return {
        "since": format_rfc3339(current.since),
        "rebooted": list(current.rebooted),
        "waiting": list(current.waiting),
        "ordered": _ordered(table, current),
    }


def to_json(
    table: Sequence[Row],
    locks: Sequence[LockInfo],
    *,
    limit: LockLimit | None = None,
    now: datetime.datetime | None = None,
) -> dict[str, Any]:
    """The same facts for ``-o json`` (``limit`` only when a budget is given; a running drain's record under
    ``drain``, with how long each pod has been held when ``now`` is given)."""
    return ({"limit": limit.to_json()} if limit is not None else {}) | {
        "nodes": [
            {
                "node": r.node,
                "needsReboot": r.needs_reboot,
                "reason": r.reason,
                "blockedBy": r.blocked_by,
                "cordoned": r.cordoned,
                "step": r.step,
                "lastReboot": format_rfc3339(r.last_reboot) if r.last_reboot else None,
                "agent": r.agent,
                "bootID": r.boot_id,
                "waitingSince": format_rfc3339(r.waiting_since) if r.waiting_since else None,
                "roll": r.roll or None,
                "drainBlockedBy": r.drain_blocked_by or None,
                **({"unreadable": r.unreadable} if r.unreadable else {}),
                **({"quarantined": r.quarantined} if r.quarantined else {}),
                **({"silencedUntil": format_rfc3339(r.silenced_until)} if r.silenced_until else {}),
                **({"silenceExpiryDue": format_rfc3339(r.silence_due)} if r.silence_due else {}),
                **({"condition": r.condition} if r.condition else {}),
                **({"drain": drain_json(r.drain, now=now)} if r.drain is not None else {}),
            }
            for r in table
        ],
        "roll": _roll_json(table, current_roll(table)),
        "locks": [
            {"backend": i.backend, "holders": list(i.holders), "error": i.error or None} for i in locks
        ],
    }
