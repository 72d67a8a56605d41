"""Builds a node agent from a :class:`~pykured.config.Config`: the only place that knows every concrete class
(with :mod:`pykured.agent.parts`, which builds the daemon's own parts for it).

Swapping the lock backend, the reboot method or the sentinel is a change here, never in the daemon: the
daemon receives what it uses.
"""

from __future__ import annotations

import datetime
import logging
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pykured import __version__
from pykured.agent.daemon import Daemon, Senses, Settings
from pykured.agent.parts import build_parts
from pykured.blockers import Blocker
from pykured.blockers.freeze import FreezeBlocker
from pykured.blockers.options import FleetInputs, NodeInputs
from pykured.blockers.registry import BlockerTable
from pykured.conditions.fleet import FleetBreaker
from pykured.conditions.keeper import ConditionKeeper, ConditionSettings
from pykured.config import Config, checks
from pykured.cycle.book import NodeBook
from pykured.cycle.decide import CyclePolicy, Escalation
from pykured.cycle.nodecopy import NodeCopy
from pykured.cycle.observers import CycleObserver, CycleObservers
from pykured.cycle.steps import Behaviour, Hands
from pykured.cyclemetrics import CycleMetrics
from pykured.drain import Drainer
from pykured.gates.node import CycleGates
from pykured.gates.phase import CycleGate
from pykured.halting.deadline import HaltWatch
from pykured.halting.fleet import FleetHalt
from pykured.halting.streak import DrainStreak
from pykured.host import relay as signal_relay
from pykured.host.boot import boot_time
from pykured.host.guard import NSENTER
from pykured.host.reboot import CommandRebooter, Rebooter, SignalRebooter, ZincatiHandoff
from pykured.host.sentinel import CommandSentinel, FileSentinel, Sentinel
from pykured.kube.client import Kube, Obj
from pykured.kube.events import EventRecorder
from pykured.lock import registry
from pykured.lock.base import Lock
from pykured.lock.budget import Budget
from pykured.metrics import Metrics
from pykured.notify import KuredMessages, Notifier
from pykured.policy.maintenance import Window
from pykured.policy.source import PolicySource, PolicyWindow
from pykured.status.drainwatch import slow_drain_after, watch_drains
from pykured.status.publisher import StatusPublishers
from pykured.taint import WaitingTaint

if TYPE_CHECKING:  # each imported where it is built, for an agent whose flags ask for it
    from pykured.alertmanager.silence import SilenceKeeper
    from pykured.fleetlock import FleetLockServer

logger = logging.getLogger(__name__)

NSENTER_ENV = "PYKURED_NSENTER"


@dataclass
class Agent:
    """A built agent: the node daemon and/or the FleetLock server, plus what must be closed with them."""

    daemon: Daemon | None
    metrics: Metrics
    kube: Kube
    fleetlock: FleetLockServer | None = None
    stopping: threading.Event = field(default_factory=threading.Event)
    policy: PolicySource | None = None
    halt: HaltWatch | None = None

    def run(self) -> None:
        """Serve FleetLock (if configured) and run the daemon (if any) until stopped."""
        if self.policy:
            self.policy.start()
        if self.halt:
            threading.Thread(
                target=self.halt.run, args=(self.stopping,), name="halt-watch", daemon=True
            ).start()
        if self.fleetlock:
            self.fleetlock.start()
        if self.daemon:
            self.daemon.run()
        else:
            self.stopping.wait()

    def stop(self) -> None:
        """Stop the daemon and the FleetLock server."""
        self.stopping.set()
        if self.daemon:
            self.daemon.stop()

    def close(self) -> None:
        """Stop serving FleetLock and metrics, close the API connection pool."""
        if self.policy:
            self.policy.stop()
        if self.fleetlock:
            self.fleetlock.stop()
        self.metrics.close()
        self.kube.close()


def kube_for(cfg: Config) -> Kube:
    """In-cluster (as kured) unless ``--kubeconfig`` is given."""
    return Kube.from_kubeconfig(cfg.kubeconfig) if cfg.kubeconfig else Kube.in_cluster()


