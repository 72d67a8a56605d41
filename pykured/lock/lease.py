"""The Lease lock: one ``coordination.k8s.io/v1`` Lease per slot, watched so a freed slot is taken in ~1 s.

Not in kured (its PR #835 proposed Leases; issues #11, #25). The model is poseidon/fleetlock's Lease, with
one object per slot instead of one per group:

* Slots are the Leases ``<prefix>-0`` … ``<prefix>-(N-1)``, labelled ``app.kubernetes.io/managed-by=pykured``
  and ``pykured.dev/lock=<prefix>``. ``spec.holderIdentity`` is the node; ``acquireTime``/``renewTime``
  (MicroTime, never renewed) and ``leaseDurationSeconds`` (from ``--lock-ttl``, rounded up; unset for 0 =
  never expires) give kured's TTL rule. ``pykured.dev/unschedulable`` keeps the node's cordon memory.
* Each slot is a compare-and-swap: ``create`` (409 = someone was first) or ``update`` with the listed
  ``resourceVersion`` (409 = it changed). So a slot has at most one holder. Before taking one, the unexpired
  holders of *all* labelled Leases are counted (Leases left over from a larger ``--concurrency`` included).
* Release sets ``holderIdentity`` to null and keeps the object (``leaseTransitions`` counts handovers).
* A taken slot is owned by its holder's Node (an ``ownerReference`` with the Node's uid, read at the take;
  none when the Node cannot be read): when that Node is deleted, the garbage collector deletes the slot,
  and a waiter creates it anew. A free slot has no owner.
* Under pykured's admission policies an agent's token writes only its own node's slots, so its take of
  another node's expired slot and its freeing of a deleted holder's slot are refused: the slot then counts
  as held while that holding lasts, said once (:mod:`pykured.lock.refusals`). Without the policies both
  writes succeed, as kured's TTL takeover.
* A node that waits for a slot watches the labelled Leases from the listed resourceVersion and keeps its
  own copy of the slots from the watch's events. The watch goes on across waits and while the node holds a
  slot: one watch call after another (six hours each; one request renews it from the last version seen),
  re-listing only on 410 Gone. It ends when a call ends and the node neither waited since nor holds a slot
  (an idle agent keeps no watch on the Leases). While the watch is heard from (an event, or the API
  server's bookmark about once a minute, within ``LIVE_FOR`` seconds), every read of the slots (``holding``,
  ``acquire``, ``holders``) comes from that copy: a waiter, and a holder through its cycle, send nothing.
  Every write is still a compare-and-swap on the Lease's resourceVersion, so a copy a few milliseconds
  behind costs a 409, never a second holder; the answer to our own write goes into the copy at once, and
  the copy never goes back to an older version of a Lease.
* When a slot frees, each waiter draws a random delay of 0–``spread`` s and keeps watching; when its delay
  ends, it returns only if its copy still shows a free slot (and the daemon's next ``acquire`` takes it),
  else it goes on waiting and sends nothing. So a freed slot wakes, in the common case, the one waiter
  whose delay ends first: the others see its take in their watch before their own delay ends. The spread
  fits the crowd: from how soon after a free the others' takes come (the taker's ``acquireTime``), every
  waiter widens or narrows its spread (between ``stagger`` and ``STAGGER_MAX``) so that the first delay
  ends about ``GAP`` before the next one (a crowd of 60 spreads over about 15 s, and the first delay still
  ends within a fraction of a second). A
  waiter whose look found the slot taken all the same (a near tie: a 409, its one write) doubles its
  spread, up to ``STAGGER_MAX``. A waiter that has died or lost its watch never draws a delay, so it never
  holds a slot up: the next delay to end takes it. An expiring TTL also ends the wait. The order is random,
  as kured's race for the lock: ordering the waiters would need each to write its place (see
  :mod:`pykured.roll.queue`).
* Outside a wait and a hold (no watch), a LIST serves the same pass's next reads for ``FRESH`` seconds, and
  the answer to a release serves the next pass's: an agent after its reboot lists its slots once.
* An ambiguous write failure (5xx, timeout) is settled by re-listing; it is never blindly repeated.
* ``--max-unavailable`` (:mod:`pykured.lock.budget`): each ``acquire`` that may take a slot computes the
  limit, the lower of ``--concurrency`` and the budget (a percentage of the DaemonSet's nodes, one GET:
  :func:`pykured.lock.counts.daemonset_count`), and takes only a slot below it; the holders of every
  labelled Lease count against it. The watch's wait looks at the last limit computed (a hint: the take
  decides).
* RBAC: ``get``, ``list``, ``watch``, ``create``, ``update`` on leases in the namespace.
"""

