"""The agent's metrics: kured's ``kured_reboot_required{node}`` gauge and pykured's own, defined here.

kured registers one gauge on the global registry and serves ``promhttp.Handler()``. pykured keeps the name,
help text and label of that gauge, but uses its own :class:`CollectorRegistry` (no import-time side
effects) and adds ``pykured_*`` metrics for what kured users ask for (#1156, PR #1164): lock holders, lock
waits, blocking reason, drain duration, reboot outcomes, notification failures, handoff state, FleetLock
requests and the pending reboot request. :meth:`Metrics.serve` exposes them on ``/metrics``
(:mod:`pykured.metrics.exposition`).

Default collectors: ``process_*`` (same names as Go's, so dashboards keep working) and ``python_info`` are
registered; ``python_gc_*`` is not (GC noise with no kured counterpart). Go's ``go_*`` and
``promhttp_metric_handler_*`` have no equivalent.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.exposition import choose_encoder

from pykured import __version__
from pykured.metrics.exposition import bind, poke
from pykured.metrics.listener import BoundedHTTPServer

logger = logging.getLogger(__name__)
IDLE_POLL = 3600.0
"""How often the metrics server's loop wakes by itself (``serve_forever``'s default, 0.5 s, costs an idle
agent 7200 wakeups an hour); :meth:`Metrics.close` wakes it with a connection instead."""

BLOCK_REASONS = (
    "none", "window", "sentinel", "prometheus", "pods", "lock", "freeze", "policy", "pause", "node",
    "quarantined",
    "alertmanager",
)  # fmt: skip
REBOOT_OUTCOMES = ("triggered", "completed", "failed", "handoff")
DRAIN_REASONS = ("overdue", "pdb", "webhook", "refused", "terminating", "evicting")
"""Why a drain still waits on a pod (:mod:`pykured.drain.progress`'s reasons): the closed set of the
``reason`` label of ``pykured_drain_pods_waiting`` (pod names are never label values)."""
KURED_VERSION = "1.23.0"
MAX_LABEL = 128
"""A free-text label value (a request's reason) is cut to this length."""
_DRAIN_BUCKETS = (5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0, 7200.0)
_WAIT_BUCKETS = (1.0, 10.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 21600.0, 86400.0)


class _OneHot:
    """A labelled gauge where exactly one label value is 1 (current state), every value seen so far 0."""

    def __init__(self, gauge: Gauge, initial: tuple[str, ...]) -> None:
        self._gauge = gauge
        self._seen = list(initial)
        self.set(initial[0])

    def set(self, value: str) -> None:
        if value not in self._seen:
            self._seen.append(value)
        for seen in self._seen:
            self._gauge.labels(seen).set(1 if seen == value else 0)


class Metrics:
    """All pykured metrics on one private registry, and the HTTP server that exposes them."""

    def __init__(self, *, version: str = __version__, process_collectors: bool = True) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]  # Go has no *_created samples
        self.registry = CollectorRegistry(auto_describe=True)
        reg = self.registry
        if process_collectors:
            ProcessCollector(registry=reg)
            PlatformCollector(registry=reg)
        self._reboot_required = Gauge(
            "reboot_required",
            "OS requires reboot due to software updates.",
            ["node"],
            subsystem="kured",
            registry=reg,
        )
        info = Gauge("pykured_build_info", "pykured version and the kured version it mirrors.", registry=reg,
                     labelnames=["version", "kured_version"])  # fmt: skip
        info.labels(version, KURED_VERSION).set(1)
        self._lock_holders = Gauge(
            "pykured_lock_holders",
            "Nodes holding the reboot lock, as this agent last read it (when it tries for the "
            "lock and after it released it).",
            ["backend"],
            registry=reg,
        )
        self._lock_wait = Gauge(
            "pykured_lock_wait_seconds",
            "Seconds this node has been waiting for the lock (0 = not waiting).",
            registry=reg,
        )
        self._lock_wait.set_function(self._waited)
        self._lock_wait_hist = Histogram(
            "pykured_lock_wait_duration_seconds", "Time from wanting the lock to holding it.", registry=reg,
            buckets=_WAIT_BUCKETS,
        )  # fmt: skip
        self._lock_freed = Counter(
            "pykured_lock_freed_gone_node",
            "Lock slots released because the holder node no longer exists.",
            registry=reg,
        )
        self._blocked = _OneHot(
            Gauge(
                "pykured_blocked",
                "Why this node is not rebooting now (one reason is 1).",
                ["reason"],
                registry=reg,
            ),
            BLOCK_REASONS,
        )
        self._drain = Histogram(
            "pykured_drain_duration_seconds",
            "Duration of cordon + drain.",
            registry=reg,
            buckets=_DRAIN_BUCKETS,
        )
        self._drain_waiting = Gauge(
            "pykured_drain_pods_waiting",
            "Pods the node's running drain still waits on, by why they are held (none while no drain runs).",
            ["node", "reason"],
            registry=reg,
        )
        self._drain_slow = Counter(
            "pykured_drain_slow",
            "Drains that ran past the slow-drain threshold (each told in a DrainSlow Event).",
            ["node"],
            registry=reg,
        )
        self._pass_errors = Counter(
            "pykured_pass_errors",
            "Agent passes that ended in an unexpected error (logged with its traceback; the agent goes on).",
            registry=reg,
        )
        self._reboots = Counter("pykured_reboots", "Reboots by outcome.", ["outcome"], registry=reg)
        for outcome in REBOOT_OUTCOMES:
            self._reboots.labels(outcome)
        self._notify_failures = Counter(
            "pykured_notification_failures",
            "Notifications that could not be sent.",
            ["service"],
            registry=reg,
        )
        self._handoff = _OneHot(
            Gauge(
                "pykured_handoff_state",
                "Lock handoff state of this node (one state is 1).",
                ["state"],
                registry=reg,
            ),
            ("none",),
        )
        self._fleetlock = Counter(
            "pykured_fleetlock_requests", "FleetLock HTTP requests served.", ["api", "kind"], registry=reg
        )
        self._request_pending = Gauge(
            "pykured_reboot_request_pending",
            "1 while a reboot request names this node's current bootID (pykured request-reboot / rollout).",
            registry=reg,
        )
        self._request_info = Gauge(
            "pykured_reboot_request_info",
            "The pending reboot request: its reason and rollout id (at most one series per agent).",
            ["reason", "rollout"],
            registry=reg,
        )
        self._condition = Gauge(
            "pykured_reboot_condition",
            "1 while a Node condition of --reboot-condition makes this node need a reboot (its type; at most "
            "one series per agent).",
            ["condition"],
            registry=reg,
        )
        self._freeze = Gauge(
            "pykured_freeze_active",
            "1 while the cluster-wide freeze (pykured freeze) or a halt stops new reboots.",
            registry=reg,
        )
        self._halted = Gauge(
            "pykured_halted",
            "1 while the policy ConfigMap holds a halt: a node did not come back within --reboot-deadline, "
            "drains kept failing (--max-failed-drains) or a canary failed.",
            registry=reg,
        )
        self._quarantined = Gauge(
            "pykured_quarantined",
            "1 while the node is quarantined (--drain-escalation=quarantine; pykured unquarantine ends it).",
            ["node"],
            registry=reg,
        )
        self._silence_failures = Counter(
            "pykured_silence_expiry_failures",
            "Attempts to expire a --silence-during-reboot silence in Alertmanager that failed (each is "
            "retried until the silence is expired or ends by itself).",
            registry=reg,
        )
        self._silence_pending = Gauge(
            "pykured_silence_expiry_pending",
            "1 while the node's reboot silence outlives its cycle: its expiry failed and is being retried.",
            ["node"],
            registry=reg,
        )
        self._holding_gate = _OneHot(
            Gauge(
                "pykured_lock_held_by_gate",
                "Why this node still holds the lock after its reboot (one gate is 1).",
                ["gate"],
                registry=reg,
            ),
            ("none",),
        )
        self._wait_started: float | None = None
        self._state_lock = threading.Lock()
        self._server: BoundedHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # kured's metric
    def set_reboot_required(self, node: str, required: bool) -> None:
        self._reboot_required.labels(node).set(1 if required else 0)

    # pykured's metrics
    def set_blocked(self, reason: str | None) -> None:
        """The current blocking reason (``None`` = not blocked)."""
        self._blocked.set(reason or "none")

    def set_quarantined(self, node: str, quarantined: bool) -> None:
        """``pykured_quarantined{node}``: the node carries a quarantine (``pykured.dev/quarantined``)."""
        self._quarantined.labels(node).set(1 if quarantined else 0)

    def silence_expiry_failed(self) -> None:
        """``pykured_silence_expiry_failures_total``: one more failed expiry of a reboot silence."""
        self._silence_failures.inc()

    def set_silence_expiry_pending(self, node: str, pending: bool) -> None:
        """``pykured_silence_expiry_pending{node}``: the node's silence is still to be expired."""
        self._silence_pending.labels(node).set(1 if pending else 0)

    def watch_freeze(self, frozen: Callable[[], bool]) -> None:
        """``pykured_freeze_active`` is computed at scrape time from ``frozen()``."""
        self._freeze.set_function(lambda: 1.0 if frozen() else 0.0)

    def watch_halt(self, halted: Callable[[], bool]) -> None:
        """``pykured_halted`` is computed at scrape time from ``halted()``."""
        self._halted.set_function(lambda: 1.0 if halted() else 0.0)

    def set_holding_gate(self, gate: str | None) -> None:
        """The gate (hook, settle gate) this node holds the lock for (``None`` = none)."""
        self._holding_gate.set(gate or "none")

    def lock_holders(self, backend: str, n: int) -> None:
        self._lock_holders.labels(backend).set(n)

    def lock_waiting(self, waiting: bool) -> None:
        """Start (or stop) the ``pykured_lock_wait_seconds`` clock; stopping observes the wait."""
        with self._state_lock:
            if waiting and self._wait_started is None:
                self._wait_started = time.monotonic()
            elif not waiting and self._wait_started is not None:
                self._lock_wait_hist.observe(time.monotonic() - self._wait_started)
                self._wait_started = None

    def _waited(self) -> float:
        started = self._wait_started
        return 0.0 if started is None else time.monotonic() - started

    def lock_freed_gone_node(self) -> None:
        self._lock_freed.inc()

    def observe_drain(self, seconds: float) -> None:
        self._drain.observe(seconds)

    def set_drain_waiting(self, node: str, counts: Mapping[str, int] | None) -> None:
        """The pods ``node``'s running drain waits on, by reason (``None``: no drain runs; the node's
        series are removed). Reasons outside :data:`DRAIN_REASONS` are not exposed."""
        for reason in DRAIN_REASONS:
            if counts is None:
                with contextlib.suppress(KeyError):
                    self._drain_waiting.remove(node, reason)
            else:
                self._drain_waiting.labels(node, reason).set(counts.get(reason, 0))

    def drain_slow(self, node: str) -> None:
        self._drain_slow.labels(node).inc()

    def pass_error(self) -> None:
        """Count one pass of the agent's loop that ended in an unexpected error."""
        self._pass_errors.inc()

    def reboot(self, outcome: str) -> None:
        if outcome not in REBOOT_OUTCOMES:
            raise ValueError(f"unknown reboot outcome {outcome!r}, expected one of {REBOOT_OUTCOMES}")
        self._reboots.labels(outcome).inc()

    def notify_failed(self, service: str = "unknown") -> None:
        """Count one failed notification; fits :class:`pykured.notify.Notifier`'s ``on_failure``."""
        self._notify_failures.labels(service).inc()

    def set_handoff(self, state: str | None) -> None:
        self._handoff.set(state or "none")

    def set_reboot_request(self, reason: str | None, rollout: str = "") -> None:
        """The pending reboot request (``None``: none); the info series is replaced, never accumulated."""
        with self._state_lock:
            self._request_pending.set(0 if reason is None else 1)
            self._request_info.clear()
            if reason is not None:
                self._request_info.labels(reason[:MAX_LABEL], rollout).set(1)

    def set_reboot_condition(self, condition: str | None) -> None:
        """The Node condition that is this node's need (``None``: none); the series is replaced, never
        accumulated."""
        with self._state_lock:
            self._condition.clear()
            if condition is not None:
                self._condition.labels(condition[:MAX_LABEL]).set(1)

    def fleetlock_request(self, api: str, kind: str) -> None:
        self._fleetlock.labels(api, kind).inc()

    def render(self, accept: str = "") -> tuple[bytes, str]:
        """The exposition body and its content type for an ``Accept`` header."""
        encoder, content_type = choose_encoder(accept)
        return encoder(self.registry), content_type

    # HTTP exposition
    def serve(self, host: str = "", port: int = 8080) -> int:
        """Serve ``/metrics`` on ``host:port`` in a daemon thread; returns the bound port (0 picks one)."""
        if self._server is not None:
            raise RuntimeError("metrics server already running")
        self._server = bind(host, port, self)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": IDLE_POLL},
            name="pykured-metrics",
            daemon=True,
        )
        self._thread.start()
        bound = int(self._server.server_address[1])
        logger.debug("Serving metrics on %s:%d", host, bound)
        return bound

    def close(self) -> None:
        if self._server is not None:
            server = self._server
            stopper = threading.Thread(target=server.shutdown, name="pykured-metrics-stop", daemon=True)
            stopper.start()
            while stopper.is_alive():  # the serve loop sees shutdown() only when its poll returns: wake it
                poke(server.server_address)
                stopper.join(0.05)
            server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None


