"""``pykured plan`` as a pure function: what the roll will do, before it does it.

For every node: whether it needs a reboot and why (the sentinel as its agent last reported it, a reboot
request), what holds it now (a halt or the freeze, a per-node pause, the window closed until when — named a
blackout while one of the policy ConfigMap's is in force —, the agent's blocker — alerts, pods —, the lock
held by whom, a back-off, and for a node that holds the lock what holds its drain back), and its place in the
roll's order (:mod:`pykured.roll.order`). Below: an estimate of when the roll ends, from the cycle times the
agents recorded (``lastCycle`` in ``pykured.dev/status``: lock taken to lock released), and what could not be
read.

A node whose records cannot be read is one row saying so (``UNREADABLE: …`` in WHY); it never fails the plan.
Every cell is one line of terminal-safe text (:func:`pykured.core.printable.one_line`).

The estimate is ``ceil(waiting / limit) × median(recorded cycle)`` from now, the limit being the agents'
``--concurrency``, lowered by their ``--max-unavailable`` (then shown: ``limit: 3 (--concurrency 5,
--max-unavailable 25% of 12 nodes)``). It assumes the window
stays open and nothing blocks; while the fleet is halted or frozen there is none. Pure: no I/O, ``now``
passed in; the facts come from :mod:`pykured.fleet.view`'s rows.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import statistics
from collections.abc import Sequence
from typing import Any

from pykured.core.printable import one_line
from pykured.core.times import format_rfc3339
from pykured.cycle.state import NodeState
from pykured.fleet import view as fleetview
from pykured.gocompat.goflags import format_duration
from pykured.policy.blackout import Blackout, active_blackout
from pykured.policy.freeze import FreezeRecord
from pykured.policy.pause import describe as describe_pause
from pykured.policy.pause import paused_record
from pykured.policy.quarantine import quarantine_record
from pykured.status import agent as agentstatus

HEADER = ("NODE", "NEEDS-REBOOT", "WHY", "HELD-BY", "ORDER", "CORDONED")


@dataclasses.dataclass(frozen=True, slots=True)
class PlanRow:
    node: str
    needs: str
    why: str
    held_by: tuple[str, ...]
    order: int | None
    cordoned: str

    def cells(self) -> tuple[str, ...]:
        held = "; ".join(self.held_by) or ("next" if self.order == 1 else "-")
        order = str(self.order) if self.order is not None else "-"
        return tuple(
            one_line(c) for c in (self.node, self.needs, self.why or "-", held, order, self.cordoned)
        )


@dataclasses.dataclass(frozen=True, slots=True)
class Estimate:
    end: datetime.datetime | None
    remaining: int
    cycle_s: float | None
    cycles: int
    concurrency: int
    note: str


@dataclasses.dataclass(frozen=True, slots=True)
class Plan:
    rows: tuple[PlanRow, ...]
    freeze: FreezeRecord | None
    estimate: Estimate
    locks: tuple[fleetview.LockInfo, ...]
    unreadable: tuple[str, ...]
    limit: fleetview.LockLimit | None = None
    """The lock's limit, when the agents have a ``--max-unavailable`` budget (the estimate's pace)."""


def _why(row: fleetview.Row, status: agentstatus.AgentStatus | None) -> str:
    parts = []
    if status is not None and status.sentinel:
        parts.append("sentinel (as its agent last reported)")
    if row.reason:
        parts.append(f"request: {row.reason}")
    elif "request" in row.needs_reboot:
        parts.append("request")
    if status is not None and status.condition is not None:
        parts.append(f"condition: {status.condition}")
    return "; ".join(parts)


def _named(blocked_by: str, blackout: Blackout | None) -> str:
    """The agent's "window closed until T", named after the blackout in force when it is the reason."""
    prefix = "window closed until "
    if blackout is None or not blocked_by.startswith(prefix):
        return blocked_by
    end = format_rfc3339(blackout.end)
    text = f"blackout until {end}" + (f": {blackout.reason}" if blackout.reason else "")
    opens = blocked_by.removeprefix(prefix)
    return text if opens == end else f"{text}; {blocked_by}"


def build(
    views: Sequence[NodeState],
    locks: Sequence[fleetview.LockInfo],
    *,
    freeze: FreezeRecord | None,
    unreadable: Sequence[str] = (),
    concurrency: int = 1,
    blackouts: Sequence[Blackout] = (),
    limit: fleetview.LockLimit | None = None,
    now: datetime.datetime,
) -> Plan:
    """The plan of the roll for these nodes. ``blackouts``: the policy ConfigMap's (the agents' closed
    window is named after the one in force; a ``--blackout`` flag of the agents is not seen here).
    ``limit``: the lock's limit under a ``--max-unavailable`` budget; it replaces ``concurrency``."""
    table = fleetview.rows(views, locks, now=now)
    by_name = {v.name: v for v in views}
    holders = sorted({h for info in locks for h in info.holders})
    current = fleetview.current_roll(table)
    order = {node: i + 1 for i, node in enumerate(current.waiting)}
    active = freeze if freeze is not None and freeze.active(now) else None
    blackout = active_blackout(blackouts, now)
    out = []
    for row in table:
        try:
            at = order.get(row.node)
            out.append(_plan_row(row, by_name[row.node], holders=holders, active=active, blackout=blackout,
                                 order=at, now=now))  # fmt: skip
        except Exception as exc:  # a value no parser foresaw: this node's row says so, the others are shown
            why = f"UNREADABLE: {type(exc).__name__}: {exc}"[:300]
            out.append(PlanRow(row.node, "?", why, (), None, row.cordoned))
    cycles = [
        s.last_cycle_s
        for v in views
        if (s := agentstatus.decode(v.annotations.get(agentstatus.STATUS_ANNOTATION))) is not None
        and s.last_cycle_s is not None
    ]
    remaining = len(current.waiting)
    return Plan(
        rows=tuple(out),
        freeze=active,
        estimate=_estimate(remaining, cycles, limit.value if limit else max(1, concurrency), active, now),
        locks=tuple(locks),
        unreadable=tuple(unreadable),
        limit=limit,
    )


