"""kured's start-up, line for line: the checks of kured's ``main()`` in its order, with the lines it logs.

After pflag's ``Parse`` and ``LoadFromEnv`` (:mod:`pykured.config.reader`), kured 1.23 ``main()`` logs and
checks, in this order (each fatal is one log line, exit code 1, after the lines before it):

1. ``Kubernetes Reboot Daemon: <version>`` — always in the text format: kured selects JSON after this line;
2. ``KURED_NODE_ID environment variable required`` (fatal), else ``Node ID: X``;
3. ``validateNotificationURL``: ``Cannot use both --notify-url … and --slack-hook-url …`` or ``Deprecated
   flag(s). Please use --notify-url flag instead.`` (warnings), ``slack-hook-url is not properly formatted…``
   (error);
4. the warning when the pre- and post-reboot label keys differ;
5. ``PreferNoSchedule taint: X``, ``Blocking Pod Selectors: […]`` (Go ``%v`` of a slice), ``Reboot period
   1h0m0s``, ``Concurrency: N``, optionally ``Will annotate nodes during kured reboot operations``;
6. ``Failed to build time window: …`` (fatal), else ``Reboot schedule: <window>``;
7. ``Reboot method: X``, then ``Reboot command: <the flag as given>`` or ``Reboot signal: N``, then
   ``Failed to build rebooter: …`` (fatal) for an unknown method, an empty command, a command google/shlex
   rejects or a signal below 1;
8. ``Sentinel checker is (privileged) user provided command: X`` or ``… (unprivileged) testing for the
   presence of: X``, then ``Failed to build reboot checker: …`` (fatal) for a command shlex rejects;
9. the in-cluster configuration (not here: the CLI loads it through :mod:`pykured.kube.client`; outside a
cluster
   ``unable to load in-cluster configuration, KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be
   defined``);
10. :func:`lock_records`: ``Lock Annotation: <ns>/<ds>:<annotation>``, the lock TTL and release delay lines.

:func:`settle` runs steps 2–8 on the values :func:`~pykured.config.reader.read_flags` produced and hands each
line to a ``log(level, message)`` callback as it goes, raising :class:`~pykured.core.errors.ConfigError` where
kured dies, so the CLI prints exactly kured's lines before the fatal one. :func:`parse` is the same without
logging. pykured's own additions: a label without ``=`` is fatal at step 4 (kured panics when it applies it),
a signal above 64 at step 7 (kured fails only at reboot time), ``Zincati marker file: X`` after ``Reboot
method: zincati``, the checks of pykured's extension flags and pykured's warnings (ignored Slack settings,
an empty alert filter or pod selector, ignored service-link variables and positional arguments) after step
8, ``Lock backend: lease`` at step 10 when the backend is not kured's annotation, and ``Max unavailable: …``
after it when ``--max-unavailable`` is set.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from pykured.blockers.options import key_error
from pykured.config import checks
from pykured.config.flags import FLAGS
from pykured.config.reader import FlagValues, read_flags
from pykured.config.settings import REBOOT_METHODS, Config, typed
from pykured.core.errors import ConfigError
from pykured.gocompat import goshlex
from pykured.gocompat.goflags import Duration, GoValueError
from pykured.gocompat.gofmt import go_list
from pykured.kube.node import PYKURED_PREFIX
from pykured.lock.registry import BACKENDS as LOCK_BACKENDS
from pykured.policy.blackout import BlackoutError, parse_blackouts
from pykured.policy.maintenance import MaintenancePolicy
from pykured.policy.weekly import TimeWindow

if TYPE_CHECKING:
    from pykured.policy.recurrence import CalendarWindow

SILENCE_CEILING = Duration.parse("24h")
"""The longest ``--silence-max``: a silence nobody expired (Alertmanager unreachable at the cycle's end) ends
by itself then."""

Log = Callable[[int, str], None]
"""Receives each start-up line as ``(logging level, message)``."""

OWN_ANNOTATION_PREFIXES = (PYKURED_PREFIX, "weave.works/kured")
"""Annotation names the agent writes on its own Node (and the node admission policy lets it)."""


def _quiet(_level: int, _message: str) -> None:
    return None


def _fatal(message: str) -> ConfigError:
    return ConfigError(message, exit_code=1)


def _label_keys(labels: tuple[str, ...]) -> list[str]:
    return sorted(label.split("=")[0] for label in labels)


def _rebooter(cfg: Config, log: Log) -> None:
    """Step 7: kured's ``NewRebooter`` (and pykured's ``zincati`` method)."""
    log(logging.INFO, f"Reboot method: {cfg.reboot_method}")
    if cfg.reboot_method == "command":
        log(logging.INFO, f"Reboot command: {cfg.reboot_command}")
        if not cfg.reboot_command:
            raise _fatal("Failed to build rebooter: no reboot command specified")
        try:
            argv = goshlex.split(cfg.reboot_command)
        except GoValueError as exc:
            raise _fatal(
                f"Failed to build rebooter: error {exc} when parsing reboot command {cfg.reboot_command}"
            ) from exc
        if not argv:  # kured would run nsenter without a command
            raise _fatal("Failed to build rebooter: no reboot command specified")
    elif cfg.reboot_method == "signal":
        log(logging.INFO, f"Reboot signal: {cfg.reboot_signal}")
        if not 1 <= cfg.reboot_signal <= 64:  # kured refuses only < 1 here, and fails above 64 at reboot time
            raise _fatal(f"Failed to build rebooter: invalid signal: {cfg.reboot_signal}")
        if cfg.reboot_signal_relay:
            log(logging.INFO, f"Reboot signal relay: {cfg.reboot_signal_relay}")
    elif cfg.reboot_method in REBOOT_METHODS:
        log(logging.INFO, f"Zincati marker file: {cfg.zincati_marker_file}")
    else:
        raise _fatal(
            f"Failed to build rebooter: invalid reboot-method configured {cfg.reboot_method}, "
            "expected signal or command"
        )


def _checker(cfg: Config, log: Log) -> None:
    """Step 8: kured's ``NewRebootChecker``."""
    if cfg.reboot_sentinel_command:
        log(
            logging.INFO,
            f"Sentinel checker is (privileged) user provided command: {cfg.reboot_sentinel_command}",
        )
        try:
            goshlex.split(cfg.reboot_sentinel_command)
        except GoValueError as exc:
            raise _fatal(
                f"Failed to build reboot checker: error parsing provided sentinel command: {exc}"
            ) from exc
    else:
        log(
            logging.INFO,
            f"Sentinel checker is (unprivileged) testing for the presence of: {cfg.reboot_sentinel}",
        )


