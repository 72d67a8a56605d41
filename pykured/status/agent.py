"""The compact status an agent publishes on its Node, for ``pykured status``.

Concept: only the agent knows its sentinel, its window and its blockers; the fleet view reads them from one
``pykured.dev/status`` annotation per Node instead of asking every agent. The agent builds the status after
each pass and writes it only when it differs from what the Node already carries, so a steady state costs
no write (it holds no timestamps that move by themselves).

The value is compact JSON with sorted keys; absent fields are omitted::

    {"bootID":"…","lastBootID":"…","lastReboot":"2026-11-30T21:40:00Z","lockWait":true,
     "reason":"Reboot required","request":"kernel 6.12","sentinel":true,"step":"acquire",
     "condition":"KernelDeadlock=True since 2026-11-30T21:35:00Z: DockerHung: task docker:7 blocked",
     "blocked":"alerts","blockedBy":"Reboot blocked: 1 active alerts: [KubePodCrashLooping]",
     "resumeRolls":true,"freeze":"on","policy":"kube-system/kured-policy","waitingSince":"2026-11-30T23:10:00Z","windowOpens":"2026-12-01T02:00:00Z","v":"0.1.0"}

``step`` is the decision of :mod:`pykured.cycle.decide` (``wait``, ``blocked``, ``acquire``,
``drain-and-reboot``, …); ``lastReboot``/``lastBootID`` record the last bootID change the agent saw (its
previous status named another bootID); ``waitingSince`` is when the node began to need its pending reboot
(kept from pass to pass while it needs it, on the same boot; the publisher copies both into the roll's own
record, :mod:`pykured.roll.record`, which the roll's order reads); ``resumeRolls`` says the agent takes the
lock in the roll's order (:mod:`pykured.roll.order`); ``freeze`` says whether the agent honours the freeze
(``on``: it reads the policy ConfigMap; ``forbidden``: its RBAC does not let it; ``off``:
``--policy-configmap=""``; ``pending``: not read yet; absent: an agent that predates the field) and
``policy`` which ConfigMap it watches (``namespace/name``), so ``pykured freeze`` counts the agents that
honour the freeze it sets;
``lastCycle`` how many seconds the node's last cycle held the lock (``pykured plan`` estimates from it);
``drainBlockedBy`` the latest refusal that holds the node's drain back (an eviction denied by an admission
webhook, with the webhook's message; a PodDisruptionBudget's 429), written while the drain retries it and
kept after a drain that failed on it, until a drain completes or the node needs no reboot;
``drain`` the running drain's progress (:mod:`pykured.drain.progress`: when it began, how many pods it still
waits on, by reason, and the first few of them with why each is held and since when), written while a slow
drain runs and removed when it ends. A FleetLock server drains nodes no agent runs on: on such a node the
record carries only ``drain`` (no ``v``, no ``step``), and it is removed with the drain's end.
Pure: no I/O, ``now`` is passed in. Reading is bounded (:mod:`pykured.core.boundedjson`) and total:
:func:`parse` raises only :class:`ValueError` (``pykured status`` shows the node as unreadable);
:func:`decode` never raises (unreadable = absent, for the agent's own uses).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
from collections.abc import Mapping
from typing import Any

from pykured.core import boundedjson
from pykured.core.times import format_rfc3339, parse_rfc3339
from pykured.drain import progress as drainprogress
from pykured.kube.node import PYKURED_PREFIX

STATUS_ANNOTATION = PYKURED_PREFIX + "status"
logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, slots=True)
class AgentStatus:
    """What one agent says about its node.

    The daemon builds it once per pass with what the pass found; the publisher adds its version, the Node's
    bootID and the drain's blocker, and :func:`build` what carries over from the published status."""

    version: str = ""
    boot_id: str = ""
    step: str = ""
    reason: str = ""
    sentinel: bool = False
    request: str | None = None
    """The reason of the pending reboot request, if one names the current boot."""
    condition: str | None = None
    """The Node condition that makes the node need a reboot (``--reboot-condition``), described."""
    blocked: str = ""
    """The blocker kind (``alerts``, ``pods``, …) while a blocker holds the reboot back."""
    blocked_by: str = ""
    window_opens: datetime.datetime | None = None
    """When the closed maintenance window opens next (absent while it is open)."""
    lock_wait: bool = False
    """The node waits for the lock (held by others, or nodes ahead of it in the roll). Who holds it is not
    written here: it changes at every hand-over, and a Node write per waiting node per hand-over is what
    the 100-agent benchmark showed; ``pykured status`` reads the holders from the lock itself."""
    last_reboot: datetime.datetime | None = None
    last_boot_id: str = ""
    waiting_since: datetime.datetime | None = None
    """When the node began to need its pending reboot (None while it needs none)."""
    resume_rolls: bool = False
    """The agent takes the lock in the roll's order (``--resume-rolls``), not in kured's race."""
    freeze: str = ""
    """Whether the agent honours the freeze: ``on``, ``forbidden``, ``off``, ``pending`` ("": not said)."""
    policy: str = ""
    """The policy ConfigMap the agent watches, ``namespace/name`` ("" when off)."""
    last_cycle_s: int | None = None
    """How long the node's last reboot cycle took, lock taken to lock released (seconds; for ``plan``)."""
    drain_blocked_by: str = ""
    """The latest eviction refusal holding the drain back (``eviction of pod ns/name refused: …``)."""
    drain: drainprogress.DrainProgress | None = None
    """The running drain's progress (None: no drain runs, or it has not been recorded yet)."""

    @property
    def needs_reboot(self) -> bool:
        return self.sentinel or self.request is not None or self.condition is not None

    @property
    def from_agent(self) -> bool:
        """Written by an agent about itself (not a record that carries only a FleetLock server's drain)."""
        return bool(self.version or self.step or self.boot_id)