from __future__ import annotations

import copy
import logging
import math
import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from pykured.core.errors import ConflictError, KubeError, LockError
from pykured.gocompat.goflags import Duration
from pykured.lock.base import AcquireResult, GoneHolderHook
from pykured.lock.budget import Budget, effective_limit
from pykured.lock.liveness import HolderLiveness
from pykured.lock.record import (
    GO_ZERO_TIME_NS,
    UNKNOWN_HOLDER,
    LockEntry,
    find,
    live,
    parse_go_time,
    ttl_expired,
)
from pykured.lock.refusals import Refusals
from pykured.lock.retry import read_until_deadline
from pykured.lock.spread import fitted, widened

if TYPE_CHECKING:
    from pykured.kube.api import KubeApi
    from pykured.kube.client import Obj

logger = logging.getLogger(__name__)

MANAGED_BY = "app.kubernetes.io/managed-by"
LOCK_LABEL = "pykured.dev/lock"
UNSCHEDULABLE_ANNOTATION = "pykured.dev/unschedulable"
_NS = 1_000_000_000
FRESH = 5.0
"""Seconds for which a LIST (or the answer to our release) stands in for the next read of the slots when no
watch keeps them (a pass on a loaded machine takes a few seconds; every write is still a compare-and-swap)."""
STAGGER = 1.0
"""The spread of the waiters' delays after a slot frees (seconds)."""
WATCH_SECONDS = 6 * 3600
"""A watch call's length when the API server sends bookmarks (one request renews it from its version)."""
SHORT_WATCH_SECONDS = 1800
"""A watch call's length when it sends none (a dead connection is noticed at the call's end)."""
QUIET_SECONDS = 330.0
"""No event nor bookmark for this long: the watch's connection is dead (the API server sends a bookmark every
minute or two)."""
WATCH_BACKOFF_MAX = 60.0
"""The longest pause between two failed watch calls (seconds; doubled from ``retry_interval``)."""
LIVE_FOR = 150.0
"""Seconds for which the watched copy stands in for a LIST after the watch's last event or bookmark (the API
server sends a bookmark every minute or two to an open watch): a watch silently cut off is not trusted
longer."""


def _version(rv: object) -> int | None:
    """A resourceVersion as a number (etcd's revision), or None when it is not one."""
    return int(rv) if isinstance(rv, str) and rv.isdigit() else None