def build_lock(
    cfg: Config, kube: Kube, metrics: Metrics | None = None, *, window: Window | None = None
) -> Lock:
    """The configured backend, guarded by the others so a backend switch never double-books."""
    hook = (lambda _node: metrics.lock_freed_gone_node()) if metrics else None

    def may_take() -> bool:  # no slot is written once the window closed (a take retried through an outage)
        return window is None or window.contains(datetime.datetime.now(datetime.UTC))

    return registry.build_lock(cfg, kube, hooks=registry.LockHooks(on_gone_holder=hook, may_take=may_take))


def build_drainer(
    cfg: Config, kube: Kube, node: str, cancel: threading.Event, events: EventRecorder | None = None
) -> Drainer:
    """kured's drain settings for ``node``; ``cancel`` interrupts a drain when the agent stops.

    ``events``: where an eviction denied by an admission webhook is told (an ``EvictionDenied`` Event).
    """

    def on_denied(text: str) -> None:
        if events is not None:
            events.record("EvictionDenied", text, warning=True)

    return Drainer(
        kube,
        node=node,
        grace_period=cfg.drain_grace_period,
        pod_selector=cfg.drain_pod_selector,
        skip_wait_for_delete_timeout=cfg.skip_wait_for_delete_timeout,
        timeout=cfg.drain_timeout,
        cancel=cancel,
        on_denied=on_denied if events is not None else None,
    )


def build_blockers(cfg: Config, *, policy: PolicySource | None) -> BlockerTable:
    """Every blocker, in the order :mod:`pykured.blockers.registry` declares: those the same for every node
    built now (the freeze when ``policy`` is read, ``--prometheus-url``, ``--alertmanager-url``), each node's
    when a driver asks for them (:meth:`~pykured.blockers.registry.BlockerTable.for_node`)."""
    return BlockerTable(FleetInputs(options=cfg, policy=policy))


def build_prometheus_blockers(cfg: Config) -> list[Blocker]:
    """The alert blockers, the same for every node: kured's Prometheus blocker when ``--prometheus-url`` is
    set, then pykured's Alertmanager blocker when ``--alertmanager-url`` is (the same filters)."""
    return build_blockers(cfg, policy=None).shared


def build_silence(
    cfg: Config,
    kube: Kube,
    node: str,
    events: EventRecorder,
    *,
    metrics: Metrics | None = None,
    stopping: threading.Event | None = None,
) -> SilenceKeeper | None:
    """``--silence-during-reboot``: the keeper of ``node``'s silence in Alertmanager (its retry of a failed
    expiry ends when ``stopping`` is set: the agent stops)."""
    if not cfg.silence_during_reboot:
        return None
    from pykured.alertmanager.silence import SilenceKeeper

    return SilenceKeeper(
        kube,
        node=node,
        url=cfg.alertmanager_url,
        template=cfg.silence_during_reboot,
        longest=datetime.timedelta(seconds=cfg.silence_max.seconds),
        events=events,
        metrics=metrics,
        stopping=stopping,
    )


def _settle_gates(cfg: Config, kube: Kube, node: str) -> list[CycleGate]:
    """The settle gates the flags ask for (their module imported only then)."""
    settle: list[CycleGate] = []
    if not (
        cfg.settle_pod_selector or cfg.settle_nodes_ready or cfg.settle_pdbs or cfg.settle_prometheus_query
    ):
        return settle
    from pykured.gates.settle import NodesReadyGate, PdbGate, PodsReadyGate, PromQueryGate

    if cfg.settle_pod_selector:
        settle.append(PodsReadyGate(kube, node=node, selectors=cfg.settle_pod_selector))
    if cfg.settle_nodes_ready:
        settle.append(NodesReadyGate(kube))
    if cfg.settle_pdbs:
        settle.append(PdbGate(kube))
    if cfg.settle_prometheus_query:
        settle.append(PromQueryGate(cfg.prometheus_url, cfg.settle_prometheus_query))
    return settle


def build_gates(cfg: Config, kube: Kube, node: str) -> CycleGates | None:
    """Reboot hooks and settle gates for ``node`` (None when none is configured)."""
    settle = _settle_gates(cfg, kube, node)
    gates = CycleGates(
        kube,
        node=node,
        before_annotations=[a.strip() for a in cfg.before_reboot_annotations],
        after_annotations=[a.strip() for a in cfg.after_reboot_annotations],
        hook_timeout=datetime.timedelta(seconds=cfg.reboot_hook_timeout.seconds),
        settle_gates=settle,
        settle_timeout=datetime.timedelta(seconds=cfg.settle_timeout.seconds),
        record_pdbs=cfg.settle_pdbs,
    )
    return gates if gates else None


