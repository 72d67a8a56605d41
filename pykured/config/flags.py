"""The flag table: every kured 1.23 flag and every pykured extension, with type, default and help text.

kured defines its flags with spf13/pflag (``cmd/kured/main.go``); each flag is also read from the environment
variable ``KURED_`` + the upper-cased name with ``-`` → ``_``. This table is the single source for the parser
(:mod:`pykured.config.reader`), the ``--help`` text (:func:`usage`, laid out like pflag's ``FlagUsages``) and
the compatibility document. Defaults are kept as the strings pflag would ``Set``; ``None`` is an unset regexp.
pykured extensions never change the meaning of a kured flag.
"""

from __future__ import annotations

import dataclasses
import enum

from pykured.gocompat.goflags import go_quote
from pykured.lock.registry import BACKENDS as LOCK_BACKENDS


class Kind(enum.Enum):
    """A pflag value type; the value is pflag's ``Type()`` name shown in the usage text."""

    BOOL = "bool"
    INT = "int"
    STRING = "string"
    DURATION = "duration"
    REGEXP = "regexp"
    STRING_SLICE = "strings"
    STRING_ARRAY = "stringArray"
    INT_OR_PERCENT = "int|percent"
    """Kubernetes' int-or-percent (``3`` or ``25%``), as a DaemonSet's ``maxUnavailable``; pflag has none."""


@dataclasses.dataclass(frozen=True, slots=True)
class FlagSpec:
    """One command-line flag."""

    name: str
    kind: Kind
    default: str | None
    help: str
    extension: bool = False
    varname: str | None = None
    """The value's name in ``--help`` (pflag's back-quoted name in a usage text); default the type's."""

    @property
    def env_var(self) -> str:
        """kured's env var name: ``KURED_`` + upper-cased name with dashes as underscores."""
        return "KURED_" + self.name.upper().replace("-", "_")

    @property
    def field(self) -> str:
        """The :class:`pykured.config.Config` field name."""
        return self.name.replace("-", "_")


def _k(name: str, kind: Kind, default: str | None, text: str) -> FlagSpec:
    return FlagSpec(name, kind, default, text)


def _x(name: str, kind: Kind, default: str | None, text: str, *, varname: str | None = None) -> FlagSpec:
    return FlagSpec(name, kind, default, text, extension=True, varname=varname)


BOOL, INT, STR, DUR, REGEXP, SLICE, ARRAY = (
    Kind.BOOL,
    Kind.INT,
    Kind.STRING,
    Kind.DURATION,
    Kind.REGEXP,
    Kind.STRING_SLICE,
    Kind.STRING_ARRAY,
)