def format_micro_time(ns: int) -> str:
    """Kubernetes ``MicroTime`` text (always six fraction digits, UTC): ``2026-06-30T11:29:16.917242Z``."""
    seconds, frac = divmod(ns, _NS)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{frac // 1000:06d}Z"


def lease_entry(lease: Obj) -> LockEntry | None:
    """The holder of a Lease as a lock entry; ``None`` when the slot is free. Total: a field of the wrong type
    reads as absent (a holder that is not text: the slot is held by :data:`UNKNOWN_HOLDER`)."""
    spec = _map(lease.get("spec"))
    holder = spec.get("holderIdentity") or ""
    if not holder:
        return None
    stamp = spec.get("renewTime") or spec.get("acquireTime")
    stamp = stamp if isinstance(stamp, str) else None
    try:
        created = parse_go_time(stamp)[0] if stamp is not None else GO_ZERO_TIME_NS
    except ValueError:
        created = GO_ZERO_TIME_NS
    seconds = spec.get("leaseDurationSeconds")
    duration = seconds if isinstance(seconds, int) and not isinstance(seconds, bool) and seconds > 0 else 0
    annotations = _map(_map(lease.get("metadata")).get("annotations"))
    unschedulable = annotations.get(UNSCHEDULABLE_ANNOTATION) == "true"
    name = holder if isinstance(holder, str) else UNKNOWN_HOLDER
    return LockEntry(name, unschedulable, created, duration * _NS, stamp)


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _by_name(leases: Mapping[str, Obj]) -> dict[str, LockEntry]:
    """The held slots' entries by Lease name."""
    return {name: e for name, lease in leases.items() if (e := lease_entry(lease)) is not None}


def _holding(entry: LockEntry) -> tuple[str, str | None, int]:
    """What identifies one holding of a slot: its holder, since when, for how long."""
    return entry.node_id, entry.created_raw, entry.ttl_ns


def lease_duration_seconds(ttl: Duration) -> int | None:
    """``leaseDurationSeconds`` for a TTL: rounded up to whole seconds, ``None`` (unset) for 0."""
    return math.ceil(ttl.ns / _NS) if ttl.ns > 0 else None


def node_owner(kube: KubeApi, node: str) -> Obj | None:
    """The ``ownerReference`` that makes the garbage collector delete a slot with its holder's Node: the Node
    as read now (its uid); ``None`` when it cannot be read (the slot is then written without an owner)."""
    try:
        uid = (kube.get_node(node).get("metadata") or {}).get("uid")
    except KubeError as exc:
        logger.debug("Could not read Node %s for the lock's owner reference: %s", node, exc)
        return None
    if not isinstance(uid, str) or not uid:
        return None
    return {"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid}


def lease_body(
    namespace: str,
    name: str,
    base: Obj | None,
    *,
    labels: dict[str, str],
    holder: str | None,
    now_ns: int,
    acquired_ns: int | None = None,
    duration_seconds: int | None = None,
    owner: Obj | None = None,
) -> Obj:
    """A pykured Lease to write: ``base`` (as read, with its resourceVersion; never changed itself, it may be
    the watched copy's) or a new one.

    Labelled ``managed-by=pykured`` plus ``labels``; held by ``holder`` since ``acquired_ns`` (default
    ``now_ns``) and renewed at ``now_ns``, or free (``holder`` None). ``leaseTransitions`` counts the takes
    of an existing Lease. Owned by ``owner`` (:func:`node_owner`, the holder's Node) while held, by nothing
    while free.
    """
    lease: Obj = (
        copy.deepcopy(base)
        if base
        else {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {},
        }
    )
    meta = lease.setdefault("metadata", {})
    meta.setdefault("labels", {}).update({MANAGED_BY: "pykured", **labels})
    meta["annotations"] = dict(meta.get("annotations") or {})
    meta.pop("ownerReferences", None)
    if holder and owner is not None:
        meta["ownerReferences"] = [owner]
    spec = lease.setdefault("spec", {})
    for key in ("holderIdentity", "acquireTime", "renewTime", "leaseDurationSeconds"):
        spec.pop(key, None)
    if holder:
        spec.update(
            holderIdentity=holder,
            acquireTime=format_micro_time(now_ns if acquired_ns is None else acquired_ns),
            renewTime=format_micro_time(now_ns),
        )
        spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (base is not None)
        if duration_seconds is not None:
            spec["leaseDurationSeconds"] = duration_seconds
    return lease


class LeaseLock:
    """The Lease-per-slot lock (implements ``Lock``)."""

    backend = "lease"

    def __init__(
        self,
        kube: KubeApi,
        *,
        namespace: str,
        prefix: str,
        node_id: str,
        concurrency: int,
        ttl: Duration,
        on_gone_holder: GoneHolderHook | None = None,
        stagger: float = STAGGER,
        retry_interval: float = 1.0,
        retry_timeout: float = 60.0,
        watch_timeout: int = WATCH_SECONDS,
        liveness_interval: float | None = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        may_take: Callable[[], bool] | None = None,
        budget: Budget | None = None,
        count: Callable[[], int | None] | None = None,
    ) -> None:
        self._may_take = may_take
        self._budget, self._count = budget, count
        """``--max-unavailable`` and the count a percentage of it is taken of (:func:`_refresh_limit`)."""
        self._limit = effective_limit(concurrency=concurrency, budget=budget, count=None)
        """Asked right before a slot is written (the maintenance window), as in the annotation lock."""
        self._kube = kube
        self._namespace = namespace
        self._prefix = prefix
        self._node_id = node_id
        self._concurrency = concurrency
        self._ttl = ttl
        self._stagger = stagger
        self._retry_interval = retry_interval
        self._retry_timeout = retry_timeout
        self._watch_timeout = watch_timeout
        self._sleep = sleep
        self._liveness = HolderLiveness(
            kube, recheck_interval=liveness_interval, on_gone_holder=on_gone_holder
        )
        self._selector = f"{LOCK_LABEL}={prefix}"
        self._refusals = Refusals(backend=self.backend, where=self.where)  # they count as held
        self._rv: str | None = None
        self._next_expiry_ns: int | None = None
        self._rng = random.Random()  # noqa: S311 - the waiters' delays, not cryptography
        self._copy: dict[str, Obj] | None = None
        """The slots as last listed, watched or written (replaced whole, never changed in place)."""
        self._fresh_until = 0.0
        """Until when (monotonic) :attr:`_copy` stands in for a LIST."""
        self._look_at: float | None = None
        """When (monotonic) this waiter's delay after a freed slot ends (kept across watch calls)."""
        self._spread = stagger
        self._freed_at: dict[str, float] = {}
        """Slot name → when (wall clock) the watch showed it freed (until it shows it taken)."""
        """This waiter's spread: doubled each time its look found the slot taken, reset when it takes one."""
        self._looked = False
        """The last wait ended on a free slot in the copy (the next ``acquire`` tells if it came first)."""
        self._changed = threading.Condition()
        """Guards the copy and the watch's state; notified at each change of the copy."""
        self._floor: int | None = None
        """The resourceVersion of the last LIST: the watch's events up to it are older than the copy."""
        self._follower: threading.Thread | None = None
        self._live = False
        """The watch of the slots runs (see :meth:`_follow`)."""
        self._heard = 0.0
        """When (monotonic) the watch last brought an event or a bookmark."""
        self._wanted = False
        """A wait ran since the current watch call began (the watch is renewed when it ends)."""
        self._waits = 0
        """Waits running now."""
        self._bookmarks = True
        """Whether the API server is taken to send bookmarks (a quiet watch with none seen: no longer)."""
        self._bookmarked = False

    watched = True
    """A freed slot ends :meth:`wait_for_change` (the daemon need not look again before ``--period``)."""

    @property
    def node_id(self) -> str:
        return self._node_id

    @property
    def concurrency(self) -> int:
        """``--concurrency``, lowered by ``--max-unavailable`` as the last ``acquire`` read its count."""
        return self._limit

    def _refresh_limit(self) -> int:
        """The limit now: with a percentage budget, of the count read now (one GET)."""
        count = self._count() if self._budget is not None and self._budget.percent and self._count else None
        self._limit = effective_limit(concurrency=self._concurrency, budget=self._budget, count=count)
        return self._limit

    @property
    def where(self) -> str:
        return f"{self._namespace}/{self._prefix}-*"

    # -- I/O --------------------------------------------------------------------------------------

    def _list(self, *, keep: bool = False) -> dict[str, Obj]:
        """LIST the slots (retried); ``keep``: the next reads within ``FRESH`` seconds may use this one (a
        pass's ``holding``, then its ``acquire`` or ``release``)."""
        answer = read_until_deadline(
            lambda: self._kube.list_leases(self._namespace, label_selector=self._selector),
            interval=self._retry_interval,
            timeout=self._retry_timeout,
            sleep=self._sleep,
            log=logger,
            retrying="Error listing the lock leases %s, retrying: %s",
            where=self.where,
            give_up=lambda exc, _forbidden: LockError(f"cannot list the lock leases {self.where}: {exc}"),
        )
        leases = {item["metadata"]["name"]: item for item in answer.get("items") or []}
        with self._changed:
            self._rv = (answer.get("metadata") or {}).get("resourceVersion")
            # A LIST answers as of its own version: a slot this process wrote (or heard of) after that, e.g.
            # FleetLock's take while the daemon's pass was listing in the same agent, stays as we know it;
            # the LIST never rolls the copy back past our own writes.
            listed_at = _version(self._rv)
            for name, known in (self._copy or {}).items():
                version = _version((known.get("metadata") or {}).get("resourceVersion"))
                if version is not None and listed_at is not None and version > listed_at:
                    leases[name] = known
            self._copy = leases
            self._floor = _version(self._rv)
            self._fresh_until = time.monotonic() + FRESH if keep else 0.0
            self._note_expiries(leases)
            self._changed.notify_all()
        return dict(leases)

    def _following(self) -> bool:
        """Whether the watch keeps :attr:`_copy` current (open, and heard from within ``LIVE_FOR``)."""
        return self._live and time.monotonic() - self._heard < LIVE_FOR and self._copy is not None

    def _leases(self, *, keep: bool = False, consume: bool = False) -> dict[str, Obj]:
        """The slots: the watched copy while the watch follows them; else the copy a pass's ``holding`` (or a
        wait that ended on a free slot) made within the last ``FRESH`` seconds (``consume``: only once); else
        a LIST."""
        with self._changed:
            copy = self._copy
            if copy is not None and self._following():
                return dict(copy)
            if copy is not None and time.monotonic() < self._fresh_until:
                if consume:
                    self._fresh_until = 0.0
                return dict(copy)
        return self._list(keep=keep)

    def _keep(self, lease: Obj) -> None:
        """The answer to our own write goes into the copy (the next read sees what we wrote), unless the
        watch already brought that version or a newer one."""
        name = (lease.get("metadata") or {}).get("name")
        with self._changed:
            if self._copy is not None and name and not self._older(lease, self._copy.get(name)):
                self._copy = {**self._copy, name: lease}

    @staticmethod
    def _older(lease: Obj, than: Obj | None) -> bool:
        """Whether ``lease`` is an older version than ``than`` (resourceVersions compared as etcd's
        revisions; not comparable: not older)."""
        mine = _version((lease.get("metadata") or {}).get("resourceVersion"))
        theirs = _version(((than or {}).get("metadata") or {}).get("resourceVersion"))
        return mine is not None and theirs is not None and mine < theirs

    def _note_expiries(self, leases: dict[str, Obj]) -> None:
        now = time.time_ns()
        expiries = [
            end
            for e in map(lease_entry, leases.values())
            if e is not None and e.ttl_ns > 0 and (end := e.created_ns + e.ttl_ns) > now
        ]
        self._next_expiry_ns = min(expiries, default=None)  # only future expiries end a wait (no hot loop)

    def _body(
        self,
        name: str,
        base: Obj | None,
        holder: str | None,
        unschedulable: bool,
        now_ns: int,
        *,
        owner: Obj | None = None,
    ) -> Obj:
        lease = lease_body(
            self._namespace,
            name,
            base,
            labels={LOCK_LABEL: self._prefix},
            holder=holder,
            now_ns=now_ns,
            duration_seconds=lease_duration_seconds(self._ttl),
            owner=owner,
        )
        annotations = lease["metadata"]["annotations"]
        annotations.pop(UNSCHEDULABLE_ANNOTATION, None)
        if holder:
            annotations[UNSCHEDULABLE_ANNOTATION] = "true" if unschedulable else "false"
        return lease

    def _free(self, lease: Obj) -> None:
        name = lease["metadata"]["name"]
        self._keep(self._kube.replace_lease(self._namespace, name, self._body(name, lease, None, False, 0)))

    # -- the Lock protocol ------------------------------------------------------------------------

    def acquire(self, *, unschedulable: bool, now_ns: int, node_id: str | None = None) -> AcquireResult:
        me = node_id or self._node_id
        leases = self._leases(consume=True)
        entries = _by_name(leases)
        current = self._counted(entries, now_ns)
        if find(current, me):
            return AcquireResult(True, current, reentrant=True)
        limit = self._refresh_limit()
        if len(current) >= limit:
            if not self._free_gone_holders(leases, entries, me):
                return AcquireResult(False, current)
            leases = self._list()
            entries = _by_name(leases)
            current = self._counted(entries, now_ns)
            if len(current) >= limit:
                return AcquireResult(False, current)
        conflicted = refused = False
        allowed = self._may_take is None or self._may_take()  # the window may have closed meanwhile
        candidates = self._candidates(entries, me, now_ns, limit) if allowed else []
        owner = node_owner(self._kube, me) if candidates else None
        for name in candidates:
            lease = leases.get(name)
            body = self._body(name, lease, me, unschedulable, now_ns, owner=owner)
            try:
                if lease is None:
                    written = self._kube.create_lease(self._namespace, body)
                else:
                    written = self._kube.replace_lease(self._namespace, name, body)
            except ConflictError:
                conflicted, self._fresh_until = True, 0.0  # our copy was stale: the next read lists
                continue  # another node took (or touched) this slot first
            except KubeError as exc:
                if self._refused(exc, name, entries.get(name), me, "take the expired slot"):
                    refused = True
                    continue  # another node's expired slot, not ours to take under the policies
                return self._settle(exc, me, now_ns)
            self._keep(written)
            self._looked, self._spread = False, self._stagger
            return AcquireResult(True, (*current, lease_entry(body) or LockEntry(me)))
        if self._looked and conflicted:  # another waiter's delay ended first: wait longer next time
            self._spread = widened(self._spread, floor=self._stagger)
        self._looked = False
        # Every free slot was taken under us (or refused us). Who holds them now, the wait's watch (from the
        # version we last saw) will tell: no LIST for that (the result names the holders we knew of).
        known = (conflicted or refused) and self._rv is not None
        return AcquireResult(False, self._counted(entries, now_ns) if known else self.holders(now_ns=now_ns))

    def _candidates(self, entries: dict[str, LockEntry], me: str, now_ns: int, limit: int) -> list[str]:
        """Free slot names below ``limit``: our own expired slot, then empty ones, then other expired ones
        (oldest first) but those an admission policy refused us."""
        names = [f"{self._prefix}-{i}" for i in range(limit)]
        own = [n for n in names if n in entries and entries[n].node_id == me]
        empty = [n for n in names if n not in entries]
        expired = sorted(
            (
                n
                for n in names
                if n in entries and n not in own and ttl_expired(entries[n], now_ns)
                and not self._refusals.refused(n, _holding(entries[n]))
            ),
            key=lambda n: entries[n].created_ns,
        )  # fmt: skip
        return own + empty + expired

    def _counted(self, entries: Mapping[str, LockEntry], now_ns: int) -> tuple[LockEntry, ...]:
        """The holders that count: the unexpired ones, and the expired ones whose take a policy refused us."""
        return tuple(
            e
            for name, e in entries.items()
            if not ttl_expired(e, now_ns) or self._refusals.refused(name, _holding(e))
        )

    def _refused(self, exc: KubeError, name: str, entry: LockEntry | None, me: str, write: str) -> bool:
        """Whether ``exc`` is an admission policy's refusal to write ``name``, held by another node (then
        noted: the slot counts as held while that holding lasts)."""
        if entry is None or entry.node_id == me:
            return False
        return self._refusals.note(exc, slot=name, holding=_holding(entry), holder=entry.node_id, write=write)

    def _settle(self, exc: KubeError, me: str, now_ns: int) -> AcquireResult:
        """After an ambiguous write failure: did it land? Re-list and look."""
        logger.warning("Error writing a lock lease in %s, re-reading: %s", self.where, exc)
        current = live(self._entries(self._list()), now_ns)
        return AcquireResult(find(current, me) is not None, current)

    @staticmethod
    def _entries(leases: dict[str, Obj]) -> list[LockEntry]:
        return [e for lease in leases.values() if (e := lease_entry(lease)) is not None]

    def entries(self) -> list[LockEntry]:
        """Every holder of a labelled Lease, expired or not (from the watched copy while the watch runs)."""
        return self._entries(self._leases())

    def _free_gone_holders(self, leases: dict[str, Obj], entries: dict[str, LockEntry], me: str) -> bool:
        """Free the slots of holders whose Node is gone (conditional on the listed resourceVersion); under the
        admission policies the garbage collector deletes them instead (their owner reference), and the
        refused write is not tried again for that holding."""
        freed = False
        gone = self._liveness.gone(entries.values(), exclude=me)
        for name, entry in entries.items():
            if entry.node_id not in gone or self._refusals.refused(name, _holding(entry)):
                continue
            try:
                self._free(leases[name])
            except KubeError as exc:
                if not self._refused(exc, name, entry, me, "free the deleted Node's slot"):
                    logger.debug("Could not free lease %s of gone node %s: %s", name, entry.node_id, exc)
                continue
            self._liveness.report(entry.node_id, backend=self.backend)
            freed = True
        return freed

    def holding(
        self, *, now_ns: int, honour_ttl: bool = True, node_id: str | None = None
    ) -> LockEntry | None:
        entry = find(self._entries(self._leases(keep=True)), node_id or self._node_id)
        if entry is None or (honour_ttl and ttl_expired(entry, now_ns)):
            return None
        return entry

    def release(self, *, node_id: str | None = None) -> bool:
        me = node_id or self._node_id
        deadline = time.monotonic() + self._retry_timeout
        released = False
        while True:
            # the pass's read once (a retry after a conflict lists again)
            leases = self._leases(consume=True)
            mine = [lease for lease in leases.values() if (lease_entry(lease) or LockEntry("")).node_id == me]
            if not mine and not released:
                logger.info("Lock not held by %s in %s: nothing to release", me, self.where)
            retry = False
            for lease in mine:
                try:
                    self._free(lease)
                    released = True
                except KubeError as exc:
                    if time.monotonic() > deadline or exc.status == 403:
                        raise LockError(f"cannot release lease {lease['metadata']['name']}: {exc}") from exc
                    if not isinstance(exc, ConflictError):
                        logger.warning("Error releasing a lock lease in %s, retrying: %s", self.where, exc)
                    retry = True
            if not retry:
                if released:  # our own write's answer is the newest we know: the next pass reads it
                    self._fresh_until = time.monotonic() + FRESH
                return released
            self._sleep(self._retry_interval * self._rng.uniform(0.1, 0.5))

    def holders(self, *, now_ns: int) -> tuple[LockEntry, ...]:
        return self._counted(_by_name(self._leases()), now_ns)

    def wait_for_change(self, timeout: float) -> None:
        """Until a slot frees and this waiter's delay ends with a slot still free in the watched copy (or a
        TTL runs out, or ``timeout`` passes). The watch goes on after the wait (see :meth:`_follow`)."""
        deadline = time.monotonic() + timeout
        with self._changed:  # counted before the watch starts: a watch call that fails at once goes on
            self._wanted = True
            self._waits += 1
        try:
            try:
                self._start_following()
            except (KubeError, LockError) as exc:
                logger.debug("Watching the lock leases %s failed: %s", self.where, exc)
                self._sleep(min(max(deadline - time.monotonic(), 0.0), self._retry_interval))
                return
            with self._changed:
                self._note_expiries(self._copy or {})  # a passed expiry ended the last wait: not again
                self._wait(deadline)
        finally:
            with self._changed:
                self._waits -= 1

    def _wait(self, deadline: float) -> None:
        """:meth:`wait_for_change`'s loop (``_changed`` held)."""
        while True:
            now = time.monotonic()
            until = deadline
            if self._next_expiry_ns is not None:
                until = min(until, now + max(0.0, (self._next_expiry_ns - time.time_ns()) / _NS))
            look_at = self._look_at
            if look_at is not None and now >= look_at:
                self._look_at = None
                if self._free_in_copy():
                    self._fresh_until, self._looked = now + FRESH, True
                    return
                continue  # someone took it first: go on waiting, send nothing
            if now >= until:
                return
            self._changed.wait(min(until, look_at if look_at is not None else until) - now)

    def _free_in_copy(self) -> bool:
        """Whether our copy of the slots shows a free one (fewer holders that count than slots)."""
        return len(self._counted(_by_name(self._copy or {}), time.time_ns())) < self.concurrency

    def _start_following(self) -> None:
        """Start the watch of the slots (a LIST first when there is no version to go on from), unless it
        runs."""
        if self._rv is None or self._copy is None:
            self._list()
        with self._changed:
            if self._follower is not None:
                return  # it runs (it clears this, under the same lock, when it stops)
            self._live, self._heard = True, time.monotonic()
            self._follower = threading.Thread(target=self._follow, name="lease-watch", daemon=True)
            self._follower.start()

    def _fit_spread(self, taken_after: float) -> None:
        """Another waiter took a freed slot ``taken_after`` seconds after it freed: fit the spread to the
        crowd.

        With ``n`` waiters drawing from ``[0, spread]`` the first delay ends after about ``spread / (n + 1)``
        and the next one as much later; a slot taken much sooner than :data:`GAP` means a crowd whose near
        ties are likely, so the spread widens (up to :data:`STAGGER_MAX`); one taken later means few waiters
        left, so it narrows (down to ``stagger``). Every waiter sees the same hand-overs, so the crowd's
        spreads agree: hand-overs stay about ``GAP`` apart from the next delay, whatever the crowd's size.
        """
        self._spread = fitted(self._spread, taken_after, floor=self._stagger)

    def _draw(self) -> None:
        """A slot is free: this waiter's delay starts (unless one runs)."""
        if self._look_at is None:
            self._look_at = time.monotonic() + self._rng.uniform(0, self._spread)

    def _follow(self) -> None:
        """The watch of the slots, one call after another from the last version seen, keeping :attr:`_copy`
        current; it re-lists only after 410 Gone, and after failures tries again after ``retry_interval``,
        doubled up to ``WATCH_BACKOFF_MAX``.
        It stops when a watch call ends (or fails) and since that call began nobody waited while this node
        held no slot: an idle agent keeps no watch on the Leases."""
        pause = 0.0
        try:
            while True:
                with self._changed:
                    rv = self._rv
                    self._wanted = False
                long = False
                try:
                    if rv is None:
                        self._list()
                        with self._changed:
                            self._live, self._heard = True, time.monotonic()
                            if self._free_in_copy():
                                self._draw()  # it may have freed while nobody watched
                            self._changed.notify_all()
                        continue
                    long = self._bookmarks and self._watch_timeout > QUIET_SECONDS
                    events = self._kube.watch_leases(
                        self._namespace,
                        resource_version=rv,
                        label_selector=self._selector,
                        timeout_seconds=self._watch_timeout
                        if long
                        else min(self._watch_timeout, SHORT_WATCH_SECONDS),
                        quiet_seconds=QUIET_SECONDS if long else None,
                    )
                    with self._changed:
                        self._live = True
                    for event in events:
                        if not self._apply(event):
                            break
                except (KubeError, LockError) as exc:
                    pause = self._failed(exc, quiet=rv is not None and long, pause=pause)
                    if pause < 0:
                        return
                    continue
                except Exception as exc:  # the watch never dies of a surprise: it says so and goes on
                    logger.error("The watch of the lock leases %s failed unexpectedly; starting it again",
                                 self.where, exc_info=exc)  # fmt: skip
                    pause = self._failed(LockError(f"{type(exc).__name__}: {exc}"), quiet=False, pause=pause)
                    if pause < 0:
                        return
                    continue
                pause = 0.0
                if self._stopped():
                    return
        finally:
            with self._changed:
                self._live = False
                if self._follower is threading.current_thread():
                    self._follower = None
                self._changed.notify_all()

    def _failed(self, exc: KubeError | LockError, *, quiet: bool, pause: float) -> float:
        """After a failed watch call (or LIST): the pause it slept before the next call, or -1 when the
        watch stops. A call that fell quiet before any bookmark means a server that sends none; 410 Gone
        lists again at once; other failures back off (jittered, doubled up to ``WATCH_BACKOFF_MAX``), so
        that a fleet of watchers does not retry in step through an API outage."""
        logger.debug("Watching the lock leases %s failed: %s", self.where, exc)
        with self._changed:
            if quiet and not self._bookmarked:
                self._bookmarks = False
            self._live = False
            if isinstance(exc, KubeError) and exc.status == 410:
                self._rv = None
            self._changed.notify_all()
        if self._stopped():
            return -1.0
        if self._rv is None:
            return 0.0
        pause = min(max(pause * 2, self._retry_interval), WATCH_BACKOFF_MAX)
        self._sleep(pause * self._rng.uniform(0.5, 1.0))
        return pause

    def _stopped(self) -> bool:
        """Whether the watch stops (and says so, under the lock a new wait starts one with): no wait ran
        since the last call began, none runs, and this node holds no slot."""
        with self._changed:
            me = self._node_id
            holds = any(e.node_id == me for e in self._entries(self._copy or {}))
            if self._wanted or self._waits > 0 or holds:
                return False
            self._follower, self._live = None, False
            return True

    def _apply(self, event: Obj) -> bool:
        """One watch event into the copy; ``False`` for an ``ERROR`` (410 Gone: the next call re-lists)."""
        kind, obj = event.get("type"), event.get("object") or {}
        with self._changed:
            self._heard = time.monotonic()
            if kind == "ERROR":
                logger.debug("Lease watch ended: %s", obj.get("message"))
                self._rv = None
                return False
            meta = obj.get("metadata") or {}
            rv = meta.get("resourceVersion")
            self._rv = rv or self._rv
            name = meta.get("name")
            if kind not in ("ADDED", "MODIFIED", "DELETED") or not name:
                self._bookmarked = self._bookmarked or kind == "BOOKMARK"
                return True  # a bookmark: only the version moves on
            version = _version(rv)
            if version is not None and self._floor is not None and version <= self._floor:
                return True  # the last LIST had it already (the watch began before that LIST)
            if self._older(obj, (self._copy or {}).get(name)):
                return True  # older than what the copy has (our own write's answer came first)
            if kind == "DELETED":
                self._copy = {k: v for k, v in (self._copy or {}).items() if k != name}
            else:
                self._copy = {**(self._copy or {}), name: obj}
            self._note_expiries(self._copy)
            if kind == "DELETED" or (entry := lease_entry(obj)) is None:
                self._freed_at.setdefault(name, time.time())
                self._draw()
            elif (freed_at := self._freed_at.pop(name, None)) is not None and entry.node_id != self._node_id:
                # the taker's own time of its take: the news of the free and of the take, each a watch
                # event's way, cancel out; what is left is the first delay to end
                self._fit_spread(entry.created_ns / _NS - freed_at)
            self._changed.notify_all()
            return True