def _escalation(cfg: Config) -> None:
    """``--drain-escalation``: valid steps in a valid order, a timeout to act on, no contradiction."""
    escalation = checks.check_escalation(cfg.drain_escalation)
    if escalation and cfg.drain_timeout.ns <= 0:
        raise _fatal("--drain-escalation needs --drain-timeout (it acts when the timeout runs out)")
    if "quarantine" in escalation and cfg.force_reboot:
        raise _fatal(
            "--drain-escalation=quarantine contradicts --force-reboot (a quarantined node is not rebooted)"
        )


def _extensions(cfg: Config) -> list[str]:
    """pykured's own checks (fatal) and warnings, after kured's start-up checks."""
    checks.check_choice(cfg.lock_backend, LOCK_BACKENDS.names, flag="lock-backend")
    checks.check_choice(cfg.log_level, ("debug", "info", "warning", "error"), flag="log-level")
    checks.check_choice(cfg.fleetlock_mode, ("node-local", "central"), flag="fleetlock-mode")
    backend = LOCK_BACKENDS.get(cfg.lock_backend)
    for flag, used in (
        ("concurrency-label", bool(cfg.concurrency_label)),
        ("resume-rolls", cfg.resume_rolls),
    ):
        if used and flag not in backend.serves:
            raise _fatal(f"--{flag} needs --lock-backend={' or '.join(LOCK_BACKENDS.serving(flag))}")
    if cfg.max_failed_drains < 0:
        raise _fatal(f"invalid --max-failed-drains {cfg.max_failed_drains}: must be >= 0")
    _escalation(cfg)
    if cfg.prefer_no_schedule_early and not cfg.prefer_no_schedule_taint:
        raise _fatal("--prefer-no-schedule-early needs --prefer-no-schedule-taint")
    checks.check_budget(cfg.concurrency_per_label, flag="concurrency-per-label")
    checks.check_budget(cfg.max_unavailable, flag="max-unavailable")
    if cfg.settle_prometheus_query and not cfg.prometheus_url:
        raise _fatal("--settle-prometheus-query needs --prometheus-url")
    for flag, names in (
        ("before-reboot-annotations", cfg.before_reboot_annotations),
        ("after-reboot-annotations", cfg.after_reboot_annotations),
    ):
        if any(not a.strip() for a in names):
            raise _fatal(f"--{flag}: an empty annotation name")
        # the agent may write its own pykured.dev/* and weave.works/kured-* annotations (the node admission
        # policy lets it): a hook named so would be one it could approve itself
        if own := [a for a in names if a.strip().startswith(OWN_ANNOTATION_PREFIXES)]:
            raise _fatal(
                f"--{flag}: {', '.join(own)}: a reboot hook is another controller's annotation, not one "
                f"under {' or '.join(OWN_ANNOTATION_PREFIXES)} (which the agent itself may write)"
            )
    _autoscalers(cfg)
    cfg.blocking_node_labels  # noqa: B018 - a bad key is fatal here
    cfg.blocking_node_annotations  # noqa: B018
    _silence(cfg)
    checks.check_conditions(
        cfg.reboot_condition,
        max_reboots=cfg.reboot_condition_max,
        period_ns=cfg.reboot_condition_period.ns,
        fleet_max=cfg.reboot_condition_fleet_max,
    )
    warnings = []
    if cfg.slack_username != "kured" or cfg.slack_channel:
        warnings.append("--slack-username and --slack-channel are ignored, as in kured")
    if cfg.alert_filter_regexp == "":
        warnings.append("--alert-filter-regexp is empty: it matches every alert name")
    if "" in cfg.blocking_pod_selector:
        warnings.append("an empty --blocking-pod-selector matches every pod on the node")
    return warnings