def build_maintenance(
    cfg: Config, kube: Kube, on_change: Callable[[], None], metrics: Metrics | None = None
) -> tuple[Window, PolicySource | None]:
    """The maintenance window (kured's, calendar windows, blackouts) and the policy ConfigMap's source (the
    freeze's)."""
    for line in cfg.maintenance.describe() if cfg.maintenance_window or cfg.blackout else ():
        logger.info("%s", line)
    if not cfg.policy_configmap:
        window: Window = cfg.time_window if not (cfg.maintenance_window or cfg.blackout) else cfg.maintenance
        return window, None
    source = PolicySource(
        kube,
        namespace=cfg.ds_namespace,
        name=cfg.policy_configmap,
        zone=cfg.time_window.location,
        on_change=on_change,
    )
    freeze = FreezeBlocker(source)
    if metrics is not None:
        metrics.watch_freeze(lambda: freeze.frozen(datetime.datetime.now(datetime.UTC)))
    logger.info("Policy ConfigMap: %s/%s (blackouts, freeze)", cfg.ds_namespace, cfg.policy_configmap)
    return PolicyWindow(cfg.maintenance, source), source


def build_rebooter(cfg: Config) -> Rebooter:
    """``command`` (nsenter into PID 1), ``signal`` (PID 1) or ``zincati`` (hand-off marker)."""
    if cfg.reboot_method == "signal":
        if not cfg.reboot_signal_relay and os.geteuid() == 0:
            logger.warning(
                "Reboot method signal as root: this container reaches every socket in the host's directories "
                "it mounts (the container runtime's under /var/run among them); run the agent unprivileged "
                "with the signal relay (--reboot-signal-relay, kustomize/overlays/signal)"
            )
        return SignalRebooter(
            cfg.reboot_signal,
            target_pid=signal_relay.target_pid(),
            relay=cfg.reboot_signal_relay,
        )
    if cfg.reboot_method == "zincati":
        return ZincatiHandoff(
            cfg.zincati_marker_file,
            allow_duration_s=cfg.zincati_allow_duration.seconds,
            content=cfg.zincati_marker_content,
        )
    return CommandRebooter(cfg.reboot_command_argv, nsenter=os.environ.get(NSENTER_ENV, NSENTER))


def build_policy(cfg: Config) -> CyclePolicy:
    """The decisions' configuration, built once for every driver (the daemon and FleetLock)."""
    return CyclePolicy(
        annotate_nodes=cfg.annotate_nodes,
        taint=bool(cfg.prefer_no_schedule_taint),
        taint_early=cfg.prefer_no_schedule_early,
        reboot_retry_delay=_delta(cfg.reboot_retry_delay.seconds),
        release_delay=_delta(cfg.lock_release_delay.seconds),
        sentinel_loop_backoff=_delta(cfg.sentinel_loop_backoff.seconds),
        force_reboot=cfg.force_reboot,
        escalation=tuple(Escalation(step) for step in checks.check_escalation(cfg.drain_escalation)),
    )


def build_behaviour(cfg: Config) -> Behaviour:
    """kured's flags that shape the steps, built once for every driver (the daemon and FleetLock)."""
    return Behaviour(
        drain_delay_s=cfg.drain_delay.seconds,
        reboot_delay_s=cfg.reboot_delay.seconds,
        pre_labels=cfg.pre_reboot_labels,
        post_labels=cfg.post_reboot_labels,
        autoscaler_annotations=cfg.autoscaler_annotations,
    )


def _delta(seconds: float) -> datetime.timedelta:
    return datetime.timedelta(seconds=seconds)


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


PASS_FRESH = 10.0
"""Seconds for which the Node as a pass read it also serves that pass's pause check (no second GET)."""


def node_copy(kube: Kube, node: str) -> NodeCopy:
    """The agent's copy of its own Node: kept by its watch and by the answers to its writes."""
    copy = NodeCopy(node)
    kube.on_node_written(copy.written)
    return copy