KURED_FLAGS: tuple[FlagSpec, ...] = (
    _k(
        "node-id",
        STR,
        "",
        "node name kured runs on, should be passed down from spec.nodeName via KURED_NODE_ID environment "
        "variable",
    ),
    _k("force-reboot", BOOL, "false", "force a reboot even if the drain fails or times out"),
    _k("metrics-host", STR, "", "host where metrics will listen"),
    _k("metrics-port", INT, "8080", "port number where metrics will listen"),
    _k(
        "drain-grace-period",
        INT,
        "-1",
        "time in seconds given to each pod to terminate gracefully, if negative, the default value "
        "specified in the pod will be used",
    ),
    _k(
        "drain-pod-selector",
        STR,
        "",
        "only drain pods with labels matching the selector (default: '', all pods)",
    ),
    _k(
        "skip-wait-for-delete-timeout",
        INT,
        "0",
        "when seconds is greater than zero, skip waiting for the pods whose deletion timestamp is older "
        "than N seconds while draining a node",
    ),
    _k("drain-delay", DUR, "0s", "delay drain for this duration (default: 0, disabled)"),
    _k("drain-timeout", DUR, "0s", "timeout after which the drain is aborted (default: 0, infinite time)"),
    _k("reboot-delay", DUR, "0s", "delay reboot for this duration (default: 0, disabled)"),
    _k(
        "reboot-method",
        STR,
        "command",
        "method to use for reboots. Available: command",
    ),
    _k("period", DUR, "1h0m0s", "sentinel check period"),
    _k("ds-namespace", STR, "kube-system", "namespace containing daemonset on which to place lock"),
    _k("ds-name", STR, "kured", "name of daemonset on which to place lock"),
    _k("lock-annotation", STR, "weave.works/kured-node-lock", "annotation in which to record locking node"),
    _k("lock-ttl", DUR, "0s", "expire lock annotation after this duration (default: 0, disabled)"),
    _k("lock-release-delay", DUR, "0s", "delay lock release for this duration (default: 0, disabled)"),
    _k("prometheus-url", STR, "", "Prometheus instance to probe for active alerts"),
    _k("alert-filter-regexp", REGEXP, None, "alert names to ignore when checking for active alerts"),
    _k(
        "alert-filter-match-only",
        BOOL,
        "false",
        "Only block if the alert-filter-regexp matches active alerts",
    ),
    _k("alert-firing-only", BOOL, "false", "only consider firing alerts when checking for active alerts"),
    _k(
        "reboot-sentinel",
        STR,
        "/var/run/reboot-required",
        "path to file whose existence triggers the reboot command",
    ),
    _k(
        "reboot-sentinel-command",
        STR,
        "",
        "command for which a zero return code will trigger a reboot command",
    ),
    _k(
        "prefer-no-schedule-taint",
        STR,
        "",
        "Taint name applied during pending node reboot (to prevent receiving additional pods from other "
        'rebooting nodes). Disabled by default. Set e.g. to "weave.works/kured-node-reboot" to enable '
        "tainting.",
    ),
    _k("reboot-command", STR, "/bin/systemctl reboot", "command to run when a reboot is required"),
    _k("concurrency", INT, "1", "amount of nodes to concurrently reboot. Defaults to 1"),
    _k("reboot-signal", INT, "39", "signal to use for reboot, SIGRTMIN+5 by default."),
    _k(
        "slack-hook-url",
        STR,
        "",
        "slack hook URL for reboot notifications [deprecated in favor of --notify-url]",
    ),
    _k("slack-username", STR, "kured", "slack username for reboot notifications"),
    _k("slack-channel", STR, "", "slack channel for reboot notifications"),
    _k("notify-url", STR, "", "notify URL for reboot notifications (cannot use with --slack-hook-url flags)"),
    _k(
        "message-template-uncordon",
        STR,
        "Node %s rebooted & uncordoned successfully!",
        "message template used to notify about a node being successfully uncordoned",
    ),
    _k(
        "message-template-drain",
        STR,
        "Draining node %s",
        "message template used to notify about a node being drained",
    ),
    _k(
        "message-template-reboot",
        STR,
        "Rebooting node %s",
        "message template used to notify about a node being rebooted",
    ),
    _k(
        "blocking-pod-selector",
        ARRAY,
        "",
        "label selector identifying pods whose presence should prevent reboots",
    ),
    _k("reboot-days", SLICE, "su,mo,tu,we,th,fr,sa", "schedule reboot on these days"),
    _k("start-time", STR, "0:00", "schedule reboot only after this time of day"),
    _k("end-time", STR, "23:59:59", "schedule reboot only before this time of day"),
    _k("time-zone", STR, "UTC", "use this timezone for schedule inputs"),
    _k(
        "annotate-nodes",
        BOOL,
        "false",
        "if set, the annotations 'weave.works/kured-reboot-in-progress' and "
        "'weave.works/kured-most-recent-reboot-needed' will be given to nodes undergoing kured reboots",
    ),
    _k("log-format", STR, "text", "use text or json log format"),
    _k(
        "pre-reboot-node-labels",
        SLICE,
        "",
        "labels to add to nodes before cordoning",
    ),
    _k(
        "post-reboot-node-labels",
        SLICE,
        "",
        "labels to add to nodes after uncordoning",
    ),
)