def _plan_row(
    row: fleetview.Row,
    view: NodeState,
    *,
    holders: Sequence[str],
    active: FreezeRecord | None,
    blackout: Blackout | None,
    order: int | None,
    now: datetime.datetime,
) -> PlanRow:
    """One node's row of the plan, from its row of the fleet view."""
    status = agentstatus.decode(view.annotations.get(agentstatus.STATUS_ANNOTATION))
    needs = row.needs_reboot not in ("no", "?")
    held: list[str] = []
    if row.node in holders:
        held.append("holds the lock (rebooting)")
        if row.drain_blocked_by:
            held.append(f"drain: {row.drain_blocked_by}")
    elif needs:
        if active is not None:
            word = "halted: " if active.halted else "frozen: "
            held.append(word + (active.reason or active.describe().removeprefix("frozen: ")))
        pause = paused_record(view.annotations)
        if pause is not None and pause.active(now):
            held.append(describe_pause(pause))
        quarantine = quarantine_record(view.annotations)
        if quarantine is not None:
            held.append(f"{quarantine.describe()} (pykured unquarantine {row.node} ends it)")
        own = status is not None and status.blocked in ("pause", "freeze", "quarantined")  # read fresh above
        if row.blocked_by and not own and quarantine is None:
            held.append(_named(row.blocked_by, blackout))
    why = _why(row, status)
    if row.unreadable:
        why = "; ".join(filter(None, [f"UNREADABLE: {row.unreadable}", why]))
    return PlanRow(row.node, row.needs_reboot, why, tuple(held), order, row.cordoned)


def _estimate(
    remaining: int,
    cycles: Sequence[int],
    concurrency: int,
    frozen: FreezeRecord | None,
    now: datetime.datetime,
) -> Estimate:
    cycle = float(statistics.median(cycles)) if cycles else None
    if remaining == 0:
        return Estimate(now, 0, cycle, len(cycles), concurrency, "nothing to reboot")
    if frozen is not None:
        what = "halted" if frozen.halted else "frozen"
        return Estimate(None, remaining, cycle, len(cycles), concurrency, f"none while {what}")
    if cycle is None:
        return Estimate(None, remaining, None, 0, concurrency, "unknown: no agent recorded a cycle yet")
    end = now + datetime.timedelta(seconds=math.ceil(remaining / concurrency) * cycle)
    note = "if the window stays open and nothing blocks"
    return Estimate(end, remaining, cycle, len(cycles), concurrency, note)


def _duration(seconds: float) -> str:
    return format_duration(round(seconds) * 1_000_000_000)


def _estimate_line(est: Estimate) -> str:
    if est.end is None or est.remaining == 0 or est.cycle_s is None:
        return f"estimated end: {est.note}" + (f" ({est.remaining} to reboot)" if est.remaining else "")
    return (
        f"estimated end: {format_rfc3339(est.end)} ({est.remaining} to reboot, {est.concurrency} at a time, "
        f"{_duration(est.cycle_s)} per cycle, median of {est.cycles} recorded; {est.note})"
    )


def render_table(plan: Plan) -> str:
    """The text plan: the freeze first, the table, then the estimate, the locks and what was not read."""
    lines = []
    if plan.freeze is not None:
        word = "HALTED" if plan.freeze.halted else "FROZEN"
        lines.append(f"{word}: {one_line(plan.freeze.describe())}; no reboot starts until `pykured unfreeze`")
    cells = [HEADER, *(r.cells() for r in plan.rows)]
    widths = [max(len(c[i]) for c in cells) for i in range(len(HEADER))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    if not plan.rows:
        lines.append("(no nodes)")
    lines.append(_estimate_line(plan.estimate))
    lines += [plan.limit.line()] if plan.limit is not None else []
    lines += fleetview.lock_lines(plan.locks)
    lines += [f"cannot read: {one_line(what)}" for what in plan.unreadable]
    return "\n".join(lines) + "\n"


def to_json(plan: Plan) -> dict[str, Any]:
    """The same facts for ``-o json``."""
    est = plan.estimate
    freeze = None
    if plan.freeze is not None:
        freeze = {
            "halted": plan.freeze.halted or None,
            "reason": plan.freeze.reason,
            "by": plan.freeze.by,
            "describe": plan.freeze.describe(),
        }
    return ({"limit": plan.limit.to_json()} if plan.limit is not None else {}) | {
        "freeze": freeze,
        "nodes": [
            {
                "node": r.node,
                "needsReboot": r.needs,
                "why": r.why,
                "heldBy": list(r.held_by),
                "order": r.order,
                "cordoned": r.cordoned,
            }
            for r in plan.rows
        ],
        "estimate": {
            "end": format_rfc3339(est.end) if est.end is not None and est.remaining else None,
            "remaining": est.remaining,
            "cycleSeconds": est.cycle_s,
            "cyclesRecorded": est.cycles,
            "concurrency": est.concurrency,
            "note": est.note,
        },
        "locks": [
            {"backend": i.backend, "holders": list(i.holders), "error": i.error or None} for i in plan.locks
        ],
        "cannotRead": list(plan.unreadable),
    }
