"""The drainer: cordon a node, then evict (or delete) its pods and wait until they are gone.

Concept: the I/O half of kubectl's drain helper as kured configures it (``cmd/kured/main.go``). Which pods go
is decided by :func:`pykured.drain.filters.select_pods`; this adapter cordons, lists the node's pods, looks up
their DaemonSets, evicts in parallel and polls until the pods are gone.

Invariants:
* Evictions run in parallel (at most ``max_parallel`` at once). HTTP 429 (a PodDisruptionBudget) is retried
  after a jittered delay that doubles from ``retry_delay`` up to ``max_retry_delay`` (kured leaves kubectl's
  retry delay at 0 and so retries in a hot loop); before each retry the pod is re-read, and a pod that is
  gone or replaced (new UID) counts as evicted. An eviction denied by an admission webhook (``admission
  webhook "…" denied the request: …``, e.g. Strimzi Drain Cleaner, Longhorn; or ``failed calling webhook``)
  is retried the same way until ``timeout``: the webhook's message is logged, passed once per pod and message
  to ``on_denied`` (the agent posts an ``EvictionDenied`` Event) and ends the timeout error. 404 means done;
  any other error fails that pod, and the drain fails after the other pods had their chance (kubectl's
  aggregate error).
* ``on_blocked`` hears the latest refusal that holds the drain back (a webhook's denial or a 429, as
  ``eviction of pod ns/name refused: …``) whenever it changes, and ``""`` when a drain completes: the agent
  publishes it in its status for ``pykured status``.
* ``on_progress`` hears the drain's progress (:mod:`pykured.drain.progress`: the pods it still waits on,
  since when and why: evicting, held by a PodDisruptionBudget by name, refused by an admission webhook with
  its message, terminating, terminating past its grace period) at every turn of the drain's loop (a few
  times a second, from the drain's own thread: the listener decides what to write and when), and ``None``
  when the drain (or its escalation step) ends, however it ends.
* Without the eviction API (discovery of ``pods/eviction``) pods are DELETEd with a UID precondition.
* A pod counts as gone when it is no longer listed on the node with the same UID (one LIST per poll for all
  pods instead of one GET per pod and second), or when it has been terminating longer than the skip-wait
  timeout.
* ``timeout`` (0 = none) bounds the whole drain; ``cancel`` (a ``threading.Event``) stops it early. Both raise
  :class:`pykured.core.errors.DrainError`; a timeout uses kubectl's texts
  (``error when evicting pods/"x" -n "ns": global timeout reached: 1m0s``).
* Log lines follow kubectl's output: ``evicting pod ns/name``, ``pod/name evicted``, ``WARNING: …``.
* A timeout raises :class:`~pykured.core.errors.DrainTimeout`, naming the pods that would not leave.
  :meth:`Drainer.delete_remaining` (``--drain-escalation=delete``) then deletes the pods the same filters
  select, without the eviction API (a PodDisruptionBudget no longer holds them), each with its own grace
  period (or ``--drain-grace-period``, as the drain), and waits for them within another ``timeout``; it
  says so in exactly one log line naming the pods (bounded: :func:`pykured.core.printable.bounded_names`);
  the per-pod lines go to debug then.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import datetime
import logging
import random
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from pykured.core import errors
from pykured.core.printable import bounded_names
from pykured.drain import progress as drainprogress
from pykured.drain.filters import (
    PodRef,
    PodSelection,
    PodSkip,
    aggregate,
    daemonset_owner,
    deleted_longer_than,
    pod_ref,
    retry_delay_for,
    select_pods,
)
from pykured.gocompat.goflags import Duration, format_duration
from pykured.kube.api import KubeApi
from pykured.kube.client import Obj
from pykured.kube.node import NodeView

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, slots=True)
class DrainResult:
    """What a finished drain did."""

    node: str
    evicted: tuple[PodRef, ...]
    skipped: tuple[PodSkip, ...]
    warnings: str
    used_eviction: bool
    seconds: float


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


_OK = "ok"
_STOPPED = "stopped"
_POLL_STEP = 0.25


def _collect(
    pending: set[concurrent.futures.Future[str]],
    futures: Mapping[concurrent.futures.Future[str], PodRef],
    waiting: list[PodRef],
    failures: list[str],
) -> None:
    """Move finished evictions out of ``pending``: successes to ``waiting``, error texts to ``failures``."""
    for future in [f for f in pending if f.done()]:
        pending.discard(future)
        outcome = future.result()
        if outcome == _OK:
            waiting.append(futures[future])
        elif outcome != _STOPPED:
            failures.append(outcome)


class Drainer:
    """Cordon, drain and uncordon one node."""

    def __init__(
        self,
        kube: KubeApi,
        *,
        node: str,
        grace_period: int = -1,
        pod_selector: str = "",
        skip_wait_for_delete_timeout: int = 0,
        timeout: Duration | float = 0.0,
        retry_delay: float = 5.0,
        max_retry_delay: float = 30.0,
        max_parallel: int = 32,
        poll_interval: float = 1.0,
        cancel: threading.Event | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime.datetime] = _utcnow,
        on_denied: Callable[[str], None] | None = None,
        on_blocked: Callable[[str], object] | None = None,
        on_progress: Callable[[drainprogress.DrainProgress | None], object] | None = None,
    ) -> None:
        self._kube = kube
        self.node = node
        self._grace = grace_period
        self._selector = pod_selector
        self._skip_wait = skip_wait_for_delete_timeout
        self._timeout = timeout if isinstance(timeout, Duration) else Duration.of_seconds(timeout)
        self._retry_delay = retry_delay
        self._max_retry_delay = max_retry_delay
        self._max_parallel = max(1, max_parallel)
        self._poll_interval = poll_interval
        self._cancel = cancel or threading.Event()
        self._clock = clock
        self._wall_clock = wall_clock
        self._random = random.SystemRandom()
        self._on_denied = on_denied
        self._denials: dict[tuple[str, str], str] = {}
        """The latest webhook denial per pod (namespace, name) during the current drain."""
        self.on_blocked = on_blocked
        """Told the latest refusal holding the drain back, and ``""`` when a drain completes."""
        self._blocker = ""
        self._blocker_lock = threading.Lock()
        self.on_progress = on_progress
        """Told the drain's progress at every turn of its loop, and ``None`` when it ends."""
        self._holds: dict[PodRef, drainprogress.PodHold] = {}
        """Why each pod the running drain still waits on is held, and since when."""
        self._holds_lock = threading.Lock()
        self._started = _utcnow()
        self._per_pod = logging.INFO
        """The level of the per-pod lines (kubectl's); DEBUG in an escalation step, whose one line names
        the pods."""

    # -- cordon --------------------------------------------------------------------------------------------

    def cordon(self) -> bool:
        """Mark the node unschedulable; returns whether anything changed."""
        return self._set_unschedulable(True)

    def uncordon(self) -> bool:
        """Mark the node schedulable; returns whether anything changed."""
        return self._set_unschedulable(False)

    def _set_unschedulable(self, desired: bool) -> bool:
        verb = "cordon" if desired else "uncordon"
        try:
            view = NodeView.from_obj(self._kube.get_node(self.node))
            if view.unschedulable == desired:
                logger.info("node/%s already %sed", self.node, verb)
                return False
            # kubectl's two-way diff: true when cordoning, the field removed (false is omitted) when not.
            self._kube.patch_node(self.node, {"spec": {"unschedulable": True if desired else None}})
        except errors.KubeError as exc:
            raise errors.DrainError(f"error {verb}ing node {self.node}: {exc}") from exc
        logger.info("node/%s %sed", self.node, verb)
        return True

    # -- drain ---------------------------------------------------------------------------------------------

    def pods_to_evict(
        self,
        pods: Iterable[Mapping[str, Any]],
        *,
        now: datetime.datetime,
        missing_daemonsets: Collection[tuple[str, str]] = (),
        daemonset_errors: Mapping[tuple[str, str], str] | None = None,
    ) -> PodSelection:
        """:func:`select_pods` with this drainer's skip-wait timeout (pure)."""
        return select_pods(
            pods,
            now=now,
            skip_wait_for_delete_timeout=self._skip_wait,
            missing_daemonsets=missing_daemonsets,
            daemonset_errors=daemonset_errors,
        )

    def _list(self, *, label_selector: str | None) -> list[Obj]:
        field = f"spec.nodeName={self.node}"
        return list(
            self._kube.list_pods(field_selector=field, label_selector=label_selector).get("items", [])
        )

    def _lookup_daemonsets(
        self, pods: Iterable[Obj]
    ) -> tuple[set[tuple[str, str]], dict[tuple[str, str], str]]:
        missing: set[tuple[str, str]] = set()
        failed: dict[tuple[str, str], str] = {}
        for key in {owner for pod in pods if (owner := daemonset_owner(pod)) is not None}:
            try:
                self._kube.get_daemonset(*key)
            except errors.NotFoundError:
                missing.add(key)
            except errors.KubeError as exc:
                failed[key] = str(exc)
        return missing, failed

    def drain(self) -> DrainResult:
        """Evict (or delete) the node's pods and wait until they are gone; raises
        :class:`~pykured.core.errors.DrainError` (:class:`~pykured.core.errors.DrainTimeout` when
        ``timeout`` ran out)."""
        return self._empty(escalate=False)

    def delete_remaining(self) -> DrainResult:
        """``--drain-escalation=delete``: delete (not evict) the pods the drain's filters still select, each
        honouring its grace period, and wait for them within another ``timeout``; one log line names them.
        Raises as :meth:`drain` does."""
        return self._empty(escalate=True)

    def _empty(self, *, escalate: bool) -> DrainResult:
        try:
            return self._run(escalate=escalate)
        finally:
            with self._holds_lock:
                self._holds.clear()
            self._tell_progress(None)

    def _run(self, *, escalate: bool) -> DrainResult:
        start = self._clock()
        self._started = self._wall_clock()
        self._denials.clear()
        self._blocker = ""
        deadline = start + self._timeout.seconds if self._timeout.ns > 0 else None
        try:
            pods = self._list(label_selector=self._selector or None)
            missing, failed = self._lookup_daemonsets(pods)
            use_eviction = not escalate and self._kube.supports_eviction()
        except errors.KubeError as exc:
            raise errors.DrainError(f"error preparing drain of node {self.node}: {exc}") from exc
        selection = self.pods_to_evict(
            pods, now=self._wall_clock(), missing_daemonsets=missing, daemonset_errors=failed
        )
        if selection.errors:
            raise errors.DrainError(aggregate(selection.errors))
        warnings = selection.warning_text()
        if warnings and not escalate:
            logger.warning("WARNING: %s", warnings)
        refs = [d.pod for d in selection.to_evict]
        with self._holds_lock:
            self._holds = {
                r: drainprogress.PodHold(r.namespace, r.name, drainprogress.EVICTING, self._started)
                for r in refs
            }
        self._per_pod = logging.DEBUG if escalate else logging.INFO
        if escalate:
            logger.warning(
                "Drain escalation (delete) on node %s: deleting %d pods without the eviction API "
                "(PodDisruptionBudgets no longer hold them): %s",
                self.node,
                len(refs),
                bounded_names([str(r) for r in refs]),
            )
        evicted = self._evict_and_wait(refs, use_eviction, deadline)
        seconds = self._clock() - start
        logger.info("node/%s drained (%d pods in %.1fs)", self.node, len(evicted), seconds)
        self._tell_blocker("")
        return DrainResult(self.node, evicted, selection.skipped, warnings, use_eviction, seconds)

    def _evict_and_wait(
        self, refs: list[PodRef], use_eviction: bool, deadline: float | None
    ) -> tuple[PodRef, ...]:
        if not refs:
            return ()
        stop = threading.Event()
        stuck: list[PodRef] = []
        failures: list[str] = []
        waiting: list[PodRef] = []
        gone: list[PodRef] = []
        pool = concurrent.futures.ThreadPoolExecutor(min(self._max_parallel, len(refs)), "drain")
        try:
            futures = {pool.submit(self._evict_one, ref, use_eviction, stop): ref for ref in refs}
            pending = set(futures)
            next_poll = self._clock()
            while True:
                _collect(pending, futures, waiting, failures)
                if waiting and self._clock() >= next_poll:
                    waiting = self._poll_gone(waiting, gone, use_eviction)
                    next_poll = self._clock() + self._poll_interval
                self._report()
                if not pending and not waiting:
                    break
                if self._cancel.is_set():
                    raise errors.DrainError(f"drain of node {self.node} cancelled")
                if deadline is not None and self._clock() >= deadline:
                    stuck = [futures[f] for f in pending] + waiting
                    failures.extend(self._timeout_errors([futures[f] for f in pending], waiting))
                    break
                now = self._clock()
                step = min(
                    _POLL_STEP, next_poll - now if waiting else _POLL_STEP, (deadline or now + 1) - now
                )
                if pending:
                    concurrent.futures.wait(pending, timeout=max(0.0, step), return_when="FIRST_COMPLETED")
                else:
                    self._cancel.wait(max(0.0, step))
        finally:
            stop.set()
            pool.shutdown(wait=True, cancel_futures=True)
        if stuck:
            pods = tuple(f"{r.namespace}/{r.name}" for r in stuck)
            raise errors.DrainTimeout(aggregate(failures), pods=pods)
        if failures:
            raise errors.DrainError(aggregate(failures))
        return tuple(gone)

    def _timeout_errors(self, evicting: list[PodRef], waiting: list[PodRef]) -> list[str]:
        limit = format_duration(self._timeout.ns)

        def denied(r: PodRef) -> str:
            message = self._denials.get((r.namespace, r.name))
            return f" (eviction denied: {message})" if message else ""

        out = [
            f'error when evicting pods/"{r.name}" -n "{r.namespace}": global timeout reached: {limit}'
            + denied(r)
            for r in evicting
        ]
        out += [
            f'error when waiting for pod "{r.name}" in namespace "{r.namespace}" to terminate: '
            f"global timeout reached: {limit}"
            for r in waiting
        ]
        return out

    def _poll_gone(self, waiting: list[PodRef], gone: list[PodRef], use_eviction: bool) -> list[PodRef]:
        try:
            present = {pod_ref(p).uid: p for p in self._list(label_selector=None)}
        except errors.KubeError as exc:
            logger.warning("error listing pods on node %s (will retry): %s", self.node, exc)
            return waiting
        now = self._wall_clock()
        still: list[PodRef] = []
        for ref in waiting:
            pod = present.get(ref.uid)
            if pod is None:
                logger.log(self._per_pod, "pod/%s %s", ref.name, "evicted" if use_eviction else "deleted")
                gone.append(ref)
                self._forget(ref)
            elif deleted_longer_than(pod, self._skip_wait, now=now):
                logger.info("pod %s still terminating after %ds; not waiting for it", ref, self._skip_wait)
                gone.append(ref)
                self._forget(ref)
            else:
                still.append(ref)
                overdue = drainprogress.overdue_since(pod, now=now)
                if overdue is not None:
                    self._hold(ref, drainprogress.OVERDUE, since=overdue)
        return still

    # -- progress ------------------------------------------------------------------------------------------

    def _hold(
        self, ref: PodRef, reason: str, detail: str = "", *, since: datetime.datetime | None = None
    ) -> None:
        """The pod is held for ``reason`` (its ``since`` kept while the reason and detail stay the same)."""
        with self._holds_lock:
            previous = self._holds.get(ref)
            hold = drainprogress.held(
                previous, ref.namespace, ref.name, reason, detail, now=since or self._wall_clock()
            )
            self._holds[ref] = hold

    def _forget(self, ref: PodRef) -> None:
        with self._holds_lock:
            self._holds.pop(ref, None)

    def progress(self) -> drainprogress.DrainProgress:
        """What the running drain waits on now (pure once the holds are copied)."""
        with self._holds_lock:
            holds = list(self._holds.values())
        return drainprogress.progress(holds, started=self._started)

    def _report(self) -> None:
        if self.on_progress is not None:
            self._tell_progress(self.progress())

    def _tell_progress(self, value: drainprogress.DrainProgress | None) -> None:
        if self.on_progress is None:
            return
        try:
            self.on_progress(value)
        except Exception as exc:  # a progress that cannot be recorded never stops the drain
            logger.debug("on_progress failed: %s", exc)

    def _evict_one(self, ref: PodRef, use_eviction: bool, stop: threading.Event) -> str:
        """Evict or delete one pod, retrying 429s; returns ``_OK``, ``_STOPPED`` or an error text."""
        grace = self._grace if self._grace >= 0 else None
        logger.log(self._per_pod, "evicting pod %s", ref)
        attempt = 0
        while not stop.is_set():
            try:
                if use_eviction:
                    self._kube.evict_pod(ref.namespace, ref.name, grace_period_seconds=grace)
                else:
                    self._kube.delete_pod(
                        ref.namespace, ref.name, grace_period_seconds=grace, uid=ref.uid or None
                    )
                self._hold(ref, drainprogress.TERMINATING)
                return _OK
            except (errors.NotFoundError, errors.ConflictError):
                return _OK  # already gone, or (UID precondition) replaced by a new pod of the same name
            except errors.KubeError as exc:
                webhook = denied_by_webhook(exc)
                retryable = (
                    isinstance(exc, errors.TooManyRequestsError)
                    or (isinstance(exc, errors.ForbiddenError) and "being terminated" in str(exc))
                    or webhook
                )
                if webhook:
                    self._denied(ref, str(exc))
                if webhook or isinstance(exc, errors.TooManyRequestsError):
                    self._tell_blocker(f"eviction of pod {ref.namespace}/{ref.name} refused: {exc}")
                if retryable:
                    reason, detail = drainprogress.refusal(
                        str(exc),
                        too_many=isinstance(exc, errors.TooManyRequestsError),
                        webhook=webhook,
                        causes=exc.causes,
                    )
                    self._hold(ref, reason, detail)
                if not retryable:
                    return f'error when evicting pods/"{ref.name}" -n "{ref.namespace}": {exc}'
                delay = retry_delay_for(
                    attempt,
                    base=self._retry_delay,
                    cap=self._max_retry_delay,
                    jitter=self._random.uniform(-0.2, 0.2),
                )
                attempt += 1
                logger.warning(
                    'error when evicting pods/"%s" -n "%s" (will retry after %s): %s',
                    ref.name,
                    ref.namespace,
                    format_duration(round(delay * 1e9)),
                    exc,
                )
                if stop.wait(delay) or self._replaced(ref):
                    return _OK if not stop.is_set() else _STOPPED
        return _STOPPED

    def _denied(self, ref: PodRef, message: str) -> None:
        key = (ref.namespace, ref.name)
        if self._denials.get(key) == message:
            return
        self._denials[key] = message
        if self._on_denied is not None:
            try:
                self._on_denied(f"eviction of pod {ref.namespace}/{ref.name} denied, retrying: {message}")
            except Exception as exc:  # an Event that cannot be posted never stops the drain
                logger.debug("on_denied failed: %s", exc)

    def _tell_blocker(self, text: str) -> None:
        with self._blocker_lock:
            if self.on_blocked is None or (text and text == self._blocker):
                return
            self._blocker = text
            try:
                self.on_blocked(text)
            except Exception as exc:  # a status that cannot be written never stops the drain
                logger.debug("on_blocked failed: %s", exc)

    def _replaced(self, ref: PodRef) -> bool:
        """Before a retry: is the pod gone, or a different pod by now (kubectl re-reads it too)?"""
        try:
            return pod_ref(self._kube.get_pod(ref.namespace, ref.name)).uid != ref.uid
        except errors.NotFoundError:
            return True
        except errors.KubeError:
            return False


def denied_by_webhook(exc: BaseException) -> bool:
    """An admission webhook refused (or could not be asked about) an eviction: worth retrying."""
    text = str(exc)
    return ("admission webhook" in text and "denied the request" in text) or "failed calling webhook" in text