def _autoscalers(cfg: Config) -> None:
    """``--cluster-autoscaler-annotation``, ``--karpenter-annotation``: an annotation key, not one of
    pykured's or kured's own (the cycle writes and clears those itself)."""
    for flag, name in (
        ("cluster-autoscaler-annotation", cfg.cluster_autoscaler_annotation.strip()),
        ("karpenter-annotation", cfg.karpenter_annotation.strip()),
    ):
        if not name:
            continue
        if error := key_error(name):
            raise _fatal(f"invalid --{flag} {name!r}: {error}")
        if name.startswith(OWN_ANNOTATION_PREFIXES):
            raise _fatal(
                f"--{flag}: {name}: an autoscaler's annotation, not one under "
                f"{' or '.join(OWN_ANNOTATION_PREFIXES)}"
            )


def _silence(cfg: Config) -> None:
    """``--silence-during-reboot``: it needs ``--alertmanager-url``, a ``--silence-max`` above 0 and at most
    :data:`SILENCE_CEILING`, and matchers that parse and name the node
    (:func:`pykured.alertmanager.matchers.validate`): a bad one is fatal at startup, never a failed silence
    at each reboot, nor a silence that hides other nodes or outlives its reboot by days."""
    if not cfg.silence_during_reboot:
        return
    if not cfg.alertmanager_url:
        raise _fatal("--silence-during-reboot needs --alertmanager-url")
    if cfg.silence_max.seconds <= 0:
        raise _fatal(f"invalid --silence-max {cfg.silence_max}: must be > 0")
    if cfg.silence_max.ns > SILENCE_CEILING.ns:
        raise _fatal(
            f"invalid --silence-max {cfg.silence_max}: at most {SILENCE_CEILING} (a silence not expired "
            "ends by itself then; a longer one would hide the node's alerts long after its reboot)"
        )
    from pykured.alertmanager import matchers

    matchers.validate(cfg.silence_during_reboot)


