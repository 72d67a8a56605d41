"""kured's reboot lock: a JSON annotation on the kured DaemonSet, read with GET and written with a full PUT.

Mirrors kured 1.23.0's ``pkg/daemonsetlock/daemonsetlock.go`` and needs exactly kured's RBAC: ``get`` on
daemonsets and ``update`` on the named one (no patch). ``list`` and ``watch`` on the named one, where granted
(pykured's chart), let a waiting node watch it instead of reading it every minute.

* Every write is GET → decide (pure, :mod:`pykured.lock.record`) → PUT of the whole object carrying its
  ``resourceVersion``, so two writers can never both succeed on the same state. A 409 is retried from the
  GET after ~1 s (jittered 0.5–1.5 s, so a crowd does not retry in lock step).
* The GET is retried every ``retry_interval`` (kured: 5 s) for ``retry_timeout`` (kured: 5 min).
* An ambiguous PUT failure (5xx, timeout: the write may have landed) is never repeated blindly: the next
  GET decides, and as acquire is reentrant a landed write reads as "acquired".
* Single form when ``concurrency`` <= 1, multi form above it (``maxOwners`` from our own concurrency).
  Release deletes the annotation key (single) or removes our entries and leaves
  ``{"maxOwners":N,"locks":[]}`` (multi), as kured does.
* An unreadable value is never overwritten: acquire reports it held by ``UNKNOWN_HOLDER`` and logs how to
  fix it (``pykured lock release``).
* ``--max-unavailable`` (:mod:`pykured.lock.budget`): a take also needs fewer live holders than the budget, a
  percentage being taken of the ``status.desiredNumberScheduled`` of the DaemonSet the take read anyway (no
  request, no rule more); the value written keeps kured's ``maxOwners`` (``--concurrency``).
* Differences from kured: no in-process release delay (the daemon's job), holders whose Node is gone are
  freed (:mod:`pykured.lock.liveness`), both JSON forms are read whatever our concurrency; a release that
  leaves other nodes' entries keeps the stored ``maxOwners`` (as kured's release does).
* Under pykured's admission policies an agent changes only its own entry: a take that would drop or
  rewrite another node's entry (its TTL expired, its Node is gone, ``maxOwners`` differs) is refused. The
  lock understands the refusal (:mod:`pykured.lock.refusals`): every entry of that value counts as held, the
  refusal is said once, and nothing is written again until the value changes.
* An operator sees it through :class:`AnnotationView`: the holders in the stored order, and a value that
  cannot be decoded printed raw (it counts as held) and deleted by a release.
* A waiting node watches the DaemonSet where RBAC grants ``list`` and ``watch`` on it (by name,
  :mod:`pykured.lock.dswatch`): a single-object list/watch, from the listed resourceVersion, that goes on
  across its waits. The lock then counts as ``watched`` (the daemon waits ``--period``), and a wait ends when
  the watched copy shows a free slot once this waiter's random delay (0–*spread*, :mod:`pykured.lock.spread`)
  has ended, so a freed slot wakes, in the common case, one waiter: the others see its take before their
  delay ends and send nothing. A TTL running out ends it too, and, while liveness is checked, about every
  ``liveness_interval`` (the pass after it GETs the holders' Nodes). The pass after a wait reads the copy the
  wait ended on (no GET; the PUT carries the copy's resourceVersion, so a copy a little behind costs a 409,
  never a lost update). The value written, its JSON and when it is written are kured's.
* Under kured's RBAC (no ``list``/``watch``) the 403 is said in one line (which grant would enable the
  watch), and the wait is kured's polling: the daemon waits ``--period``, at most a minute
  (:data:`WAITING_POLL`), and its pass at the end reads the DaemonSet once for ``holding`` and ``acquire``
  (one GET within ``FRESH`` seconds serves both; the PUT still carries that read's resourceVersion). The
  first wait ends at a random moment, so the waiters' passes spread over the minute. kured reads it at every
  ``--period`` tick: the same requests at ``--period`` of a minute or less, and a hand-over in about a
  minute divided by the number of waiters plus one instead of up to ``--period``. The watch is tried again an
  hour later.
"""

from __future__ import annotations