def own_node_reader(kube: Kube, copy: NodeCopy) -> Callable[[], Obj]:
    """The agent's own Node for its pause check: the watched copy while the watch is live, else the GET its
    pass made within :data:`PASS_FRESH` seconds, else a GET."""

    def read() -> Obj:
        obj = copy.get(max_age=PASS_FRESH)
        if obj is None:
            obj = kube.get_node(copy.node)
            copy.offer(obj)
        return obj

    return read


def build_hands(
    cfg: Config,
    kube: Kube,
    node: str,
    cancel: threading.Event,
    *,
    lock: Lock,
    rebooter: Rebooter,
    notifier: Notifier,
    metrics: Metrics,
    copy: NodeCopy | None = None,
    streak: DrainStreak | None = None,
    stopping: threading.Event | None = None,
) -> Hands:
    """The adapters one node's cycle acts through, the same for every driver (only the rebooter differs:
    the configured method for the daemon, the grant for FleetLock; and the agent reads its own Node from
    its watched ``copy``), and the observers of its moments (:func:`build_observers`). ``stopping``: set
    when the agent stops (default ``cancel``, the daemon's own)."""
    events = EventRecorder(kube, node=node, enabled=cfg.events)
    return Hands(
        book=NodeBook(kube, node=node, copy=copy),
        drainer=build_drainer(cfg, kube, node, cancel, events),
        lock=lock,
        rebooter=rebooter,
        notifier=notifier,
        events=events,
        observers=build_observers(
            cfg,
            kube,
            node,
            events,
            metrics,
            streak=streak,
            stopping=stopping if stopping is not None else cancel,
        ),
    )


def build_observers(
    cfg: Config,
    kube: Kube,
    node: str,
    events: EventRecorder,
    metrics: Metrics,
    *,
    streak: DrainStreak | None = None,
    stopping: threading.Event | None = None,
) -> CycleObservers:
    """The features of ``node``'s cycle that are configured, each an observer of its moments
    (:mod:`pykured.cycle.observers`), in the order they are told each moment: one line per feature."""
    features: list[CycleObserver | None] = [
        CycleMetrics(metrics),  # /metrics: every cycle's, first (it makes no request)
        build_taint(cfg, kube, node),  # --prefer-no-schedule-taint
        build_gates(cfg, kube, node),  # reboot hooks and settle gates
        streak,  # --max-failed-drains (one count for the fleet, shared by every node's cycle)
        build_silence(cfg, kube, node, events, metrics=metrics, stopping=stopping),  # --silence-during-reboot
    ]
    return CycleObservers(feature for feature in features if feature is not None)


def build_taint(cfg: Config, kube: Kube, node: str) -> WaitingTaint | None:
    """``--prefer-no-schedule-taint``: ``node``'s PreferNoSchedule taint while it waits (None: off)."""
    if not cfg.prefer_no_schedule_taint:
        return None
    return WaitingTaint(kube, node=node, key=cfg.prefer_no_schedule_taint)