def settle(flags: FlagValues, env: Mapping[str, str], *, log: Log = _quiet) -> Config:
    """Steps 2–8 of kured's ``main()`` on parsed flags: the validated :class:`Config`, its lines logged."""
    cfg = Config(**{spec.field: typed(spec.kind, flags.values[spec.name]) for spec in FLAGS})
    if not cfg.node_id and not cfg.dump_config:
        raise _fatal("KURED_NODE_ID environment variable required")
    log(logging.INFO, f"Node ID: {cfg.node_id}")
    _url, notes = checks.resolve_notify_url(cfg.notify_url, cfg.slack_hook_url)
    for note in notes:
        log(logging.ERROR if note.startswith("slack-hook-url is not") else logging.WARNING, note)
    if _label_keys(cfg.pre_reboot_node_labels) != _label_keys(cfg.post_reboot_node_labels):
        log(
            logging.WARNING,
            "pre-reboot-node-labels keys and post-reboot-node-labels keys do not match, "
            "resulting in unexpected behaviour",
        )
    cfg.pre_reboot_labels  # noqa: B018 - a label without "=" is fatal here
    cfg.post_reboot_labels  # noqa: B018
    log(logging.INFO, f"PreferNoSchedule taint: {cfg.prefer_no_schedule_taint}")
    log(logging.INFO, f"Blocking Pod Selectors: {go_list(cfg.blocking_pod_selector)}")
    log(logging.INFO, f"Reboot period {cfg.period}")
    log(logging.INFO, f"Concurrency: {cfg.concurrency}")
    if cfg.annotate_nodes:
        log(logging.INFO, "Will annotate nodes during kured reboot operations")
    local = checks.local_zone(env) if cfg.time_zone == "Local" else None
    try:
        window = TimeWindow.parse(cfg.reboot_days, cfg.start_time, cfg.end_time, cfg.time_zone, local=local)
    except GoValueError as exc:
        raise _fatal(f"Failed to build time window: {exc}") from exc
    if local is not None:
        window = dataclasses.replace(window, location_name=checks.local_zone_name(env))
    log(logging.INFO, f"Reboot schedule: {window}")
    _rebooter(cfg, log)
    _checker(cfg, log)
    warnings = [*flags.warnings, *_extensions(cfg)]
    maintenance = _maintenance(cfg, window)
    return dataclasses.replace(cfg, time_window=window, maintenance=maintenance, warnings=tuple(warnings))


def _calendar_window(text: str, window: TimeWindow) -> CalendarWindow:
    """One ``--maintenance-window`` (the RRULE parser imported only for an agent that has one)."""
    from pykured.policy.recurrence import CalendarWindow, WindowError

    try:
        return CalendarWindow.parse(
            text, default_zone=window.location, default_zone_name=window.location_name
        )
    except WindowError as exc:
        raise _fatal(f"invalid --maintenance-window {text!r}: {exc}") from None


def _maintenance(cfg: Config, window: TimeWindow) -> MaintenancePolicy:
    """Calendar windows and blackouts (pykured): an invalid one is one fatal line."""
    calendar = [_calendar_window(text, window) for text in cfg.maintenance_window]
    try:
        blackouts = parse_blackouts(cfg.blackout, zone=window.location)
    except BlackoutError as exc:
        raise _fatal(f"--blackout: {exc}") from None
    return MaintenancePolicy.build(window, calendar, blackouts)


def parse(argv: list[str], env: Mapping[str, str]) -> Config:
    """Parse kured's command line and ``KURED_*`` environment into a validated :class:`Config`, silently."""
    return settle(read_flags(argv, env), env)


def lock_records(cfg: Config) -> list[tuple[int, str]]:
    """Step 10: the lock lines kured logs once its Kubernetes client exists."""
    info = [f"Lock Annotation: {cfg.ds_namespace}/{cfg.ds_name}:{cfg.lock_annotation}"]
    if cfg.lock_backend != LOCK_BACKENDS.default.name:
        info.append(f"Lock backend: {cfg.lock_backend}")
    budget = cfg.max_unavailable_budget
    if budget is not None:
        of = f" of the nodes of DaemonSet {cfg.ds_namespace}/{cfg.ds_name}" if budget.percent else " nodes"
        info.append(f"Max unavailable: {budget}{of} (with --concurrency {cfg.concurrency}: the lower wins)")
    if cfg.lock_ttl.ns > 0:
        info.append(f"Lock TTL set, lock will expire after: {cfg.lock_ttl}")
    else:
        info.append("Lock TTL not set, lock will remain until being released")
    if cfg.lock_release_delay.ns > 0:
        info.append(f"Lock release delay set, lock release will be delayed by: {cfg.lock_release_delay}")
    else:
        info.append("Lock release delay not set, lock will be released immediately after rebooting")
    return [(logging.INFO, line) for line in info]


def startup_records(cfg: Config, version: str) -> list[tuple[int, str]]:
    """Every start-up line of a valid configuration, in kured's order (as the CLI logs them in a cluster)."""
    records: list[tuple[int, str]] = [(logging.INFO, f"Kubernetes Reboot Daemon: {version}")]
    flags = FlagValues.defaults()
    for spec in FLAGS:
        value = getattr(cfg, spec.field)
        flags.values[spec.name] = list(value) if isinstance(value, tuple) else value
    settle(flags, {"TZ": ""}, log=lambda level, message: records.append((level, message)))
    return records + lock_records(cfg)


def startup_lines(cfg: Config, version: str) -> list[str]:
    """The start-up messages in kured's order (warnings included, without their level)."""
    return [message for _, message in startup_records(cfg, version)]
