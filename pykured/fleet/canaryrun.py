"""A canary rollout, run: request the canaries, wait until they passed, then request the rest.

``pykured rollout --canary N`` requests a reboot of the first ``N`` nodes in the roll's order, then reads
the canaries, the lock holders and the freeze every ``interval`` seconds and asks the canary rule
(:func:`pykured.fleet.canary.check`) where they are; once every canary passed, the rest are requested. When
a canary fails, the halt is set (unless a freeze or halt is in force already), so nothing else of the
rollout, or of any roll, reboots until ``pykured unfreeze``: written through
:func:`pykured.policy.writer.add_halt`, as an agent's halt is. What happens is told on ``out`` as it
happens, one line each.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Sequence
from typing import TextIO

from pykured.core import errors
from pykured.cycle.state import NodeState
from pykured.fleet import canary, requester
from pykured.fleet import view as fleetview
from pykured.fleet.freeze import policy_or_why
from pykured.gocompat.goflags import format_duration
from pykured.kube.api import KubeApi
from pykured.policy import writer
from pykured.policy.document import PolicyMapError
from pykured.policy.freeze import FreezeRecord
from pykured.roll import order as roll


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def in_roll_order(views: Sequence[NodeState], now: datetime.datetime) -> list[NodeState]:
    """``views`` in the roll's order (the longest without a reboot first), as the canaries are chosen."""
    by_name = {v.name: v for v in views}
    rows = fleetview.rows(views, [], now=now)
    members = sorted((roll.Member(r.node, r.last_reboot, r.waiting_since) for r in rows), key=roll.order_key)
    return [by_name[m.node] for m in members]


def canary_rollout(
    kube: KubeApi,
    views: Sequence[NodeState],
    *,
    canaries: int,
    reason: str,
    rid: str,
    who: str,
    soak: datetime.timedelta,
    timeout: datetime.timedelta,
    interval: float,
    namespace: str,
    ds_name: str,
    annotation: str,
    lease_prefix: str,
    policy_configmap: str,
    out: TextIO,
    now: Callable[[], datetime.datetime] = _now,
    sleep: Callable[[float], object] = time.sleep,
) -> bool:
    """Request the first ``canaries`` of ``views``, wait for them (:mod:`pykured.fleet.canary`), then the
    rest; ``False`` when a canary failed (the halt is set, the rest not requested)."""
    ordered = in_roll_order(views, now())
    first, rest = ordered[:canaries], ordered[canaries:]
    started = now()
    for o in requester.request_reboot(kube, first, reason=reason, requested_by=who, now=started,
                                      rollout_id=rid):  # fmt: skip
        out.write(requester.describe(o, reason) + " (canary)\n")
    soaked = format_duration(round(soak.total_seconds()) * 1_000_000_000)
    out.write(f"rollout {rid}: {len(first)} canary node(s) first; {len(rest)} after they soaked {soaked}\n")
    out.flush()
    names = [v.name for v in first]
    shown = ""
    while True:
        moment = now()
        locks = requester.lock_holders(
            kube, namespace=namespace, ds_name=ds_name, annotation=annotation, lease_prefix=lease_prefix,
        )  # fmt: skip
        holders = {h for info in locks for h in info.holders}
        frozen = policy_or_why(kube, namespace=namespace, name=policy_configmap)[0].in_force(moment)
        state = canary.check(
            requester.nodes(kube, names=names), rollout=rid, holders=holders, freeze=frozen, soak=soak,
            timeout=timeout, started=started, now=moment,
        )  # fmt: skip
        if state.failed:
            _failed(kube, state.failed, rid=rid, rest=len(rest), namespace=namespace, name=policy_configmap,
                    out=out, now=now)  # fmt: skip
            return False
        if state.done:
            break
        line = "waiting for " + ", ".join(f"{n}: {what}" for n, what in state.waiting)
        if line != shown:
            out.write(line + "\n")
            out.flush()
            shown = line
        sleep(interval)
    out.write(f"rollout {rid}: canaries passed ({', '.join(names)}); requesting the rest\n")
    for o in requester.request_reboot(kube, rest, reason=reason, requested_by=who, now=now(),
                                      rollout_id=rid):  # fmt: skip
        out.write(requester.describe(o, reason) + "\n")
    out.write(f"follow it with: pykured rollout status {rid} --watch\n")
    return True


def _failed(
    kube: KubeApi,
    why: str,
    *,
    rid: str,
    rest: int,
    namespace: str,
    name: str,
    out: TextIO,
    now: Callable[[], datetime.datetime],
) -> None:
    """Halt (unless a freeze or halt is in force already) and say so."""
    moment = now()
    record = FreezeRecord(reason=f"rollout {rid}: {why}", by=requester.whoami(kube), at=moment)
    try:
        current = writer.add_halt(kube, record=record, now=moment, namespace=namespace, name=name)
    except (errors.KubeError, PolicyMapError) as exc:
        out.write(f"rollout {rid}: {why}; could not set the halt: {exc}\n")
        return
    held = current.describe() if current is not None else record.describe()
    out.write(f"rollout {rid}: {why}; the other {rest} node(s) were not requested; {held}\n")
    out.write("after fixing it: pykured unfreeze, then run the rollout again\n")