def build(cfg: Config, *, kube: Kube | None = None) -> Agent:
    """Build the agent (does not start it), on ``kube`` or the client :func:`kube_for` makes."""
    kube = kube or kube_for(cfg)
    metrics = Metrics()
    port = metrics.serve(cfg.metrics_host, cfg.metrics_port)
    logger.debug("serving metrics on port %d", port)
    node = cfg.node_id
    messages = KuredMessages(
        drain=cfg.message_template_drain,
        reboot=cfg.message_template_reboot,
        uncordon=cfg.message_template_uncordon,
    )
    notifier = Notifier.from_urls(
        notify_url=cfg.notify_url,
        slack_hook_url=cfg.slack_hook_url,
        extra_urls=cfg.extra_notify_url,
        messages=messages,
        on_failure=metrics.notify_failed,
    )
    cancel = threading.Event()
    wake = threading.Event()
    sentinel: Sentinel
    if cfg.reboot_sentinel_command:
        sentinel = CommandSentinel(
            cfg.reboot_sentinel_command_argv, nsenter=os.environ.get(NSENTER_ENV, NSENTER)
        )
    else:
        sentinel = FileSentinel(cfg.reboot_sentinel, on_change=wake.set)
    window, maintenance = build_maintenance(cfg, kube, wake.set, metrics)
    lock = build_lock(cfg, kube, metrics, window=window)
    policy, behaviour = build_policy(cfg), build_behaviour(cfg)
    blockers = build_blockers(cfg, policy=maintenance)

    copy = node_copy(kube, node)

    def blockers_for(name: str) -> list[Blocker]:
        read = own_node_reader(kube, copy) if name == node else None
        return blockers.for_node(NodeInputs(options=cfg, kube=kube, node=name, read=read))

    streak = build_streak(cfg, kube, source=maintenance, notifier=notifier)
    publishers = StatusPublishers(kube, version=__version__)  # one per node: the daemon's and FleetLock's
    fleetlock = None
    if cfg.fleetlock_listen:
        fleetlock = build_fleetlock(
            cfg, kube, lock=lock, notifier=notifier, metrics=metrics, window=window, blockers=blockers_for,
            policy=policy, behaviour=behaviour, streak=streak, stopping=cancel, publishers=publishers,
        )  # fmt: skip
    halt = build_halt(cfg, kube, lock=lock, source=maintenance, notifier=notifier, metrics=metrics)
    if cfg.fleetlock_listen and cfg.fleetlock_mode == "central":
        return Agent(
            daemon=None, metrics=metrics, kube=kube, fleetlock=fleetlock, stopping=cancel, policy=maintenance,
            halt=halt,
        )  # fmt: skip
    hands = build_hands(
        cfg, kube, node, cancel, lock=lock, rebooter=build_rebooter(cfg), notifier=notifier, metrics=metrics,
        copy=copy, streak=streak,
    )  # fmt: skip
    senses = Senses(
        kube=kube,
        sentinel=sentinel,
        window=window,
        blockers=blockers_for(node),
        freeze_state=(lambda: maintenance.honours) if maintenance is not None else (lambda: "off"),
        policy_where=maintenance.where if maintenance is not None else "",
        metrics=metrics,
    )
    settings = Settings(node=node, period=cfg.period.seconds, behaviour=behaviour, policy=policy)
    queue = None
    if cfg.resume_rolls:
        from pykured.roll.queue import RollQueue

        queue = RollQueue(
            kube,
            namespace=cfg.ds_namespace,
            prefix=cfg.lease_name_prefix,
            node=node,
            period=cfg.period.seconds,
        )
    conditions = build_conditions(cfg, kube, hands, source=maintenance, notifier=notifier, metrics=metrics)
    parts = build_parts(
        kube, hands, node=node, period=settings.period, wake=wake, clock=_utcnow, metrics=metrics,
        queue=queue, conditions=conditions, status=publishers.for_node(node),
        slow_after=slow_drain_after(cfg.drain_timeout.seconds),
    )  # fmt: skip
    daemon = Daemon(hands, senses, settings=settings, clock=_utcnow, stopping=cancel, wake=wake, parts=parts)
    return Agent(
        daemon=daemon, metrics=metrics, kube=kube, fleetlock=fleetlock, stopping=cancel, policy=maintenance,
        halt=halt,
    )  # fmt: skip


def build_conditions(
    cfg: Config,
    kube: Kube,
    hands: Hands,
    *,
    source: PolicySource | None,
    notifier: Notifier,
    metrics: Metrics,
) -> ConditionKeeper | None:
    """``--reboot-condition``: the keeper of the node's conditions and their breakers (None: off). The fleet
    breaker halts through the policy ConfigMap; without one, the nodes only hold back."""
    specs = cfg.reboot_conditions
    if not specs:
        return None
    halt = None
    if source is None:
        logger.warning(
            '--reboot-condition-fleet-max needs the policy ConfigMap (--policy-configmap="") to halt the '
            "fleet: nodes only hold back while too many show a condition"
        )
    else:
        halt = _fleet_halt(cfg, kube, notifier=notifier)
    fleet = FleetBreaker(
        kube,
        specs=specs,
        budget=Budget.of(cfg.reboot_condition_fleet_max),
        halt=halt,
        frozen=FreezeBlocker(source).frozen if source is not None else None,
    )
    settings = ConditionSettings(
        specs=specs,
        max_reboots=cfg.reboot_condition_max,
        period=_delta(cfg.reboot_condition_period.seconds),
    )
    return ConditionKeeper(
        kube, hands, node=cfg.node_id, settings=settings, booted=boot_time, metrics=metrics, fleet=fleet
    )