import copy
import logging
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from pykured.core.errors import ConflictError, ForbiddenError, KubeError, LockError, NotFoundError
from pykured.gocompat.goflags import Duration
from pykured.lock.base import AcquireResult, GoneHolderHook
from pykured.lock.budget import Budget, effective_limit
from pykured.lock.counts import desired_count
from pykured.lock.dswatch import DaemonSetWatch
from pykured.lock.liveness import HolderLiveness
from pykured.lock.operator import Reading, Released, Unreadable
from pykured.lock.record import (
    UNKNOWN_HOLDER,
    LockEntry,
    LockForm,
    LockValue,
    decode,
    encode,
    find,
    live,
    plan_acquire,
    ttl_expired,
    value_for,
)
from pykured.lock.refusals import Refusals
from pykured.lock.retry import read_until_deadline
from pykured.lock.spread import fitted, widened

WAITING_POLL = 60.0
"""An agent's poll of the DaemonSet while it waits for the lock (seconds, jittered)."""
STAGGER = 1.0
"""The least spread of the watching waiters' delays after a slot frees (seconds; see
:mod:`pykured.lock.spread`)."""
FRESH = 10.0
"""Seconds for which a read of the DaemonSet serves the next ``acquire`` or ``release`` too (a pass on a
loaded machine takes a few seconds; the write still carries the read's resourceVersion, so a stale read costs
a 409, never a lost update)."""

if TYPE_CHECKING:
    from pykured.kube.api import KubeApi
    from pykured.kube.client import Obj

logger = logging.getLogger(__name__)

UNKNOWN = LockEntry(UNKNOWN_HOLDER)


