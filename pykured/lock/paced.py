"""Pacing per node group over any ``Lock``: a group slot Lease first, then the cluster slot.

See :mod:`pykured.lock.groups` for the rule and the slot choice. :class:`GroupPacedLock` wraps the cluster
lock (``--lock-backend=lease``): ``acquire`` takes a group slot of the node's label value (compare-and-swap
on ``<prefix>-g-<slug>-<i>``), then the cluster slot; if the cluster slot is not free the group slot is
given back at once. ``release`` frees the cluster slot, then the group slot. With
``--concurrency-per-label=P%`` a group's limit is P % of the Nodes carrying its label value (at least 1;
counted by :func:`pykured.lock.counts.label_count`, 1 while they cannot be counted). Everything else is the
cluster lock's, ``watched`` and the wait included: a node refused by its full group waits on the cluster
lock's watch, as the group's holders hold cluster slots and free them first. The exception is a group
holder that holds no cluster slot (between its two writes, or crashed there): its slot goes stale after the
grace with no change of the cluster lock, so the wait after such a refusal ends by then; under pykured's
admission policies it is not taken over (only its holder frees a slot, :mod:`pykured.lock.refusals`). A
node without the label is paced by the cluster lock alone. A group slot is owned by its holder's Node, so the
garbage collector deletes it with that Node.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from pykured.core.errors import ConflictError, KubeError, NotFoundError
from pykured.lock.base import AcquireResult, Lock
from pykured.lock.budget import Budget
from pykured.lock.groups import (
    DEFAULT_GRACE_NS,
    GROUP_ANNOTATION,
    GROUP_LOCK_LABEL,
    GroupHolder,
    choose_group_slot,
    recheck_after_ns,
)
from pykured.lock.lease import lease_body, lease_entry, node_owner
from pykured.lock.record import LockEntry
from pykured.lock.refusals import Refusals

if TYPE_CHECKING:
    from pykured.kube.api import KubeApi
    from pykured.kube.client import Obj

logger = logging.getLogger(__name__)

RECHECK_MARGIN = 0.5
"""Seconds a wait after a refusal by the group lasts beyond its holder's grace (it is stale by then)."""


def node_label_lookup(kube: KubeApi, label: str) -> Callable[[str], str | None]:
    """``group_of``: the node's value of ``label`` (None when unlabelled or the Node is gone)."""

    def group_of(node: str) -> str | None:
        try:
            labels = (kube.get_node(node).get("metadata") or {}).get("labels") or {}
        except NotFoundError:
            return None
        value = labels.get(label)
        return str(value) if value else None

    return group_of


