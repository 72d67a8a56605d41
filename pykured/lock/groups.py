"""Pacing per node group (zone, pool): at most N nodes of one label value hold the Lease lock at once.

With ``--lock-backend=lease`` and ``--concurrency-label topology.kubernetes.io/zone``, a node must hold a
*group slot* before it takes a cluster slot: the Leases ``<prefix>-g-<slug>-<i>`` for ``i`` below
``--concurrency-per-label``, labelled ``pykured.dev/lock-group=<prefix>`` and annotated
``pykured.dev/group=<label value>``. Each slot is a compare-and-swap like the cluster slots, so a group never
has more holders than its limit, and ``--concurrency`` still bounds the cluster. A node without the label
is paced only by ``--concurrency``.

The order is group slot, then cluster slot; when no cluster slot is free the group slot is given back at
once. A group slot whose holder holds no cluster slot is stale after ``grace`` (a crash between the two
writes, or the holder's lock TTL expired) and may be taken over; under pykured's admission policies such a
take is refused (only its holder frees a slot), and the slot then counts as held (``kept``). This module is
the pure part: names, the slot choice and when a full group must be looked at again, ``now`` passed in.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Collection, Mapping

GROUP_LOCK_LABEL = "pykured.dev/lock-group"
GROUP_ANNOTATION = "pykured.dev/group"
DEFAULT_GRACE_NS = 30 * 1_000_000_000
_UNSAFE = re.compile(r"[^a-z0-9-]+")


def group_slug(value: str) -> str:
    """A DNS-label-safe name part for a label value: readable prefix plus a hash (no collisions)."""
    readable = _UNSAFE.sub("-", value.lower()).strip("-")[:30].strip("-") or "x"
    return f"{readable}-{hashlib.sha256(value.encode()).hexdigest()[:8]}"


def group_lease_name(prefix: str, value: str, index: int) -> str:
    return f"{prefix}-g-{group_slug(value)}-{index}"


@dataclasses.dataclass(frozen=True, slots=True)
class GroupHolder:
    """The holder of one group slot."""

    node_id: str
    group: str
    acquired_ns: int


@dataclasses.dataclass(frozen=True, slots=True)
class GroupChoice:
    """The outcome of :func:`choose_group_slot`."""

    held: str | None = None
    """The slot this node already holds in its group."""
    candidates: tuple[str, ...] = ()
    """Slots to try, in order (empty with ``full``)."""
    holders: tuple[str, ...] = ()
    """The live holders of the group (for the log line)."""

    @property
    def full(self) -> bool:
        return self.held is None and not self.candidates


def is_live(holder: GroupHolder, cluster_holders: Collection[str], now_ns: int, grace_ns: int) -> bool:
    """A group holder counts while it holds a cluster slot, or for ``grace`` after taking the group slot."""
    return holder.node_id in cluster_holders or now_ns - holder.acquired_ns < grace_ns


def choose_group_slot(
    *,
    prefix: str,
    group: str,
    limit: int,
    slots: Mapping[str, GroupHolder | None],
    me: str,
    cluster_holders: Collection[str],
    now_ns: int,
    grace_ns: int = DEFAULT_GRACE_NS,
    kept: Collection[str] = (),
) -> GroupChoice:
    """Which group slot ``me`` may take. ``slots``: every group Lease by name (None = free); ``kept``: the
    slots whose holder counts whatever its grace (a take of them was refused)."""
    mine = [n for n, h in slots.items() if h is not None and h.node_id == me and h.group == group]
    if mine:
        return GroupChoice(held=sorted(mine)[0])
    live = sorted(
        (n, h)
        for n, h in slots.items()
        if h is not None and h.group == group and (n in kept or is_live(h, cluster_holders, now_ns, grace_ns))
    )
    holders = tuple(h.node_id for _, h in live)
    if len(live) >= max(limit, 1):
        return GroupChoice(holders=holders)
    names = [group_lease_name(prefix, group, i) for i in range(max(limit, 1))]
    empty = [n for n in names if slots.get(n) is None]
    stale = [
        n
        for n in names
        if (h := slots.get(n)) is not None
        and n not in kept
        and not is_live(h, cluster_holders, now_ns, grace_ns)
    ]
    return GroupChoice(candidates=tuple(empty + stale), holders=holders)


def recheck_after_ns(
    slots: Mapping[str, GroupHolder | None],
    *,
    group: str,
    cluster_holders: Collection[str],
    now_ns: int,
    grace_ns: int = DEFAULT_GRACE_NS,
) -> int | None:
    """How long after ``now`` a full group must be looked at again: until its first holder that counts only
    by its grace (it holds no cluster slot) goes stale. ``None`` when every holder holds a cluster slot (its
    release is a change of the cluster lock, which ends the wait by itself)."""
    waits = [
        h.acquired_ns + grace_ns - now_ns
        for h in slots.values()
        if h is not None and h.group == group and h.node_id not in cluster_holders
        and is_live(h, cluster_holders, now_ns, grace_ns)
    ]  # fmt: skip
    return min(waits, default=None)