class AnnotationLock:
    """The ``weave.works/kured-node-lock`` DaemonSet annotation lock (implements ``Lock``)."""

    backend = "annotation"

    def __init__(
        self,
        kube: KubeApi,
        *,
        namespace: str,
        ds_name: str,
        annotation: str,
        node_id: str,
        concurrency: int,
        ttl: Duration,
        on_gone_holder: GoneHolderHook | None = None,
        conflict_delay: float = 1.0,
        retry_interval: float = 5.0,
        retry_timeout: float = 300.0,
        poll_interval: float = 10.0,
        liveness_interval: float | None = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        missing_ok: bool = False,
        may_take: Callable[[], bool] | None = None,
        budget: Budget | None = None,
        watch: bool = True,
        stagger: float = STAGGER,
    ) -> None:
        self._kube = kube
        self._budget = budget
        """``--max-unavailable``: a percentage is taken of the ``status.desiredNumberScheduled`` of the
        DaemonSet each ``acquire`` reads anyway."""
        self._limit = effective_limit(concurrency=concurrency, budget=budget, count=None)
        self._may_take = may_take
        """Asked right before a slot is written (the maintenance window): a read retried through an API
        outage must not take a slot after the window closed."""
        self._missing_ok = missing_ok
        """Only read as the other backend (``--lock-backend=lease``): a missing DaemonSet holds no slot."""
        self._said_missing = False
        self._namespace = namespace
        self._ds_name = ds_name
        self._annotation = annotation
        self._node_id = node_id
        self._concurrency = concurrency
        self._ttl = ttl
        self._conflict_delay = conflict_delay
        self._retry_interval = retry_interval
        self._retry_timeout = retry_timeout
        self._poll_interval = poll_interval
        self._sleep = sleep
        self._monotonic = monotonic
        """The clock of the retry deadlines, the waits and the read kept for the next pass (``sleep`` moves
        it)."""
        self._liveness = HolderLiveness(
            kube, recheck_interval=liveness_interval, on_gone_holder=on_gone_holder, clock=monotonic
        )
        self._refusals = Refusals(backend=self.backend, where=self.where)  # the values it counts as held
        self._last_raw: str | None = None
        self._rng = random.Random()  # noqa: S311 - jitter, not cryptography
        self._phased = False
        """A wait no longer than the poll interval has ended at a random moment (see ``wait_for_change``)."""
        self._last_read: tuple[Obj, float] | None = None
        """The last DaemonSet read and when (monotonic): ``acquire``/``release`` reuse it within ``FRESH``."""
        self._waited: tuple[Obj, float] | None = None
        """The DaemonSet as the last wait ended on it (the watched copy, or the poll that saw a change) and
        when (monotonic): the next pass's ``holding`` (or ``acquire``) reads it within ``FRESH`` seconds."""
        self._liveness_interval = liveness_interval
        self._stagger = self._spread = stagger
        """The least spread of this waiter's delays after a slot frees, and the spread now (fitted to the
        crowd, :mod:`pykured.lock.spread`)."""
        self._look_at: float | None = None
        """When (monotonic) this waiter's delay after a freed slot ends."""
        self._freed_at: float | None = None
        """When (wall clock) the watch showed a slot freed (until it shows one taken)."""
        self._next_expiry_ns: int | None = None
        """The next expiry (wall clock) of a live entry in the watched copy: it ends a wait."""
        self._looked = False
        """The last wait ended on a free slot in the copy (the next ``acquire`` tells if it came first)."""
        self._said_refused = False
        self._watch = (
            DaemonSetWatch(
                kube,
                namespace=namespace,
                name=ds_name,
                on_copy=self._seen,
                retry_interval=retry_interval,
                sleep=sleep,
            )
            if watch
            else None
        )

    @property
    def watched(self) -> bool:
        """Whether a freed slot ends :meth:`wait_for_change` by itself: while the DaemonSet's watch is not
        refused (kured's RBAC grants no ``list``/``watch``: then the daemon looks again every minute)."""
        return self._watch is not None and not self._watch.refused()

    @property
    def node_id(self) -> str:
        return self._node_id

    @property
    def concurrency(self) -> int:
        """``--concurrency``, lowered by ``--max-unavailable`` as the last ``acquire`` read its count."""
        return self._limit

    @property
    def where(self) -> str:
        """``namespace/name`` of the DaemonSet, for messages."""
        return f"{self._namespace}/{self._ds_name}"

    @property
    def annotation(self) -> str:
        """The annotation's key (``--lock-annotation``)."""
        return self._annotation

    # -- I/O --------------------------------------------------------------------------------------

    def _get(self, *, keep: bool = False) -> Obj:
        """GET the DaemonSet (retried); ``keep``: the next ``acquire`` or ``release`` within ``FRESH`` seconds
        may use this read (a pass's ``holding``)."""
        ds = read_until_deadline(
            lambda: self._kube.get_daemonset(self._namespace, self._ds_name),
            interval=self._retry_interval,
            timeout=self._retry_timeout,
            sleep=self._sleep,
            monotonic=self._monotonic,
            log=logger,
            retrying="Error getting daemonset %s, retrying: %s",
            where=self.where,
            give_up=self._get_failed,
        )
        self._last_raw = _annotations(ds).get(self._annotation)
        self._last_read = (copy.deepcopy(ds), self._monotonic()) if keep else None
        return ds

    def _recent(self) -> Obj:
        """The read the same pass's ``holding`` made (or the object the last wait ended on) within ``FRESH``
        seconds, once; else a GET. A stale copy costs a 409 on the PUT (which carries its resourceVersion),
        never a lost write."""
        last = self._last_read
        if last is not None and self._monotonic() - last[1] < FRESH:
            self._last_read = None  # once: a retry reads again
            return copy.deepcopy(last[0])
        return self._after_wait(keep=False) or self._get()

    def _after_wait(self, *, keep: bool) -> Obj | None:
        """The object the last wait ended on, once, within ``FRESH`` seconds of its end (``keep``: for the
        same pass's ``acquire`` or ``release`` too, as a GET of ``holding``); else ``None``."""
        waited, self._waited = self._waited, None
        if waited is None or self._monotonic() - waited[1] >= FRESH:
            return None
        ds = copy.deepcopy(waited[0])
        self._last_raw = _annotations(ds).get(self._annotation)
        self._last_read = (copy.deepcopy(ds), self._monotonic()) if keep else None
        return ds

    def _get_failed(self, exc: KubeError, forbidden: bool) -> LockError:
        if forbidden:
            return LockError(f"not allowed to get daemonset {self.where}: {exc}")
        return LockError(f"timed out trying to get daemonset {self.where}: {exc}")

    def _decode(self, ds: Obj) -> LockValue | None:
        """The stored value (``None`` when absent); raises ``LockError`` when unreadable."""
        raw = _annotations(ds).get(self._annotation)
        return None if raw is None else decode(raw)

    def _put(self, ds: Obj, value: LockValue) -> None:
        annotations = ds.setdefault("metadata", {}).get("annotations") or {}
        encoded = encode(value)
        if encoded is None:
            annotations.pop(self._annotation, None)
        else:
            annotations[self._annotation] = encoded
        ds["metadata"]["annotations"] = annotations
        self._last_read = self._waited = None  # what we read is older than what we write: the next read GETs
        self._kube.replace_daemonset(self._namespace, self._ds_name, ds)

    def _write_failed(self, exc: KubeError, deadline: float, action: str) -> None:
        """Policy after a failed PUT: wait and re-read (409, 5xx, timeout) or give up."""
        if isinstance(exc, ForbiddenError):
            raise LockError(f"not allowed to update daemonset {self.where}: {exc}") from exc
        if self._monotonic() > deadline:
            raise LockError(f"giving up to {action} the lock on {self.where}: {exc}") from exc
        if not isinstance(exc, ConflictError):
            logger.warning("Error writing the lock on %s, re-reading: %s", self.where, exc)
        self._sleep(self._conflict_delay * self._rng.uniform(0.5, 1.5))

    def _unreadable(self, exc: LockError) -> None:
        logger.error(
            "The lock annotation %s on daemonset %s is unreadable, so the lock counts as held; "
            "fix it with `pykured lock release`: %s",
            self._annotation,
            self.where,
            exc,
        )

    # -- the Lock protocol ------------------------------------------------------------------------

    def acquire(self, *, unschedulable: bool, now_ns: int, node_id: str | None = None) -> AcquireResult:
        me = node_id or self._node_id
        deadline = self._monotonic() + self._retry_timeout
        read = self._recent
        looked, self._looked = self._looked, False
        while True:
            ds, read = read(), self._get
            try:
                value = self._decode(ds)
            except LockError as exc:
                self._unreadable(exc)
                return AcquireResult(False, (UNKNOWN,))
            entries = value.entries if value else ()
            current = live(entries, now_ns)
            if find(current, me):
                return AcquireResult(True, current, reentrant=True)
            stored = _annotations(ds).get(self._annotation)
            if self._refusals.refused(self._annotation, stored):  # a policy refused our take over this value
                return AcquireResult(False, _others(entries, me))
            count = desired_count(ds) if self._budget is not None and self._budget.percent else None
            limit = self._limit = effective_limit(
                concurrency=self._concurrency, budget=self._budget, count=count
            )
            gone = frozenset[str]()
            if len(current) >= limit:
                gone = self._liveness.gone(current, exclude=me)
                entries = tuple(e for e in entries if e.node_id not in gone)
            new = LockEntry(me, unschedulable, now_ns, self._ttl.ns)
            # the budget only lowers the limit; the value written keeps kured's maxOwners (--concurrency)
            planned = plan_acquire(entries, new=new, concurrency=self._concurrency, now_ns=now_ns)
            if len(live(entries, now_ns)) >= limit:
                planned = None
            if planned is None or (self._may_take is not None and not self._may_take()):
                return AcquireResult(False, current)
            try:
                self._put(ds, value_for(planned, concurrency=self._concurrency))
            except KubeError as exc:
                dropped = [e.node_id for e in entries if e not in planned and e.node_id != me]
                holders = dropped or [e.node_id for e in _others(entries, me)]
                if holders and self._refusals.note(
                    exc,
                    slot=self._annotation,
                    holding=stored,
                    holder=", ".join(dict.fromkeys(holders)),
                    write=f"take over the lock on daemonset {self.where} in annotation",
                ):
                    return AcquireResult(False, _others(entries, me))
                if looked and isinstance(exc, ConflictError):  # a near tie: another's delay ended first
                    looked, self._spread = False, widened(self._spread, floor=self._stagger)
                self._write_failed(exc, deadline, "acquire")
                continue
            for name in gone:
                self._liveness.report(name, backend=self.backend)
            self._spread = self._stagger
            return AcquireResult(True, live(planned, now_ns))

    def holding(
        self, *, now_ns: int, honour_ttl: bool = True, node_id: str | None = None
    ) -> LockEntry | None:
        try:
            value = self._decode(self._after_wait(keep=True) or self._get(keep=True))
        except LockError as exc:
            if isinstance(exc.__cause__, KubeError):
                raise
            self._unreadable(exc)
            return None
        entry = find(value.entries, node_id or self._node_id) if value else None
        if entry is None or (honour_ttl and ttl_expired(entry, now_ns)):
            return None
        return entry

    def release(self, *, node_id: str | None = None) -> bool:
        me = node_id or self._node_id
        deadline = self._monotonic() + self._retry_timeout
        read = self._recent
        while True:
            ds, read = read(), self._get
            value = self._decode(ds)  # unreadable: raise, never overwrite
            if value is None or find(value.entries, me) is None:
                logger.info("Lock not held by %s on %s: nothing to release", me, self.where)
                return False
            remaining = tuple(e for e in value.entries if e.node_id != me)
            try:
                self._put(ds, self._after_release(value, remaining))
            except KubeError as exc:
                self._write_failed(exc, deadline, "release")
                continue
            return True

    def _after_release(self, value: LockValue, remaining: tuple[LockEntry, ...]) -> LockValue:
        if value.form is LockForm.MULTI and (remaining or self._concurrency > 1):
            # the stored maxOwners while other nodes hold entries (kured's release keeps it; the admission
            # policies refuse to change it under them), else our own --concurrency
            owners = max(value.max_owners, len(remaining)) if remaining else self._concurrency
            return LockValue(LockForm.MULTI, remaining, owners)
        return value_for(remaining, concurrency=self._concurrency)

    def holders(self, *, now_ns: int) -> tuple[LockEntry, ...]:
        ds = self._guard_read() if self._missing_ok else self._get()
        if ds is None:
            return ()
        try:
            value = self._decode(ds)
        except LockError as exc:
            self._unreadable(exc)
            return (UNKNOWN,)
        if value and self._refusals.refused(self._annotation, _annotations(ds).get(self._annotation)):
            return value.entries  # a policy refused our take over this value: every entry holds
        return live(value.entries, now_ns) if value else ()

    def _guard_read(self) -> Obj | None:
        """One read as the other backend: ``None`` when the DaemonSet does not exist (said once)."""
        try:
            ds = self._kube.get_daemonset(self._namespace, self._ds_name)
        except NotFoundError:
            if not self._said_missing:
                logger.warning(
                    "DaemonSet %s not found: kured's annotation lock is not checked (the Lease lock "
                    "needs no DaemonSet; no kured pod can hold a slot without it)",
                    self.where,
                )
            self._said_missing = True
            return None
        except KubeError:
            return self._get()  # kured's retries
        self._said_missing = False
        self._last_raw = _annotations(ds).get(self._annotation)
        return ds

    def wait_for_change(self, timeout: float) -> None:
        """Until a slot frees (and this waiter's delay ends with a slot still free), a holder's TTL runs out,
        a holder's liveness is due for a look, or ``timeout`` passes: on the DaemonSet's watch where RBAC
        allows it (:mod:`pykured.lock.dswatch`), else polled as kured (:meth:`_poll`)."""
        watch = self._watch
        if watch is not None and not watch.refused():
            try:
                following = watch.begin()
            except KubeError as exc:
                logger.debug("Watching the lock on %s failed, polling this wait: %s", self.where, exc)
                following = False
            if following:
                try:
                    left = self._watched_wait(watch, timeout)
                finally:
                    watch.end()
                if left is None:
                    return
                timeout = left
            if watch.refused():
                self._say_refused(watch)
        self._poll(timeout)

    def _say_refused(self, watch: DaemonSetWatch) -> None:
        """One line, once: the wait polls as kured's does, and which grant would let it watch."""
        if self._said_refused:
            return
        self._said_refused = True
        logger.info(
            "Not allowed to watch daemonset %s: waiting for the lock by reading it every --period (at "
            "most every %gs), as kured; `list` and `watch` on daemonsets (resourceNames: [%s]) let the "
            "agent watch it instead",
            self.where,
            self._poll_interval,
            self._ds_name,
        )
        logger.debug("daemonset watch refused: %s", watch.refusal)

    def _watched_wait(self, watch: DaemonSetWatch, timeout: float) -> float | None:
        """The wait on the watch; the seconds left when RBAC refused the watch meanwhile, else ``None``.

        A waiter whose delay ends looks at the copy: it returns only if a slot is still free there (the
        daemon's next pass takes it), else it goes on waiting and sends nothing. The wait also ends at the
        next TTL expiry in the copy and, when liveness is checked, after about ``liveness_interval`` (the
        pass after it GETs the holders' Nodes, :mod:`pykured.lock.liveness`). The copy it ends on serves the
        next pass's reads (no GET)."""
        now = time.monotonic()
        deadline = now + timeout
        check_at = (
            now + self._liveness_interval * self._rng.uniform(1.0, 1.25)
            if self._liveness_interval is not None
            else deadline
        )
        with watch.changed:
            if self._look_at is None and self._freed_at is not None:
                self._draw()  # freed while no wait ran (the pass found the lock held all the same)
            while True:
                if watch.refused():
                    return max(deadline - time.monotonic(), 0.0)
                now = time.monotonic()
                until = min(deadline, check_at)
                if self._next_expiry_ns is not None:
                    until = min(until, now + max(0.0, (self._next_expiry_ns - time.time_ns()) / 1e9))
                look_at = self._look_at
                if look_at is not None and now >= look_at:
                    self._look_at = None
                    current = watch.current()
                    if current is not None and self._state(current)[0]:
                        self._looked = True
                        break
                    continue  # someone took it first: go on waiting, send nothing
                if now >= until:
                    break
                watch.changed.wait(min(until, look_at if look_at is not None else until) - now)
            current = watch.current()
            self._waited = (copy.deepcopy(current), self._monotonic()) if current is not None else None
        return None

    def _state(self, ds: Obj | None) -> tuple[bool, tuple[LockEntry, ...], int | None]:
        """What ``ds`` (the watched copy) shows this node now: :func:`slot_state`."""
        raw = _annotations(ds).get(self._annotation) if ds is not None else None
        refused = raw is not None and self._refusals.refused(self._annotation, raw)
        return slot_state(raw, me=self._node_id, limit=self._limit, now_ns=time.time_ns(), refused=refused)

    def _seen(self, ds: Obj | None) -> None:
        """A new copy from the watch (its ``changed`` held): a freed slot starts this waiter's delay; a take
        after a free fits the spread to the crowd (:func:`pykured.lock.spread.fitted`)."""
        free, holders, self._next_expiry_ns = self._state(ds)
        if free:
            if self._freed_at is None:
                self._freed_at = time.time()
            self._draw()
            return
        freed_at, self._freed_at = self._freed_at, None
        taken = [e.created_ns for e in holders if e.node_id != self._node_id]
        if freed_at is not None and taken and max(taken) / 1e9 >= freed_at - FRESH:
            # the taker's own time of its take: the news of the free and of the take, each a watch event's
            # way, cancel out; what is left is the first delay to end
            self._spread = fitted(self._spread, max(taken) / 1e9 - freed_at, floor=self._stagger)

    def _draw(self) -> None:
        """A slot is free: this waiter's delay starts (unless one runs)."""
        if self._look_at is None:
            self._look_at = time.monotonic() + self._rng.uniform(0, self._spread)

    def _poll(self, timeout: float) -> None:
        """Poll the DaemonSet about every ``poll_interval`` until the annotation changes (kured's RBAC: no
        watch).

        A wait no longer than ``poll_interval`` (the daemon's: ``--period``, at most a minute) polls nothing:
        the pass after it reads the DaemonSet once.
        The first poll comes after a random part of the interval and later ones are jittered ±50 %, so the
        waiters, which all wake on the same change, do not poll in lock step: with n waiters a freed lock is
        seen after about ``poll_interval / (n + 1)``.
        """
        if timeout <= self._poll_interval:
            # The daemon's pass at the end of this wait reads the DaemonSet: no poll of our own, one read per
            # wait as kured's one per --period. The first wait ends at a random moment, so that waiters that
            # started together do not read in lock step: their passes spread over the interval.
            if not self._phased:
                self._phased, timeout = True, timeout * self._rng.random()
            self._last_read = None
            self._sleep(timeout)
            return
        deadline = self._monotonic() + timeout
        before = self._last_raw
        self._last_read = None
        pause = self._poll_interval * self._rng.random()
        while (remaining := deadline - self._monotonic()) > 0:
            self._sleep(min(pause, remaining))
            pause = self._poll_interval * self._rng.uniform(0.5, 1.5)
            try:
                ds = self._kube.get_daemonset(self._namespace, self._ds_name)
            except KubeError as exc:
                logger.debug("Polling the lock on %s failed: %s", self.where, exc)
                continue
            self._last_raw = _annotations(ds).get(self._annotation)
            if self._last_raw != before:
                self._waited = (ds, self._monotonic())  # the pass that follows reads it
                return

    # -- operator commands ------------------------------------------------------------------------

    def raw_value(self) -> str | None:
        """The stored annotation text, for ``pykured lock status``."""
        return _annotations(self._get()).get(self._annotation)

    def entries(self) -> list[LockEntry]:
        """Every holder, expired or not (``pykured lock status``); an unreadable value raises ``LockError``
        (its text: :meth:`raw_value`)."""
        raw = self.raw_value()
        return [] if raw is None else list(decode(raw).entries)

    def clear(self) -> bool:
        """Delete the annotation whatever it holds (``pykured lock release`` on an unreadable value)."""
        deadline = self._monotonic() + self._retry_timeout
        while True:
            ds = self._get()
            if self._annotation not in _annotations(ds):
                return False
            try:
                self._put(ds, LockValue(LockForm.SINGLE))
            except KubeError as exc:
                self._write_failed(exc, deadline, "clear")
                continue
            return True