class NullMetrics(Metrics):
    """Metrics that record nothing: what a component gets when no metrics are exposed (tests, tools)."""

    def __init__(self) -> None:  # no registry, no collectors
        pass

    def set_reboot_required(self, node: str, required: bool) -> None:
        pass

    def set_blocked(self, reason: str | None) -> None:
        pass

    def set_quarantined(self, node: str, quarantined: bool) -> None:
        pass

    def silence_expiry_failed(self) -> None:
        pass

    def set_silence_expiry_pending(self, node: str, pending: bool) -> None:
        pass

    def lock_holders(self, backend: str, n: int) -> None:
        pass

    def lock_waiting(self, waiting: bool) -> None:
        pass

    def lock_freed_gone_node(self) -> None:
        pass

    def observe_drain(self, seconds: float) -> None:
        pass

    def set_drain_waiting(self, node: str, counts: Mapping[str, int] | None) -> None:
        pass

    def drain_slow(self, node: str) -> None:
        pass

    def pass_error(self) -> None:
        pass

    def reboot(self, outcome: str) -> None:
        if outcome not in REBOOT_OUTCOMES:
            raise ValueError(f"unknown reboot outcome {outcome!r}, expected one of {REBOOT_OUTCOMES}")

    def notify_failed(self, service: str = "unknown") -> None:
        pass

    def set_handoff(self, state: str | None) -> None:
        pass

    def set_reboot_request(self, reason: str | None, rollout: str = "") -> None:
        pass

    def set_reboot_condition(self, condition: str | None) -> None:
        pass

    def watch_freeze(self, frozen: Callable[[], bool]) -> None:
        pass

    def watch_halt(self, halted: Callable[[], bool]) -> None:
        pass

    def set_holding_gate(self, gate: str | None) -> None:
        pass

    def fleetlock_request(self, api: str, kind: str) -> None:
        pass

    def render(self, accept: str = "") -> tuple[bytes, str]:
        return b"", "text/plain"

    def serve(self, host: str = "", port: int = 8080) -> int:
        raise RuntimeError("NullMetrics serves nothing")

    def close(self) -> None:
        pass
