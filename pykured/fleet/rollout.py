"""A rollout's progress as a pure function of the Nodes.

A rollout is a set of reboot requests (:mod:`pykured.requests.record`) that carry the same ``rollout`` id,
written by ``pykured rollout``. It is recorded nowhere else: a node belongs to rollout ``R`` while its
request names ``R`` (pending) and, once satisfied, while its ``pykured.dev/reboot-request-satisfied`` record
names ``R`` (done, with the old and the new bootID). The lock's concurrency paces the reboots; nothing here
schedules. Pure: no I/O, ``now`` is passed in.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
from collections.abc import Sequence
from typing import Any

from pykured.core.times import format_rfc3339
from pykured.cycle.state import NodeState
from pykured.requests import record as rebootrequest


class Progress(enum.Enum):
    """One node's place in a rollout."""

    PENDING = "pending"
    """Its request names the current boot: not rebooted yet."""
    REBOOTED = "rebooted"
    """Rebooted into ``new_boot_id``: the satisfied record names the rollout, or the request is still
    there but names a boot the node has left (the agent has not cleaned it up yet)."""


@dataclasses.dataclass(frozen=True, slots=True)
class NodeProgress:
    node: str
    progress: Progress
    old_boot_id: str
    new_boot_id: str
    at: datetime.datetime | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class RolloutProgress:
    rollout: str
    reason: str
    nodes: tuple[NodeProgress, ...]

    @property
    def done(self) -> int:
        return sum(1 for n in self.nodes if n.progress is not Progress.PENDING)

    @property
    def complete(self) -> bool:
        return bool(self.nodes) and self.done == len(self.nodes)


def valid_id(text: str) -> bool:
    """Whether ``text`` may name a rollout (``--id``): :func:`pykured.requests.record.valid_rollout_id`."""
    return rebootrequest.valid_rollout_id(text)


def new_id(now: datetime.datetime, token: str) -> str:
    """A new rollout's id, ``r<UTC date>-<time>-<token>`` (:func:`pykured.requests.record.new_rollout_id`)."""
    return rebootrequest.new_rollout_id(now, token)


def _entry(view: NodeState, rollout: str) -> tuple[NodeProgress, str] | None:
    raw = view.annotations.get(rebootrequest.REQUEST_ANNOTATION)
    if raw is not None:
        try:
            req = rebootrequest.parse_request(raw)
        except ValueError:
            req = None
        if req is not None and req.rollout == rollout:
            if req.boot_id == view.boot_id:
                return NodeProgress(view.name, Progress.PENDING, req.boot_id, ""), req.reason
            moved = NodeProgress(view.name, Progress.REBOOTED, req.boot_id, view.boot_id)
            return moved, req.reason
    done_text = view.annotations.get(rebootrequest.SATISFIED_ANNOTATION)
    if done_text:
        try:
            done = rebootrequest.parse_satisfied(done_text)
        except ValueError:
            return None
        if done.request.rollout == rollout:
            entry = NodeProgress(
                view.name, Progress.REBOOTED, done.request.boot_id, done.new_boot_id, done.satisfied_at
            )
            return entry, done.request.reason
    return None


def progress(views: Sequence[NodeState], rollout: str) -> RolloutProgress:
    """Every node that belongs to ``rollout``, sorted by name."""
    entries = []
    reason = ""
    for view in sorted(views, key=lambda v: v.name):
        found = _entry(view, rollout)
        if found is not None:
            entries.append(found[0])
            reason = reason or found[1]
    return RolloutProgress(rollout=rollout, reason=reason, nodes=tuple(entries))


def rollouts(views: Sequence[NodeState]) -> list[str]:
    """Every rollout id named by a request or a satisfied record, newest id first."""
    ids: set[str] = set()
    for view in views:
        for key, parse in (
            (rebootrequest.REQUEST_ANNOTATION, rebootrequest.parse_request),
            (rebootrequest.SATISFIED_ANNOTATION, lambda t: rebootrequest.parse_satisfied(t).request),
        ):
            text = view.annotations.get(key)
            if not text:
                continue
            try:
                rid = parse(text).rollout
            except ValueError:
                continue
            if rid:
                ids.add(rid)
    return sorted(ids, reverse=True)


def render(prog: RolloutProgress) -> str:
    """``rollout R (reason): D/N rebooted``, then one line per node."""
    lines = [f"rollout {prog.rollout} ({prog.reason}): {prog.done}/{len(prog.nodes)} rebooted"]
    width = max((len(n.node) for n in prog.nodes), default=4)
    for n in prog.nodes:
        if n.progress is Progress.PENDING:
            detail = f"pending (bootID {n.old_boot_id})"
        else:
            when = f" at {format_rfc3339(n.at)}" if n.at else ""
            detail = f"rebooted{when} (bootID {n.old_boot_id} -> {n.new_boot_id})"
        lines.append(f"  {n.node.ljust(width)}  {detail}")
    return "\n".join(lines) + "\n"


def to_json(prog: RolloutProgress) -> dict[str, Any]:
    return {
        "rollout": prog.rollout,
        "reason": prog.reason,
        "done": prog.done,
        "total": len(prog.nodes),
        "complete": prog.complete,
        "nodes": [
            {
                "node": n.node,
                "state": n.progress.value,
                "bootID": n.old_boot_id,
                "newBootID": n.new_boot_id or None,
                "at": format_rfc3339(n.at) if n.at else None,
            }
            for n in prog.nodes
        ],
    }