class GroupPacedLock:
    """A ``Lock`` that also keeps at most ``limit`` holders per group (implements ``Lock``)."""

    def __init__(
        self,
        inner: Lock,
        kube: KubeApi,
        *,
        namespace: str,
        prefix: str,
        label: str,
        limit: int,
        group_of: Callable[[str], str | None],
        grace_ns: int = DEFAULT_GRACE_NS,
        share: Budget | None = None,
        group_count: Callable[[str], int | None] | None = None,
    ) -> None:
        self.inner = inner
        self._kube = kube
        self._namespace = namespace
        self._prefix = prefix
        self.label = label
        self.limit = max(limit, 1)
        self._share = share
        """``--concurrency-per-label=P%``: each group's limit is P % of its nodes (``group_count``), at least
        1; it replaces ``limit``."""
        self._group_count = group_count
        self._group_of = group_of
        self._grace_ns = grace_ns
        self._selector = f"{GROUP_LOCK_LABEL}={prefix}"
        self._refusals = Refusals(backend=inner.backend, where=f"{namespace}/{prefix}-g-*")
        self._recheck_at: float | None = None
        """When (monotonic) the last refusal by a full group is to be looked at again, if before a change of
        the cluster lock (a hint: shared between threads, it only shortens a wait)."""

    @property
    def backend(self) -> str:
        return self.inner.backend

    @property
    def node_id(self) -> str:
        return self.inner.node_id

    @property
    def concurrency(self) -> int:
        return self.inner.concurrency

    @property
    def watched(self) -> bool:
        """The cluster lock's: its wait also serves a node refused by its group (see the module docstring)."""
        return self.inner.watched

    # -- group slots --------------------------------------------------------------------------------------

    def group_limit(self, group: str) -> int:
        """The holders ``group`` may have at once: ``limit``, or the share of its nodes counted now."""
        if self._share is None:
            return self.limit
        count = self._group_count(group) if self._share.percent and self._group_count is not None else None
        return self._share.limit(count)

    def _group_leases(self) -> dict[str, Obj]:
        answer = self._kube.list_leases(self._namespace, label_selector=self._selector)
        return {item["metadata"]["name"]: item for item in answer.get("items") or []}

    @staticmethod
    def _holder(lease: Obj) -> GroupHolder | None:
        entry = lease_entry(lease)
        if entry is None:
            return None
        group = ((lease.get("metadata") or {}).get("annotations") or {}).get(GROUP_ANNOTATION, "")
        return GroupHolder(entry.node_id, str(group), entry.created_ns)

    def _body(
        self,
        name: str,
        base: Obj | None,
        holder: str | None,
        group: str,
        now_ns: int,
        *,
        owner: Obj | None = None,
    ) -> Obj:
        lease = lease_body(
            self._namespace,
            name,
            base,
            labels={GROUP_LOCK_LABEL: self._prefix},
            holder=holder,
            now_ns=now_ns,
            owner=owner,
        )
        lease["metadata"]["annotations"][GROUP_ANNOTATION] = group
        return lease

    def _take_group_slot(self, me: str, group: str, now_ns: int) -> tuple[str | None, bool, tuple[str, ...]]:
        """(slot, newly taken, group holders)."""
        leases = self._group_leases()
        slots = {name: self._holder(lease) for name, lease in leases.items()}
        cluster = {e.node_id for e in self.inner.holders(now_ns=now_ns)}
        kept = {n for n, h in slots.items() if h is not None and self._refusals.refused(n, h)}
        choice = choose_group_slot(
            prefix=self._prefix,
            group=group,
            limit=self.group_limit(group),
            slots=slots,
            me=me,
            cluster_holders=cluster,
            now_ns=now_ns,
            grace_ns=self._grace_ns,
            kept=kept,
        )
        if choice.held is not None:
            return choice.held, False, choice.holders
        if choice.full:
            after = recheck_after_ns(
                slots, group=group, cluster_holders=cluster, now_ns=now_ns, grace_ns=self._grace_ns
            )
            self._recheck(after)
            return None, False, choice.holders
        owner = node_owner(self._kube, me)
        holders = choice.holders
        for name in choice.candidates:
            base = leases.get(name)
            body = self._body(name, base, me, group, now_ns, owner=owner)
            try:
                if base is None:
                    self._kube.create_lease(self._namespace, body)
                else:
                    self._kube.replace_lease(self._namespace, name, body)
            except ConflictError:
                continue
            except KubeError as exc:
                stale = slots.get(name)
                if stale is None or stale.node_id == me:
                    raise
                if not self._refusals.note(
                    exc, slot=name, holding=stale, holder=stale.node_id, write="take the stale group slot"
                ):
                    raise
                holders = (*holders, stale.node_id)  # another node's: under the policies its holder frees it
                continue
            return name, True, holders
        self._recheck(self._grace_ns)  # each candidate was taken first: by holders live for the grace at most
        return None, False, holders

    def _recheck(self, after_ns: int | None) -> None:
        self._recheck_at = None if after_ns is None else time.monotonic() + after_ns / 1e9 + RECHECK_MARGIN

    def _free_group_slots(self, me: str) -> None:
        for _ in range(5):
            try:
                for name, lease in self._group_leases().items():
                    holder = self._holder(lease)
                    if holder is not None and holder.node_id == me:
                        self._kube.replace_lease(
                            self._namespace, name, self._body(name, lease, None, holder.group, 0)
                        )
                return
            except ConflictError:
                continue
            except KubeError as exc:  # stale after the grace anyway
                logger.warning("Could not free the group lock slot of %s: %s", me, exc)
                return

    # -- the Lock protocol --------------------------------------------------------------------------------

    def acquire(self, *, unschedulable: bool, now_ns: int, node_id: str | None = None) -> AcquireResult:
        me = node_id or self.node_id
        self._recheck_at = None
        if self.inner.holding(now_ns=now_ns, node_id=me) is not None:
            return self.inner.acquire(unschedulable=unschedulable, now_ns=now_ns, node_id=me)
        group = self._group_of(me)
        if not group:
            return self.inner.acquire(unschedulable=unschedulable, now_ns=now_ns, node_id=me)
        slot, fresh, holders = self._take_group_slot(me, group, now_ns)
        if slot is None:
            logger.info("Lock for %s=%s already held by %s", self.label, group, ", ".join(holders))
            return AcquireResult(False, tuple(LockEntry(h) for h in holders))
        result = self.inner.acquire(unschedulable=unschedulable, now_ns=now_ns, node_id=me)
        if not result.acquired:
            self._free_group_slots(me)
        elif fresh:
            logger.info("Took group lock slot %s for %s=%s", slot, self.label, group)
        return result

    def holding(
        self, *, now_ns: int, honour_ttl: bool = True, node_id: str | None = None
    ) -> LockEntry | None:
        return self.inner.holding(now_ns=now_ns, honour_ttl=honour_ttl, node_id=node_id)

    def release(self, *, node_id: str | None = None) -> bool:
        me = node_id or self.node_id
        released = self.inner.release(node_id=me)
        self._free_group_slots(me)
        return released

    def holders(self, *, now_ns: int) -> tuple[LockEntry, ...]:
        return self.inner.holders(now_ns=now_ns)

    def wait_for_change(self, timeout: float) -> None:
        """The cluster lock's wait; after a refusal by a group holder that holds no cluster slot, no longer
        than until that holder is stale."""
        recheck = self._recheck_at
        if recheck is not None:
            timeout = min(timeout, max(recheck - time.monotonic(), 0.0))
        self.inner.wait_for_change(timeout)

    def group_holders(self, *, now_ns: int | None = None) -> dict[str, list[str]]:
        """Live group holders by group value (for status)."""
        now = time.time_ns() if now_ns is None else now_ns
        cluster = {e.node_id for e in self.inner.holders(now_ns=now)}
        out: dict[str, list[str]] = {}
        for lease in self._group_leases().values():
            holder = self._holder(lease)
            if holder is not None and (
                holder.node_id in cluster or now - holder.acquired_ns < self._grace_ns
            ):
                out.setdefault(holder.group, []).append(holder.node_id)
        return out