def _fleet_halt(cfg: Config, kube: Kube, *, notifier: Notifier) -> FleetHalt:
    """The halt this agent adds to the policy ConfigMap (where there is none), with its Events and
    notification."""
    return FleetHalt(
        kube=kube,
        namespace=cfg.ds_namespace,
        configmap=cfg.policy_configmap,
        me=cfg.node_id,
        notifier=notifier,
        events_for=lambda name: EventRecorder(kube, node=name, enabled=cfg.events),
    )


def build_halt(
    cfg: Config, kube: Kube, *, lock: Lock, source: PolicySource | None, notifier: Notifier, metrics: Metrics
) -> HaltWatch | None:
    """``--reboot-deadline``: the watch that halts the fleet (None: off, or no policy ConfigMap)."""
    if cfg.reboot_deadline.ns <= 0:
        return None
    if source is None:
        logger.warning('--reboot-deadline needs the policy ConfigMap (--policy-configmap=""): no halt')
        return None
    halt = _fleet_halt(cfg, kube, notifier=notifier)
    watch = HaltWatch(lock=lock, source=source, deadline=_delta(cfg.reboot_deadline.seconds), halt=halt)
    metrics.watch_halt(watch.halted)
    return watch


def build_streak(
    cfg: Config, kube: Kube, *, source: PolicySource | None, notifier: Notifier
) -> DrainStreak | None:
    """``--max-failed-drains``: the fleet-wide count of failed drains (None: off, or no policy ConfigMap)."""
    if cfg.max_failed_drains <= 0:
        return None
    if source is None:
        logger.warning('--max-failed-drains needs the policy ConfigMap (--policy-configmap=""): no halt')
        return None
    return DrainStreak(
        kube=kube,
        namespace=cfg.ds_namespace,
        configmap=cfg.policy_configmap,
        me=cfg.node_id,
        limit=cfg.max_failed_drains,
        notifier=notifier,
        events_for=lambda name: EventRecorder(kube, node=name, enabled=cfg.events),
    )


def build_fleetlock(
    cfg: Config,
    kube: Kube,
    *,
    lock: Lock,
    notifier: Notifier,
    metrics: Metrics,
    window: Window,
    blockers: Callable[[str], Sequence[Blocker]],
    policy: CyclePolicy,
    behaviour: Behaviour,
    streak: DrainStreak | None = None,
    stopping: threading.Event | None = None,
    publishers: StatusPublishers | None = None,
) -> FleetLockServer:
    """The FleetLock server for Zincati: the agent's lock (one reboot budget), policy, behaviour and hands;
    each node's drain is watched and recorded in its status through ``publishers`` (the daemon's own
    publisher for its node, when node-local)."""
    from pykured.fleetlock import FleetLockServer
    from pykured.fleetlock.service import ZincatiGrant

    host, _, port = cfg.fleetlock_listen.rpartition(":")

    statuses = publishers or StatusPublishers(kube, version=__version__)

    def hands_for(node: str, cancel: threading.Event) -> Hands:
        hands = build_hands(
            cfg, kube, node, cancel, lock=lock, rebooter=ZincatiGrant(), notifier=notifier, metrics=metrics,
            streak=streak, stopping=stopping or threading.Event(),
        )  # fmt: skip
        watch_drains(
            hands.drainer, statuses.for_node(node), metrics=metrics, events=hands.events,
            slow_after=slow_drain_after(cfg.drain_timeout.seconds),
        )  # fmt: skip
        return hands

    return FleetLockServer(
        kube=kube,
        lock=lock,
        host=host.strip("[]") or "127.0.0.1",
        port=int(port or 3333),
        mode=cfg.fleetlock_mode,
        group=cfg.fleetlock_group,
        node_id=cfg.node_id,
        machine_id_file=cfg.machine_id_file,
        hands=hands_for,
        policy=policy,
        behaviour=behaviour,
        blockers=blockers,
        window=window,
        metrics=metrics,
        base_path=cfg.fleetlock_base_path,
        drain_retry_s=cfg.period.seconds,
    )