EXTENSION_FLAGS: tuple[FlagSpec, ...] = (
    _x(
        "lock-backend",
        STR,
        LOCK_BACKENDS.default.name,
        "pykured: where the lock lives: " + " or ".join(f"{b.name} ({b.about})" for b in LOCK_BACKENDS),
    ),
    _x(
        "lease-prefix",
        STR,
        "",
        "pykured: Lease name prefix for --lock-backend=lease (default: <ds-name>-lock)",
    ),
    _x(
        "kubeconfig",
        STR,
        "",
        "pykured: kubeconfig file to use instead of the in-cluster configuration (KUBECONFIG is not read)",
    ),
    _x("log-level", STR, "info", "pykured: log level: debug, info, warning or error"),
    _x(
        "config",
        STR,
        "",
        "pykured: config file (key = value per flag); precedence: defaults < config file < command line < "
        "KURED_* env",
    ),
    _x(
        "dump-config",
        BOOL,
        "false",
        "pykured: print the effective configuration as JSON (secrets redacted) and exit",
    ),
    _x(
        "zincati-marker-file",
        STR,
        "/var/lib/zincati/admin/strategy/marker_file/allowfinalize.json",
        "pykured: marker file written for --reboot-method=zincati",
    ),
    _x(
        "zincati-allow-duration",
        DUR,
        "1h0m0s",
        "pykured: allowUntil = now + this duration in the zincati marker file",
    ),
    _x(
        "reboot-signal-relay",
        STR,
        "",
        "pykured: with --reboot-method=signal, ask the signal relay of the pod (kured signal-relay, a second "
        "container) through this FIFO to send the signal, so that the agent needs neither root nor CAP_KILL "
        "(default: off, the agent signals PID 1 itself)",
        varname="path",
    ),
    _x(
        "zincati-marker-content",
        STR,
        "",
        'pykured: marker file content (default: {"allowUntil": <unix seconds>}); any other value is written '
        "verbatim",
    ),
    _x(
        "reboot-retry-delay",
        DUR,
        "10m0s",
        "pykured: after a restart with an unchanged boot ID, wait this long before triggering the reboot "
        "again (once)",
    ),
    _x(
        "sentinel-loop-backoff",
        DUR,
        "1h0m0s",
        "pykured: if the sentinel is still present right after a completed reboot, wait this long before "
        "rebooting again",
    ),
    _x("events", BOOL, "true", "pykured: post Kubernetes Events on the Node"),
    _x(
        "extra-notify-url",
        ARRAY,
        "",
        "pykured: additional notification URL, in addition to --notify-url (repeatable)",
    ),
    _x(
        "fleetlock-listen",
        STR,
        "",
        "pykured: serve the FleetLock protocol for Zincati on this address, e.g. 127.0.0.1:3333 (default: "
        "off)",
    ),
    _x("fleetlock-mode", STR, "node-local", "pykured: FleetLock mode: node-local or central"),
    _x("fleetlock-group", STR, "default", "pykured: FleetLock group served"),
    _x(
        "fleetlock-base-path",
        STR,
        "/",
        "pykured: FleetLock URL path before v1/...; ${group} stands for --fleetlock-group; / (the default) "
        "accepts any prefix, as Zincati's base_url with ${group} sends",
    ),
    _x(
        "machine-id-file",
        STR,
        "/etc/machine-id",
        "pykured: machine-id file used to map Zincati node UUIDs to this node",
    ),
    _x(
        "maintenance-window",
        ARRAY,
        "",
        "pykured: calendar window: RFC 5545 RRULE parts plus DURATION=<Go duration> (e.g. "
        "FREQ=MONTHLY;BYDAY=+2TU;BYHOUR=1;DURATION=4h); repeatable; reboots start when any window is open",
    ),
    _x(
        "blackout",
        SLICE,
        "",
        "pykured: blackout START/END [reason] (ISO 8601, local to --time-zone), overrides every window",
    ),
    _x(
        "policy-configmap",
        STR,
        "kured-policy",
        'pykured: ConfigMap in --ds-namespace watched for blackouts and the freeze switch; "" turns it off',
    ),
    _x(
        "concurrency-label",
        STR,
        "",
        "pykured: with --lock-backend=lease, also limit reboots per value of this node label, e.g. "
        "topology.kubernetes.io/zone (default: off)",
    ),
    _x(
        "concurrency-per-label",
        Kind.INT_OR_PERCENT,
        "1",
        "pykured: nodes per --concurrency-label value rebooting at once: N, or P% of the nodes with that "
        "value (at least 1)",
    ),
    _x(
        "max-unavailable",
        Kind.INT_OR_PERCENT,
        "",
        "pykured: also limit the nodes rebooting at once to N, or to P% of the nodes the DaemonSet runs on "
        "(its status.desiredNumberScheduled; rounded down, at least 1); the lower of this and --concurrency "
        "wins (default: off)",
    ),
    _x(
        "prefer-no-schedule-early",
        BOOL,
        "false",
        "pykured: put the --prefer-no-schedule-taint on as soon as the node needs a reboot, while it waits "
        "for the window, a blocker or the lock; removed when the need goes away",
    ),
    _x(
        "resume-rolls",
        BOOL,
        "false",
        "pykured: with --lock-backend=lease, nodes not yet rebooted in the current roll take the lock first, "
        "so a roll interrupted by a closed window resumes where it stopped",
    ),
    _x(
        "settle-pod-selector",
        ARRAY,
        "",
        "pykured: before releasing the lock, wait until this node's pods matching this selector are Ready "
        "(repeatable)",
    ),
    _x(
        "settle-nodes-ready",
        BOOL,
        "false",
        "pykured: before releasing the lock, wait until every Node is Ready",
    ),
    _x(
        "settle-pdbs",
        BOOL,
        "false",
        "pykured: before releasing the lock, wait until the PodDisruptionBudgets of the drained pods allow "
        "disruptions",
    ),
    _x(
        "settle-prometheus-query",
        STR,
        "",
        "pykured: before releasing the lock, wait until this query against --prometheus-url is empty",
    ),
    _x("settle-timeout", DUR, "30m0s", "pykured: release the lock anyway (warning, Event) after this long"),
    _x(
        "before-reboot-annotations",
        SLICE,
        "",
        'pykured: Node annotations that must all be "true" before the drain (hooks; label '
        "pykured.dev/before-reboot=true asks)",
    ),
    _x(
        "after-reboot-annotations",
        SLICE,
        "",
        'pykured: Node annotations that must all be "true" after the reboot before the lock is released',
    ),
    _x(
        "reboot-hook-timeout",
        DUR,
        "1h0m0s",
        "pykured: give up waiting for reboot hooks after this long (before: abort the cycle; after: release)",
    ),
    _x(
        "reboot-deadline",
        DUR,
        "0s",
        "pykured: a lock holder not back (Ready, new bootID, after-reboot gates passed) this long after its "
        "reboot began halts the fleet: the halt is set until pykured unfreeze (default: off)",
    ),
    _x(
        "max-failed-drains",
        INT,
        "0",
        "pykured: this many consecutive failed drains, counted across the fleet, halt it: the halt is set "
        "until pykured unfreeze (default: 0, off)",
    ),
    _x(
        "drain-escalation",
        SLICE,
        "",
        "pykured: what happens when --drain-timeout runs out, in order: delete (delete the pods left without "
        "the eviction API, then another --drain-timeout), then force (reboot anyway) or quarantine (leave "
        "the node cordoned, not rebooted, and release the lock) (default: none, kured's behaviour)",
        varname="steps",
    ),
    _x(
        "blocking-node-label",
        ARRAY,
        "",
        "pykured: this node takes no lock while its Node carries this label, key or key=value (repeatable)",
        varname="key",
    ),
    _x(
        "blocking-node-annotation",
        ARRAY,
        "",
        "pykured: this node takes no lock while its Node carries this annotation, key or key=value "
        "(repeatable)",
        varname="key",
    ),
    _x(
        "alertmanager-url",
        STR,
        "",
        "pykured: Alertmanager to probe for active alerts that are neither silenced nor inhibited "
        "(--alert-filter-* apply; pykured's own reboot silences do not count), and where "
        "--silence-during-reboot silences",
        varname="url",
    ),
    _x(
        "silence-during-reboot",
        STR,
        "",
        "pykured: silence these Alertmanager matchers from the lock until the node is back and settled, "
        "expired before its slot is freed ({{.Node}} is the node's name; an = or =~ matcher must hold it, "
        'e.g. node="{{.Node}}")',
        varname="matchers",
    ),
    _x(
        "silence-max",
        DUR,
        "2h0m0s",
        "pykured: the longest a --silence-during-reboot silence lasts, at most 24h (it is expired sooner, "
        "when the node is back and settled)",
    ),
    _x(
        "cluster-autoscaler-annotation",
        STR,
        "cluster-autoscaler.kubernetes.io/scale-down-disabled",
        'pykured: from the lock until its cycle ends, the Node carries this annotation as "true" (where it '
        'has none) so the cluster-autoscaler does not scale it down while it is drained; "" turns it off',
        varname="key",
    ),
    _x(
        "karpenter-annotation",
        STR,
        "karpenter.sh/do-not-disrupt",
        'pykured: from the lock until its cycle ends, the Node carries this annotation as "true" (where it '
        'has none) so Karpenter neither consolidates nor drifts it while it is drained; "" turns it off',
        varname="key",
    ),
    _x(
        "reboot-condition",
        ARRAY,
        "",
        "pykured: a Node condition TYPE[=STATUS][:FOR] that makes this node need a reboot, as the sentinel "
        "does, once it has held for FOR and only if it appeared since the node's current boot, e.g. "
        "KernelDeadlock=True:5m (STATUS default True, FOR default 0; repeatable) (default: none)",
        varname="condition",
    ),
    _x(
        "reboot-condition-max",
        INT,
        "2",
        "pykured: at most this many reboots for --reboot-condition per node within "
        "--reboot-condition-period; a condition asking for one more quarantines the node instead",
    ),
    _x(
        "reboot-condition-period",
        DUR,
        "24h0m0s",
        "pykured: the period --reboot-condition-max counts reboots in",
    ),
    _x(
        "reboot-condition-fleet-max",
        Kind.INT_OR_PERCENT,
        "20%",
        "pykured: when more nodes than N, or than P% of the nodes (rounded down, at least 1), show a "
        "--reboot-condition at once, the fleet halts instead of rebooting for it (until pykured unfreeze)",
        varname="N|P%",
    ),
)

