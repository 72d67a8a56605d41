"""pykured's configuration: one frozen value with a field per kured flag, parsed exactly as kured parses it.

kured 1.23 reads pflag flags, then ``KURED_*`` env vars (``LoadFromEnv``: env overrides the command line,
``stringSlice`` values append), then validates in ``main()``. :func:`pykured.config.parse` does the same,
purely (:mod:`pykured.config.startup` holds kured's order of checks and lines): the environment is passed in
(only the ``--config`` file and, for ``--time-zone=Local``, ``/etc/localtime`` are read). Precedence:
defaults < ``--config`` file < command line < ``KURED_*`` env.

Field names are the flag names with ``_`` for ``-``; durations are
:class:`~pykured.gocompat.goflags.Duration`;
``stringSlice``/``stringArray`` flags are tuples; ``alert_filter_regexp`` is None when unset. Errors are
:class:`~pykured.core.errors.ConfigError` with kured's text and exit code (2: flag syntax; 1: env and
validation;
0: ``--help``, whose message is the usage text). For exit code 2 the CLI prints the message, then
:func:`usage`. Warnings (deprecated flags, ignored env vars) are returned in ``Config.warnings`` for the CLI
to log.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pykured.blockers.options import NodeMark
from pykured.conditions.record import ConditionSpec
from pykured.config import checks
from pykured.config.flags import FLAGS, Kind
from pykured.config.flags import usage as _usage
from pykured.config.reader import HelpRequested
from pykured.core.errors import ConfigError
from pykured.gocompat.goflags import Duration
from pykured.gocompat.goregexp import GoRegexp, compile_re2
from pykured.lock.budget import Budget
from pykured.lock.registry import BACKENDS as LOCK_BACKENDS
from pykured.notify.redact import redact_password, redact_url
from pykured.policy.maintenance import MaintenancePolicy
from pykured.policy.weekly import TimeWindow

__all__ = ["Config", "ConfigError", "HelpRequested", "typed", "usage"]

_DEFAULT_DAYS = ("su", "mo", "tu", "we", "th", "fr", "sa")
_DEFAULT_WINDOW = TimeWindow.parse(_DEFAULT_DAYS, "0:00", "23:59:59", "UTC")
_DEFAULT_POLICY = MaintenancePolicy.build(_DEFAULT_WINDOW)
REBOOT_METHODS = ("command", "signal", "zincati")
_ZERO = Duration(0)
_H = Duration(3_600_000_000_000)
_10M = Duration(600_000_000_000)
_30M = Duration(1_800_000_000_000)
_2H = Duration(7_200_000_000_000)
_24H = Duration(86_400_000_000_000)
_ZERO = Duration(0)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    """The effective configuration. Defaults are kured's (and pykured's for extension flags)."""

    # kured 1.23 flags, in kured's definition order
    node_id: str = ""
    force_reboot: bool = False
    metrics_host: str = ""
    metrics_port: int = 8080
    drain_grace_period: int = -1
    drain_pod_selector: str = ""
    skip_wait_for_delete_timeout: int = 0
    drain_delay: Duration = _ZERO
    drain_timeout: Duration = _ZERO
    reboot_delay: Duration = _ZERO
    reboot_method: str = "command"
    period: Duration = _H
    ds_namespace: str = "kube-system"
    ds_name: str = "kured"
    lock_annotation: str = "weave.works/kured-node-lock"
    lock_ttl: Duration = _ZERO
    lock_release_delay: Duration = _ZERO
    prometheus_url: str = ""
    alert_filter_regexp: str | None = None
    alert_filter_match_only: bool = False
    alert_firing_only: bool = False
    reboot_sentinel: str = "/var/run/reboot-required"
    reboot_sentinel_command: str = ""
    prefer_no_schedule_taint: str = ""
    reboot_command: str = "/bin/systemctl reboot"
    concurrency: int = 1
    reboot_signal: int = 39
    slack_hook_url: str = ""
    slack_username: str = "kured"
    slack_channel: str = ""
    notify_url: str = ""
    message_template_uncordon: str = "Node %s rebooted & uncordoned successfully!"
    message_template_drain: str = "Draining node %s"
    message_template_reboot: str = "Rebooting node %s"
    blocking_pod_selector: tuple[str, ...] = ()
    reboot_days: tuple[str, ...] = _DEFAULT_DAYS
    start_time: str = "0:00"
    end_time: str = "23:59:59"
    time_zone: str = "UTC"
    annotate_nodes: bool = False
    log_format: str = "text"
    pre_reboot_node_labels: tuple[str, ...] = ()
    post_reboot_node_labels: tuple[str, ...] = ()
    # pykured extensions
    lock_backend: str = LOCK_BACKENDS.default.name
    lease_prefix: str = ""
    kubeconfig: str = ""
    log_level: str = "info"
    config: str = ""
    dump_config: bool = False
    zincati_marker_file: str = "/var/lib/zincati/admin/strategy/marker_file/allowfinalize.json"
    zincati_allow_duration: Duration = _H
    reboot_signal_relay: str = ""
    zincati_marker_content: str = ""
    reboot_retry_delay: Duration = _10M
    sentinel_loop_backoff: Duration = _H
    events: bool = True
    extra_notify_url: tuple[str, ...] = ()
    fleetlock_listen: str = ""
    fleetlock_mode: str = "node-local"
    fleetlock_group: str = "default"
    fleetlock_base_path: str = "/"
    machine_id_file: str = "/etc/machine-id"
    maintenance_window: tuple[str, ...] = ()
    blackout: tuple[str, ...] = ()
    policy_configmap: str = "kured-policy"
    concurrency_label: str = ""
    concurrency_per_label: int | str = 1
    max_unavailable: int | str = ""
    prefer_no_schedule_early: bool = False
    resume_rolls: bool = False
    settle_pod_selector: tuple[str, ...] = ()
    settle_nodes_ready: bool = False
    settle_pdbs: bool = False
    settle_prometheus_query: str = ""
    settle_timeout: Duration = _30M
    before_reboot_annotations: tuple[str, ...] = ()
    after_reboot_annotations: tuple[str, ...] = ()
    reboot_hook_timeout: Duration = _H
    reboot_deadline: Duration = _ZERO
    max_failed_drains: int = 0
    drain_escalation: tuple[str, ...] = ()
    blocking_node_label: tuple[str, ...] = ()
    blocking_node_annotation: tuple[str, ...] = ()
    alertmanager_url: str = ""
    silence_during_reboot: str = ""
    silence_max: Duration = _2H
    cluster_autoscaler_annotation: str = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
    karpenter_annotation: str = "karpenter.sh/do-not-disrupt"
    reboot_condition: tuple[str, ...] = ()
    reboot_condition_max: int = 2
    reboot_condition_period: Duration = _24H
    reboot_condition_fleet_max: int | str = "20%"
    # derived at parse time
    time_window: TimeWindow = _DEFAULT_WINDOW
    """The reboot window built from reboot_days, start_time, end_time and time_zone by
    :func:`~pykured.config.startup.parse`."""
    maintenance: MaintenancePolicy = _DEFAULT_POLICY
    """kured's window, calendar windows and ``--blackout`` flags (:mod:`pykured.policy.maintenance`)."""
    warnings: tuple[str, ...] = dataclasses.field(default=(), compare=False)
    """Warnings found while parsing, in order, for the CLI to log."""

    @property
    def reboot_command_argv(self) -> tuple[str, ...]:
        """``--reboot-command`` split with google/shlex (run under nsenter by the command rebooter)."""
        return checks.split_command(self.reboot_command, flag="reboot-command")

    @property
    def reboot_sentinel_command_argv(self) -> tuple[str, ...]:
        """``--reboot-sentinel-command`` split with google/shlex; empty = use the sentinel file."""
        return checks.split_command(self.reboot_sentinel_command, flag="reboot-sentinel-command")

    @property
    def pre_reboot_labels(self) -> dict[str, str]:
        """``--pre-reboot-node-labels`` as a dict (value = text between the first and second ``=``)."""
        return checks.parse_labels(self.pre_reboot_node_labels, flag="pre-reboot-node-labels")

    @property
    def post_reboot_labels(self) -> dict[str, str]:
        """``--post-reboot-node-labels`` as a dict."""
        return checks.parse_labels(self.post_reboot_node_labels, flag="post-reboot-node-labels")

    @property
    def blocking_node_labels(self) -> tuple[NodeMark, ...]:
        """``--blocking-node-label`` parsed (``key`` or ``key=value``)."""
        return checks.parse_node_marks(self.blocking_node_label, flag="blocking-node-label")

    @property
    def blocking_node_annotations(self) -> tuple[NodeMark, ...]:
        """``--blocking-node-annotation`` parsed."""
        return checks.parse_node_marks(self.blocking_node_annotation, flag="blocking-node-annotation")

    @property
    def reboot_conditions(self) -> tuple[ConditionSpec, ...]:
        """``--reboot-condition`` parsed (:func:`pykured.conditions.record.parse_specs`)."""
        return checks.parse_conditions(self.reboot_condition)

    @property
    def autoscaler_annotations(self) -> tuple[str, ...]:
        """The autoscalers' annotations the Node carries while its cycle runs (each flag's, unless ``""``)."""
        names = (self.cluster_autoscaler_annotation, self.karpenter_annotation)
        return tuple(dict.fromkeys(name.strip() for name in names if name.strip()))

    @property
    def effective_notify_url(self) -> str:
        """kured's ``validateNotificationURL`` result: the one URL kured notifies ("" = none)."""
        return checks.resolve_notify_url(self.notify_url, self.slack_hook_url)[0]

    @property
    def notify_urls(self) -> tuple[str, ...]:
        """Every notification destination: the effective URL, then each non-empty ``--extra-notify-url``."""
        extra = (checks.strip_quotes(url) for url in self.extra_notify_url if url)
        return tuple(url for url in (self.effective_notify_url, *extra) if url)

    @property
    def alert_filter(self) -> GoRegexp | None:
        """``--alert-filter-regexp`` compiled with RE2 semantics (None when unset)."""
        return None if self.alert_filter_regexp is None else compile_re2(self.alert_filter_regexp)

    @property
    def max_unavailable_budget(self) -> Budget | None:
        """``--max-unavailable`` as a budget (``None``: off)."""
        return None if self.max_unavailable == "" else Budget.of(self.max_unavailable)

    @property
    def concurrency_per_label_budget(self) -> Budget:
        """``--concurrency-per-label`` as a budget (a number of nodes, or a share of a label value's)."""
        return Budget.of(self.concurrency_per_label)

    @property
    def lease_name_prefix(self) -> str:
        """Lease names are ``<prefix>-<slot>``; the prefix defaults to ``<ds-name>-lock``."""
        return self.lease_prefix or f"{self.ds_name}-lock"

    @property
    def metrics_address(self) -> str:
        """kured's metrics listen address ``<host>:<port>`` (empty host = all interfaces)."""
        return f"{self.metrics_host}:{self.metrics_port}"

    def to_public_dict(self) -> dict[str, Any]:
        """Every flag by name, JSON-ready (durations in Go form), with secrets in URLs redacted."""
        out: dict[str, Any] = {}
        for spec in FLAGS:
            value = getattr(self, spec.field)
            if isinstance(value, Duration):
                value = str(value)
            elif isinstance(value, tuple):
                value = list(value)
            if spec.name in ("notify-url", "slack-hook-url"):
                value = redact_url(checks.strip_quotes(value))
            elif spec.name == "extra-notify-url":
                value = [redact_url(checks.strip_quotes(url)) for url in value]
            elif spec.name in ("prometheus-url", "alertmanager-url"):
                value = redact_password(value)
            out[spec.name] = value
        return out


def usage(prog: str = "kured") -> str:
    """pflag-style usage text listing every flag with its type, help and non-zero default."""
    return _usage(prog)


def typed(kind: Kind, value: Any) -> Any:
    """A flag's value as the :class:`Config` field holds it (lists become tuples)."""
    return tuple(value) if kind in (Kind.STRING_SLICE, Kind.STRING_ARRAY) else value
