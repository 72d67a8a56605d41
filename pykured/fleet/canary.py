"""Canary rollouts as a pure rule: have the first nodes come back, passed their gates and soaked?

``pykured rollout --canary N [--canary-soak D] [--canary-timeout T]`` requests a reboot of the first ``N``
nodes only (the roll's order). The rest are requested once every canary has

* rebooted for this rollout (its ``pykured.dev/reboot-request-satisfied`` names the rollout id),
* given its lock slot back (its after-reboot hooks and settle gates passed), and
* stayed Ready for ``D`` since it came back.

A canary fails when it has not done all that ``T`` after its request, or when a halt names it; the run
(:mod:`pykured.fleet.canaryrun`) then sets the halt (``canary X failed: …``), so nothing else of the
rollout, or of any roll, reboots until ``pykured unfreeze``. Pure: the Nodes, the lock holders, the freeze
and ``now`` are passed in.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Collection, Sequence

from pykured.core.times import format_rfc3339
from pykured.cycle.state import NodeState
from pykured.policy.freeze import FreezeRecord
from pykured.policy.halt import format_deadline
from pykured.requests import record as rebootrequest


@dataclasses.dataclass(frozen=True, slots=True)
class CanaryState:
    """Where the canaries are."""

    passed: tuple[str, ...] = ()
    waiting: tuple[tuple[str, str], ...] = ()
    """(node, what it waits for)."""
    failed: str = ""
    """Why the canary stage failed ("" while it has not)."""

    @property
    def done(self) -> bool:
        return not self.waiting and not self.failed


def _satisfied_for(view: NodeState, rollout: str) -> datetime.datetime | None:
    text = view.annotations.get(rebootrequest.SATISFIED_ANNOTATION)
    if not text:
        return None
    try:
        record = rebootrequest.parse_satisfied(text)
    except ValueError:
        return None
    return record.satisfied_at if record.request.rollout == rollout else None


def check(
    views: Sequence[NodeState],
    *,
    rollout: str,
    holders: Collection[str],
    freeze: FreezeRecord | None,
    soak: datetime.timedelta,
    timeout: datetime.timedelta,
    started: datetime.datetime,
    now: datetime.datetime,
) -> CanaryState:
    """The canaries' state (``views``: the canary nodes, read now)."""
    passed: list[str] = []
    waiting: list[tuple[str, str]] = []
    for view in sorted(views, key=lambda v: v.name):
        if freeze is not None and freeze.active(now) and freeze.halted == view.name:
            return CanaryState(failed=f"canary {view.name} failed: {freeze.reason}")
        back = _satisfied_for(view, rollout)
        if back is None:
            waiting.append((view.name, "its reboot"))
        elif view.name in holders:
            waiting.append((view.name, "its after-reboot gates (it holds the lock)"))
        elif not view.ready or view.ready_since is None:
            waiting.append((view.name, "Ready"))
        else:
            since = max(back, view.ready_since)
            if now - since < soak:
                waiting.append((view.name, f"its soak (Ready since {format_rfc3339(since)})"))
            else:
                passed.append(view.name)
    if waiting and now - started >= timeout:
        name, what = waiting[0]
        why = f"canary {name} failed: still waiting for {what} after {format_deadline(timeout)}"
        return CanaryState(tuple(passed), (), why)
    return CanaryState(tuple(passed), tuple(waiting))