def encode(status: AgentStatus) -> str:
    """The annotation value."""
    data: dict[str, Any] = {}
    if status.from_agent or status.drain is None:
        data.update({"v": status.version, "bootID": status.boot_id, "step": status.step})
    if status.blocked:
        data["blocked"] = status.blocked
        data["blockedBy"] = status.blocked_by
    if status.last_reboot is not None:
        data["lastReboot"] = format_rfc3339(status.last_reboot)
        data["lastBootID"] = status.last_boot_id
    optional: dict[str, Any] = {
        "reason": status.reason or None,
        "sentinel": True if status.sentinel else None,
        "request": status.request,
        "condition": status.condition,
        "windowOpens": format_rfc3339(status.window_opens) if status.window_opens is not None else None,
        "lockWait": True if status.lock_wait else None,
        "waitingSince": format_rfc3339(status.waiting_since) if status.waiting_since is not None else None,
        "resumeRolls": True if status.resume_rolls else None,
        "freeze": status.freeze or None,
        "policy": status.policy or None,
        "lastCycle": status.last_cycle_s,
        "drainBlockedBy": status.drain_blocked_by or None,
        "drain": drainprogress.to_json(status.drain) if status.drain is not None else None,
    }
    data.update((key, value) for key, value in optional.items() if value is not None)
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _s(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key, "")
    return value if isinstance(value, str) else ""


def _seconds(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def decode(text: str | None) -> AgentStatus | None:
    """Read an annotation value; ``None`` when absent or unreadable (never raises)."""
    if not text:
        return None
    try:
        return parse(text)
    except ValueError:
        return None


def parse(text: str) -> AgentStatus:
    """Read an annotation value; :class:`ValueError` (saying why) when it is not a status record."""
    try:
        data = boundedjson.loads(text)
    except boundedjson.UnreadableJSON as exc:
        raise ValueError(f"unreadable status record: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError("unreadable status record: not a JSON object")
    holders = data.get("lockHolders")  # written by earlier pykured versions
    request, condition = data.get("request"), data.get("condition")
    return AgentStatus(
        version=_s(data, "v"),
        boot_id=_s(data, "bootID"),
        step=_s(data, "step"),
        reason=_s(data, "reason"),
        sentinel=data.get("sentinel") is True,
        request=request if isinstance(request, str) else None,
        condition=condition if isinstance(condition, str) else None,
        blocked=_s(data, "blocked"),
        blocked_by=_s(data, "blockedBy"),
        window_opens=parse_rfc3339(_s(data, "windowOpens")),
        lock_wait=data.get("lockWait") is True or (isinstance(holders, list) and bool(holders)),
        last_reboot=parse_rfc3339(_s(data, "lastReboot")),
        last_boot_id=_s(data, "lastBootID"),
        waiting_since=parse_rfc3339(_s(data, "waitingSince")),
        resume_rolls=data.get("resumeRolls") is True,
        freeze=_s(data, "freeze"),
        policy=_s(data, "policy"),
        last_cycle_s=_seconds(data.get("lastCycle")),
        drain_blocked_by=_s(data, "drainBlockedBy"),
        drain=_drain(data.get("drain")),
    )


def _drain(value: Any) -> drainprogress.DrainProgress | None:
    """The drain's record (absent when it is not one: one log line, the rest of the status is read)."""
    if value is None:
        return None
    found = drainprogress.from_json(value)
    if found is None:
        logger.warning("The drain record in %s cannot be read: ignored", STATUS_ANNOTATION)
    return found


def reported_boot_ids(annotations: Mapping[str, str]) -> tuple[str, ...]:
    """The boots the agent's published status names: the one it was on and the one before its last reboot
    (what the request keeper counts as left behind, :mod:`pykured.requests.keeper`)."""
    status = decode(annotations.get(STATUS_ANNOTATION))
    return (status.boot_id, status.last_boot_id) if status is not None else ()


def build(previous: AgentStatus | None, current: AgentStatus, *, now: datetime.datetime) -> AgentStatus:
    """The status to publish: this pass's ``current`` with what carries over from the ``previous`` one (its
    ``last_reboot``, ``last_boot_id`` and ``waiting_since`` are set here, and a ``last_cycle_s`` of None
    keeps the previous one).

    A bootID change is detected when the previous status named another (non-empty) bootID; its time is
    ``now``, i.e. when the agent first saw the new boot. ``waiting_since`` is carried over while the node
    needs a reboot on the same boot, and starts at ``now`` when it begins to need one.
    """
    boot_id = current.boot_id
    last_reboot = previous.last_reboot if previous else None
    last_boot_id = previous.last_boot_id if previous else ""
    if previous is not None and previous.boot_id and boot_id and previous.boot_id != boot_id:
        last_reboot = now.astimezone(datetime.UTC).replace(microsecond=0)
        last_boot_id = previous.boot_id
    waiting_since = None
    if current.needs_reboot:
        same_boot = previous is not None and previous.boot_id == boot_id
        carried = previous.waiting_since if previous is not None and same_boot else None
        waiting_since = carried or now.astimezone(datetime.UTC).replace(microsecond=0)
    last_cycle_s = current.last_cycle_s
    return dataclasses.replace(
        current,
        last_reboot=last_reboot,
        last_boot_id=last_boot_id,
        waiting_since=waiting_since,
        last_cycle_s=last_cycle_s if last_cycle_s is not None or previous is None else previous.last_cycle_s,
    )