FLAGS: tuple[FlagSpec, ...] = KURED_FLAGS + EXTENSION_FLAGS
BY_NAME: dict[str, FlagSpec] = {spec.name: spec for spec in FLAGS}


def _default_text(spec: FlagSpec) -> str | None:
    """pflag's ``DefValue`` when it is not the zero value (zero values are not shown)."""
    if spec.kind is Kind.BOOL:
        return None if spec.default == "false" else spec.default
    if spec.kind in (Kind.STRING_SLICE, Kind.STRING_ARRAY):
        return f"[{spec.default}]" if spec.default else None
    if spec.kind is Kind.STRING:
        return go_quote(spec.default) if spec.default else None
    if spec.kind is Kind.INT:
        return None if spec.default == "0" else spec.default
    if spec.kind is Kind.DURATION:
        return None if spec.default == "0s" else spec.default
    return None if not spec.default else spec.default


def usage(prog: str = "kured") -> str:
    """The ``--help`` text, laid out as pflag's default usage (flags sorted by name, aligned help column)."""
    heads: list[str] = []
    for spec in sorted(FLAGS, key=lambda s: s.name):
        head = f"      --{spec.name}"
        if spec.kind is not Kind.BOOL:
            head += f" {spec.varname or spec.kind.value}"
        heads.append(head)
    width = max(len(head) for head in heads)
    lines = [f"Usage of {prog}:"]
    for head, spec in zip(heads, sorted(FLAGS, key=lambda s: s.name), strict=True):
        text = spec.help
        default = _default_text(spec)
        if default is not None:
            text += f" (default {default})"
        lines.append(f"{head}{' ' * (width - len(head) + 3)}{text}")
    return "\n".join(lines) + "\n"