class AnnotationView:
    """kured's annotation as an operator sees it (an :class:`~pykured.lock.operator.OperatorView`): the
    holders in the stored order; a value that cannot be decoded is shown raw, counts as held, and a release of
    any node deletes it (its text printed first)."""

    def __init__(self, lock: AnnotationLock) -> None:
        self._lock = lock

    optional = False
    """kured's RBAC grants it: a 403 is a failure."""

    @property
    def backend(self) -> str:
        return self._lock.backend

    @property
    def subject(self) -> str:
        return f"{self._lock.backend} lock on {self._lock.where}"

    def read(self) -> Reading:
        try:
            raw = self._lock.raw_value()
        except (LockError, KubeError) as exc:
            return Reading(error=exc)
        if raw is None:
            return Reading()
        try:
            return Reading(holders=tuple(decode(raw).entries))
        except LockError as exc:
            note = (
                f"annotation {self._lock.annotation} on {self._lock.where} is UNREADABLE and counts as held: "
                f"{exc}\n  value: {raw}\n  fix: pykured lock release <node> --backend {self.backend}\n"
            )
            return Reading(unreadable=Unreadable(error=exc, note=note))

    def release(self, node: str, *, out: TextIO, named: bool) -> Released:
        """Any failure to write is reported, ``named`` or not (kured's RBAC grants the write)."""
        try:
            if not self._lock.release(node_id=node):
                return Released.NOT_HELD
        except LockError as exc:
            if isinstance(exc.__cause__, KubeError):
                out.write(f"{self.subject}: {exc}\n")
                return Released.FAILED
            out.write(f"The {self.backend} lock on {self._lock.where} is unreadable ({exc}); deleting it.\n")
        else:
            out.write(f"Released the {self.backend} lock of {node} on {self._lock.where}\n")
            return Released.FREED
        out.write(f"  old value: {self._lock.raw_value()}\n")
        return Released.FREED if self._lock.clear() else Released.NOT_HELD


def _others(entries: tuple[LockEntry, ...], me: str) -> tuple[LockEntry, ...]:
    """Every entry of another node, expired or not (all of them hold while a policy refuses our take)."""
    return tuple(e for e in entries if e.node_id != me)


def _annotations(obj: Obj) -> dict[str, Any]:
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return annotations if isinstance(annotations, dict) else {}


def slot_state(
    raw: str | None, *, me: str, limit: int, now_ns: int, refused: bool = False
) -> tuple[bool, tuple[LockEntry, ...], int | None]:
    """What a stored value shows a waiter: whether a slot is free to ``me`` (fewer live holders than
    ``limit``, or ``me`` among them), the holders that count, and the next expiry of a live entry (wall clock,
    ns; ``None``: none expires). An unreadable value is held by :data:`UNKNOWN`; a value whose take a policy
    refused (``refused``) is held by every entry."""
    if raw is None:
        return True, (), None
    try:
        value = decode(raw)
    except LockError:
        return False, (UNKNOWN,), None
    current = live(value.entries, now_ns)
    expiry = min((e.created_ns + e.ttl_ns for e in current if e.ttl_ns > 0), default=None)
    if refused:
        return False, value.entries, expiry
    return len(current) < limit or find(current, me) is not None, current, expiry
