"""Start-up differential: each case runs through the REAL kured 1.23.0 binary and through pykured's ``kured``.

Both run outside a cluster (no ``KUBERNETES_SERVICE_HOST``), with the case's flags and ``KURED_*`` variables
and nothing else in the environment but ``PATH``. kured parses its flags, applies ``LoadFromEnv``, logs its
configuration lines and then dies on ``rest.InClusterConfig()`` (``unable to load in-cluster configuration,
…``, exit 1), or dies earlier on a flag, env or validation error. Every line either program writes to stdout
and stderr and the exit code are compared after :func:`normalise`, which changes only what must differ:

* the timestamp of a logrus line (``time="2026-11-30T21:35:08Z"``, text and JSON): the clock moves between
  the runs; its shape and UTC offset are kept, so the time zone of the timestamps is compared;
* the version in ``Kubernetes Reboot Daemon: <version>``: pykured reports its own version;
* in pykured's usage text (``--help`` and flag errors), the lines of pykured's extension flags: kured has no
  such flags (every other usage line, kured's flags' texts and alignment included, is compared).

A case whose outputs still differ must be in :data:`KEPT` with the reason pykured differs on purpose (each is
also a row of COMPATIBILITY.md); a kept case that no longer differs fails too, so the list stays true. Every
pykured run is also held to the start-up rule: no Python traceback, and a non-zero exit other than a flag
error (2) ends with exactly one fatal line in the configured log format.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

import pytest

from pykured.config.flags import FLAGS, KURED_FLAGS
from pykured_dev.testenv.reference import artifact

# running ~500 processes (and, cold, building kured) takes minutes on a loaded 2-core machine
pytestmark = [pytest.mark.reference, pytest.mark.timeout(1200)]
RUN_TIMEOUT_S = 30
NODE = {"KURED_NODE_ID": "node-1"}


@dataclasses.dataclass(frozen=True)
class Case:
    """One start-up: command-line arguments and the environment besides ``PATH``."""

    id: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = dataclasses.field(default_factory=lambda: dict(NODE))


def c(case_id: str, *args: str, env: Mapping[str, str] | None = None, node: bool = True) -> Case:
    """A case; ``KURED_NODE_ID=node-1`` is set unless ``node=False`` or ``env`` sets it."""
    merged = dict(NODE) if node else {}
    merged.update(env or {})
    return Case(case_id, args, merged)


def e(case_id: str, *args: str, **env: str) -> Case:
    """A case with ``KURED_NODE_ID=node-1`` plus the given environment variables."""
    return c(case_id, *args, env=env)


SLACK = "https://hooks.slack.com/services/T000/B000/XXXX"
CASES: list[Case] = [
    # --- basics, node id, pflag grammar -------------------------------------------------------------------
    c("defaults"),
    c("node-id-flag", "--node-id=worker-1", node=False),
    c("node-id-flag-separate", "--node-id", "worker 1", node=False),
    c("node-id-missing", node=False),
    c("node-id-missing-json", "--log-format=json", node=False),
    e("node-id-env-over-flag", "--node-id=from-flag", KURED_NODE_ID="from-env"),
    e("node-id-env-empty-over-flag", "--node-id=from-flag", KURED_NODE_ID=""),
    c("node-id-unicode", "--node-id=nöde-ü", node=False),
    c("node-id-quoted", '--node-id="quoted"', node=False),
    e("node-id-newline", KURED_NODE_ID="a\nb"),
    e("node-id-control-characters", KURED_NODE_ID="tab\there\x01\u2028end"),
    c("node-id-json-html-characters", "--log-format=json", "--node-id=a&b<c>\u2028", node=False),
    e("in-cluster-host-without-port", KUBERNETES_SERVICE_HOST="127.0.0.1"),
    c("node-id-lowercase-env-ignored", env={"kured_node_id": "n"}, node=False),
    c("help-long", "--help"),
    c("help-short", "-h"),
    c("unknown-flag", "--frobnicate"),
    c("unknown-flag-value", "--frobnicate=1"),
    c("unknown-shorthand", "-x"),
    c("no-version-flag", "--version"),  # kured has none; pykured's --version is the pykured command's only
    c("single-dash-long-flag", "-node-id=x"),
    c("bad-flag-syntax", "---node-id=x"),
    c("bad-flag-syntax-equals", "--=x"),
    c("flag-needs-argument", "--period"),
    c("abbreviation-rejected", "--node=x"),
    c("underscore-rejected", "--node_id=x"),
    c("positional-ignored", "extra", "args"),
    c("double-dash-ends-flags", "--", "--period=bad"),
    c("go-test-flag-ignored", "-test.v"),
    c("removed-annotation-ttl", "--annotation-ttl=1h"),
    c("value-starting-with-dash", "--ds-name", "--kured"),
    c("flag-given-twice-last-wins", "--period=5m", "--period=7m"),
    c("first-error-wins", "--period=x", "--frobnicate"),
    # --- bools ----------------------------------------------------------------------------------------------
    c("force-reboot", "--force-reboot"),
    c("force-reboot-false", "--force-reboot=false"),
    c("force-reboot-invalid", "--force-reboot=yes"),
    c("force-reboot-separate-value-positional", "--force-reboot", "false"),
    e("force-reboot-env-1", KURED_FORCE_REBOOT="1"),
    e("force-reboot-env-TRUE", KURED_FORCE_REBOOT="TRUE"),
    e("force-reboot-env-invalid", KURED_FORCE_REBOOT="yes"),
    e("force-reboot-env-empty", KURED_FORCE_REBOOT=""),
    c("annotate-nodes", "--annotate-nodes"),
    c("annotate-nodes-false", "--annotate-nodes=F"),
    e("annotate-nodes-env", KURED_ANNOTATE_NODES="true"),
    e("annotate-nodes-env-over-flag", "--annotate-nodes", KURED_ANNOTATE_NODES="false"),
    e("annotate-nodes-env-invalid", KURED_ANNOTATE_NODES="on"),
    c("alert-filter-match-only", "--alert-filter-match-only"),
    e("alert-filter-match-only-env", KURED_ALERT_FILTER_MATCH_ONLY="t"),
    c("alert-firing-only", "--alert-firing-only=true"),
    e("alert-firing-only-env-invalid", KURED_ALERT_FIRING_ONLY="2"),
    # --- ints -----------------------------------------------------------------------------------------------
    c("metrics-port", "--metrics-port=9090"),
    c("metrics-port-hex", "--metrics-port=0x1F90"),
    c("metrics-port-invalid", "--metrics-port=abc"),
    c("metrics-port-overflow", "--metrics-port=99999999999999999999"),
    c("metrics-port-float", "--metrics-port=80.5"),
    e("metrics-port-env", KURED_METRICS_PORT="9090"),
    e("metrics-port-env-leading-zero", KURED_METRICS_PORT="017620"),
    e("metrics-port-env-space", KURED_METRICS_PORT=" 9090"),
    e("metrics-port-env-empty", KURED_METRICS_PORT=""),
    e("metrics-port-env-service-link", KURED_METRICS_PORT="tcp://10.96.0.7:8080"),
    c("metrics-host", "--metrics-host=127.0.0.1"),
    e("metrics-host-env", KURED_METRICS_HOST="::1"),
    c("drain-grace-period", "--drain-grace-period=30"),
    c("drain-grace-period-negative", "--drain-grace-period=-5"),
    c("drain-grace-period-invalid", "--drain-grace-period=1.5"),
    e("drain-grace-period-env-invalid", KURED_DRAIN_GRACE_PERIOD="x"),
    c("skip-wait-for-delete-timeout", "--skip-wait-for-delete-timeout=60"),
    c("skip-wait-for-delete-timeout-invalid", "--skip-wait-for-delete-timeout=ten"),
    e(
        "skip-wait-for-delete-timeout-env-service-link",
        KURED_SKIP_WAIT_FOR_DELETE_TIMEOUT="udp://10.0.0.1:53",
    ),
    c("concurrency", "--concurrency=3"),
    c("concurrency-zero", "--concurrency=0"),
    c("concurrency-negative", "--concurrency=-1"),
    c("concurrency-invalid", "--concurrency=two"),
    e("concurrency-env", KURED_CONCURRENCY="2"),
    e("concurrency-env-plus", KURED_CONCURRENCY="+2"),
    e("concurrency-env-hex", KURED_CONCURRENCY="0x2"),
    e("concurrency-env-over-flag", "--concurrency=5", KURED_CONCURRENCY="4"),
    e("concurrency-env-service-link", KURED_CONCURRENCY="tcp://10.0.0.1:80"),
    # --- durations ------------------------------------------------------------------------------------------
    c("period", "--period=10m"),
    c("period-compound", "--period=1h30m45.5s"),
    c("period-zero", "--period=0"),
    c("period-micro", "--period=1500us"),
    c("period-missing-unit", "--period=10"),
    c("period-invalid-unit", "--period=1d"),
    e("period-env", KURED_PERIOD="5m"),
    e("period-env-over-flag", "--period=10m", KURED_PERIOD="2m"),
    e("period-env-invalid", KURED_PERIOD="soon"),
    e("period-env-empty", KURED_PERIOD=""),
    e("period-env-service-link", KURED_PERIOD="tcp://10.0.0.1:80"),
    c("drain-delay", "--drain-delay=30s"),
    c("drain-delay-invalid", "--drain-delay=30"),
    e("drain-delay-env", KURED_DRAIN_DELAY="1h30m"),
    e("drain-delay-env-invalid", KURED_DRAIN_DELAY="bogus"),
    c("drain-timeout", "--drain-timeout=5m"),
    c("drain-timeout-negative", "--drain-timeout=-1s"),
    e("drain-timeout-env", KURED_DRAIN_TIMEOUT="10m"),
    e("drain-timeout-env-over-flag", "--drain-timeout=1m", KURED_DRAIN_TIMEOUT="2m"),
    c("reboot-delay", "--reboot-delay=1.5h"),
    e("reboot-delay-env-invalid", KURED_REBOOT_DELAY="90"),
    c("lock-ttl", "--lock-ttl=30m"),
    c("lock-ttl-negative", "--lock-ttl=-5m"),
    e("lock-ttl-env", KURED_LOCK_TTL="1h"),
    c("lock-release-delay", "--lock-release-delay=90s"),
    e("lock-release-delay-env", KURED_LOCK_RELEASE_DELAY="2m"),
    e("lock-release-delay-env-invalid", KURED_LOCK_RELEASE_DELAY="2 m"),
    # --- plain strings and their env vars -------------------------------------------------------------------
    c("drain-pod-selector", "--drain-pod-selector=app=web"),
    e("drain-pod-selector-env", KURED_DRAIN_POD_SELECTOR="tier!=db"),
    c(
        "ds-namespace-name-annotation",
        "--ds-namespace=ops",
        "--ds-name=kured2",
        "--lock-annotation=x.io/lock",
    ),
    e("ds-env", KURED_DS_NAMESPACE="infra", KURED_DS_NAME="reboot", KURED_LOCK_ANNOTATION="a/b"),
    e("ds-name-env-over-flag", "--ds-name=flag", KURED_DS_NAME="env"),
    c("prometheus-url", "--prometheus-url=http://prometheus:9090"),
    e("prometheus-url-env", KURED_PROMETHEUS_URL="http://user:secret@prom:9090"),
    c("reboot-sentinel", "--reboot-sentinel=/run/reboot-needed"),
    e("reboot-sentinel-env", KURED_REBOOT_SENTINEL="/host/var/run/reboot-required"),
    c("prefer-no-schedule-taint", "--prefer-no-schedule-taint=weave.works/kured-node-reboot"),
    e("prefer-no-schedule-taint-env", KURED_PREFER_NO_SCHEDULE_TAINT="x/y"),
    c(
        "message-templates",
        "--message-template-drain=D %s",
        "--message-template-reboot=R %s",
        "--message-template-uncordon=U %s",
    ),
    e("message-template-env-multiline", KURED_MESSAGE_TEMPLATE_DRAIN="line1\nline2 %s"),
    e("message-template-uncordon-env", KURED_MESSAGE_TEMPLATE_UNCORDON="%s back"),
    e("message-template-reboot-env", KURED_MESSAGE_TEMPLATE_REBOOT="bye %s"),
    # --- reboot method, command, signal ---------------------------------------------------------------------
    c("reboot-method-command", "--reboot-method=command"),
    c("reboot-method-signal", "--reboot-method=signal"),
    c("reboot-method-invalid", "--reboot-method=kexec"),
    c("reboot-method-invalid-json", "--reboot-method=kexec", "--log-format=json"),
    c("reboot-method-case", "--reboot-method=Signal"),
    c("reboot-method-empty", "--reboot-method="),
    e("reboot-method-env", KURED_REBOOT_METHOD="signal"),
    e("reboot-method-env-over-flag", "--reboot-method=kexec", KURED_REBOOT_METHOD="command"),
    c("reboot-method-zincati", "--reboot-method=zincati"),
    c("reboot-command", "--reboot-command=/sbin/reboot -f"),
    c("reboot-command-quoted-args", "--reboot-command=/bin/sh -c 'echo going; systemctl reboot'"),
    c("reboot-command-empty", "--reboot-command="),
    c("reboot-command-blank", "--reboot-command=   "),
    c("reboot-command-unterminated", '--reboot-command=sh -c "reboot'),
    c("reboot-command-trailing-escape", "--reboot-command=reboot \\"),
    c("reboot-command-comment", "--reboot-command=reboot # now"),
    c("reboot-command-ignored-for-signal", "--reboot-method=signal", "--reboot-command="),
    e("reboot-command-env", KURED_REBOOT_COMMAND="/usr/bin/systemctl reboot --force"),
    e("reboot-command-env-quoted", KURED_REBOOT_COMMAND='"/sbin/reboot"'),
    c("reboot-signal", "--reboot-method=signal", "--reboot-signal=40"),
    c("reboot-signal-zero", "--reboot-method=signal", "--reboot-signal=0"),
    c("reboot-signal-negative", "--reboot-method=signal", "--reboot-signal=-1"),
    c("reboot-signal-too-large", "--reboot-method=signal", "--reboot-signal=65"),
    c("reboot-signal-ignored-for-command", "--reboot-signal=0"),
    c("reboot-signal-invalid", "--reboot-signal=SIGTERM"),
    e("reboot-signal-env", "--reboot-method=signal", KURED_REBOOT_SIGNAL="15"),
    e("reboot-signal-env-invalid", KURED_REBOOT_SIGNAL="RTMIN+5"),
    # --- sentinel -------------------------------------------------------------------------------------------
    c("sentinel-command", "--reboot-sentinel-command=test -f /var/run/reboot-required"),
    c("sentinel-command-quoted", "--reboot-sentinel-command=sh -c '! needs-restarting --reboothint'"),
    c("sentinel-command-unterminated", "--reboot-sentinel-command=sh -c 'x"),
    c("sentinel-command-blank", "--reboot-sentinel-command= "),
    e("sentinel-command-env", KURED_REBOOT_SENTINEL_COMMAND="/usr/bin/needs-reboot"),
    c("sentinel-command-wins-over-file", "--reboot-sentinel=/x", "--reboot-sentinel-command=true"),
    # --- alert filter regexp --------------------------------------------------------------------------------
    c("alert-filter", "--alert-filter-regexp=^(RebootRequired|Watchdog)$"),
    c("alert-filter-invalid", "--alert-filter-regexp=("),
    c("alert-filter-lookahead", "--alert-filter-regexp=(?=x)"),
    c("alert-filter-named-group", "--alert-filter-regexp=(?P<n>x)|(?<m>y)"),
    c("alert-filter-backreference", "--alert-filter-regexp=(a)\\1"),
    c("alert-filter-repeat-too-large", "--alert-filter-regexp=a{1001}"),
    c("alert-filter-unicode-class", "--alert-filter-regexp=\\pL+"),
    c("alert-filter-flags-mid-pattern", "--alert-filter-regexp=^(?i)watchdog|info$"),
    c("alert-filter-ungreedy-and-script", "--alert-filter-regexp=(?U)\\p{Greek}+"),
    c("alert-filter-lookbehind", "--alert-filter-regexp=(?<=x)"),
    c("alert-filter-any-byte", "--alert-filter-regexp=x\\C"),
    c("alert-filter-non-ascii-group-name", "--alert-filter-regexp=(?P<é>x)"),
    c("alert-filter-empty", "--alert-filter-regexp="),
    e("alert-filter-env", KURED_ALERT_FILTER_REGEXP="^Watchdog$"),
    e("alert-filter-env-invalid", KURED_ALERT_FILTER_REGEXP="(unclosed"),
    # --- notifications --------------------------------------------------------------------------------------
    c("notify-url", "--notify-url=slack://T000/B000/XXXX"),
    c("notify-url-quoted", "--notify-url='smtp://u:p@host:25/?from=a@b&to=c@d'"),
    e("notify-url-env", KURED_NOTIFY_URL='"teams://group@tenant/alt/groupowner"'),
    c("slack-hook-url", f"--slack-hook-url={SLACK}"),
    c("slack-hook-url-quoted", f"--slack-hook-url='{SLACK}'"),
    c("slack-hook-url-bad-path", "--slack-hook-url=https://hooks.slack.com/services/T000/B000"),
    c("slack-hook-url-unparsable", "--slack-hook-url=https://hooks slack.com/%zz"),
    e("slack-hook-url-env", KURED_SLACK_HOOK_URL=SLACK),
    c("slack-hook-url-and-notify-url", f"--slack-hook-url={SLACK}", "--notify-url=slack://A/B/C"),
    c("slack-hook-url-json", f"--slack-hook-url={SLACK}", "--log-format=json"),
    c("slack-hook-url-then-bad-zone", f"--slack-hook-url={SLACK}", "--time-zone=Mars/Olympus"),
    c("slack-username-channel", "--slack-username=bot", "--slack-channel=#ops"),
    e("slack-username-env", KURED_SLACK_USERNAME="bot", KURED_SLACK_CHANNEL="ops"),
    # --- blocking pod selectors (stringArray) ---------------------------------------------------------------
    c("blocking-pod-selector", "--blocking-pod-selector=app=db"),
    c(
        "blocking-pod-selector-two",
        "--blocking-pod-selector=app=db",
        "--blocking-pod-selector=runtime=long,cost=high",
    ),
    c("blocking-pod-selector-empty", "--blocking-pod-selector="),
    e("blocking-pod-selector-env-unsupported", KURED_BLOCKING_POD_SELECTOR="app=db"),
    e("blocking-pod-selector-env-and-flag", "--blocking-pod-selector=a=b", KURED_BLOCKING_POD_SELECTOR="c=d"),
    # --- reboot days (stringSlice), times, zone: the window line and its errors ----------------------------
    c("reboot-days", "--reboot-days=mo,tu,we,th,fr"),
    c("reboot-days-repeated", "--reboot-days=monday", "--reboot-days=FRIDAY"),
    c("reboot-days-numbers", "--reboot-days=0,6"),
    c("reboot-days-plus-number", "--reboot-days=+1,06"),
    c("reboot-days-out-of-range", "--reboot-days=7"),
    c("reboot-days-invalid", "--reboot-days=funday"),
    c("reboot-days-empty", "--reboot-days="),
    c("reboot-days-csv-quoted", '--reboot-days="mo,tu",we'),
    c("reboot-days-csv-bare-quote", '--reboot-days=mo"'),
    c("reboot-days-leading-space", "--reboot-days=mo, tu"),
    e("reboot-days-env", KURED_REBOOT_DAYS="sa,su"),
    e("reboot-days-env-appends", "--reboot-days=mo", KURED_REBOOT_DAYS="tu"),
    e("reboot-days-env-invalid", KURED_REBOOT_DAYS="xx"),
    c("start-end-time", "--start-time=8:00", "--end-time=18:00"),
    c("start-end-time-overnight", "--start-time=22:00", "--end-time=06:00"),
    c("start-time-pm", "--start-time=08:30pm"),
    c("start-time-pm-unpadded-rejected", "--start-time=5:00pm"),
    c("start-time-3pm", "--start-time=3pm", "--end-time=11pm"),
    c("start-time-hour-only", "--start-time=15"),
    c("start-time-seconds", "--start-time=10:00:30"),
    c("start-time-fraction", "--start-time=10:00:30.5"),
    c("start-time-invalid", "--start-time=25:00"),
    c("start-time-uppercase-pm", "--start-time=03PM"),
    c("end-time-invalid", "--end-time=bad"),
    c("end-time-invalid-json", "--end-time=6", "--end-time=99:99", "--log-format=json"),
    e("start-time-env", KURED_START_TIME="1:00", KURED_END_TIME="5:00"),
    e("start-time-env-invalid", KURED_START_TIME="noon"),
    c("time-zone", "--time-zone=Europe/Berlin"),
    c("time-zone-invalid", "--time-zone=Mars/Olympus"),
    c("time-zone-invalid-json", "--time-zone=Mars/Olympus", "--log-format=json"),
    c("time-zone-empty", "--time-zone="),
    c("time-zone-local", "--time-zone=Local", env={"TZ": "Asia/Tokyo"}),
    c("time-zone-local-tz-unset", "--time-zone=Local"),
    c("time-zone-local-tz-empty", "--time-zone=Local", env={"TZ": ""}),
    c("time-zone-local-tz-invalid", "--time-zone=Local", env={"TZ": "Bogus/Zone"}),
    c("time-zone-local-tz-path", "--time-zone=Local", env={"TZ": ":/usr/share/zoneinfo/Europe/Paris"}),
    c("time-zone-lowercase-local", "--time-zone=local"),
    c("time-zone-lowercase-utc", "--time-zone=utc"),
    c("time-zone-posix-style", "--time-zone=EST5EDT"),
    c("time-zone-etc", "--time-zone=Etc/GMT+5"),
    c("time-zone-deep", "--time-zone=America/Argentina/Buenos_Aires"),
    c("time-zone-dotdot", "--time-zone=../etc/passwd"),
    c("time-zone-absolute", "--time-zone=/etc/localtime"),
    c("time-zone-directory", "--time-zone=Europe"),
    e("time-zone-env", KURED_TIME_ZONE="America/Los_Angeles"),
    e("time-zone-env-invalid", KURED_TIME_ZONE="Nowhere/Land"),
    c("days-error-before-zone-error", "--reboot-days=xx", "--time-zone=Mars/Olympus"),
    c("zone-error-before-time-error", "--time-zone=Mars/Olympus", "--start-time=bad"),
    # --- log format -----------------------------------------------------------------------------------------
    c("log-format-json", "--log-format=json"),
    c(
        "log-format-json-everything",
        "--log-format=json",
        "--annotate-nodes",
        "--lock-ttl=1m",
        "--reboot-method=signal",
        "--pre-reboot-node-labels=a=1",
        "--post-reboot-node-labels=b=1",
    ),
    c("log-format-JSON-is-text", "--log-format=JSON"),
    c("log-format-other-is-text", "--log-format=logfmt"),
    e("log-format-env", KURED_LOG_FORMAT="json"),
    e("log-format-env-over-flag", "--log-format=json", KURED_LOG_FORMAT="text"),
    e("log-timestamps-follow-TZ", "--log-format=json", TZ="America/New_York"),
    e("log-timestamps-follow-TZ-text", TZ="Asia/Kolkata"),
    # --- node labels ----------------------------------------------------------------------------------------
    c("labels-matching", "--pre-reboot-node-labels=zombie=true", "--post-reboot-node-labels=zombie=false"),
    c("labels-mismatched", "--pre-reboot-node-labels=a=1", "--post-reboot-node-labels=b=1"),
    c("labels-only-pre", "--pre-reboot-node-labels=a=1,b=2"),
    c(
        "labels-same-keys-other-order",
        "--pre-reboot-node-labels=a=1,b=2",
        "--post-reboot-node-labels=b=3,a=4",
    ),
    c("labels-without-equals", "--pre-reboot-node-labels=a", "--post-reboot-node-labels=a"),
    c("labels-csv-quoted", '--pre-reboot-node-labels="a=1,2"', '--post-reboot-node-labels="a=3"'),
    e("labels-env", KURED_PRE_REBOOT_NODE_LABELS="k=v", KURED_POST_REBOOT_NODE_LABELS="k=w"),
    e("labels-env-appends", "--pre-reboot-node-labels=a=1", KURED_PRE_REBOOT_NODE_LABELS="b=1"),
    # --- environment: order, unknown names, Kubernetes service links ---------------------------------------
    e("env-errors-in-sorted-order", KURED_PERIOD="x", KURED_CONCURRENCY="y"),
    e("env-error-after-flag-error", "--period=x", KURED_CONCURRENCY="y"),
    e("env-unknown-ignored", KURED_FROBNICATE="1", KURED_="x"),
    e(
        "env-service-link-kured",
        KURED_SERVICE_HOST="10.96.0.9",
        KURED_SERVICE_PORT="8080",
        KURED_PORT="tcp://10.96.0.9:8080",
        KURED_PORT_8080_TCP="tcp://10.96.0.9:8080",
        KURED_PORT_8080_TCP_PROTO="tcp",
        KURED_PORT_8080_TCP_PORT="8080",
        KURED_PORT_8080_TCP_ADDR="10.96.0.9",
    ),
    e(
        "env-service-link-kured-metrics",
        KURED_METRICS_SERVICE_HOST="10.96.0.7",
        KURED_METRICS_SERVICE_PORT="8080",
        KURED_METRICS_PORT="tcp://10.96.0.7:8080",
        KURED_METRICS_PORT_8080_TCP="tcp://10.96.0.7:8080",
    ),
    e("env-service-link-shaped-string", KURED_METRICS_HOST="tcp://10.96.0.7:8080"),
    e(
        "env-every-string-at-once",
        KURED_DS_NAME="d",
        KURED_DS_NAMESPACE="n",
        KURED_LOCK_ANNOTATION="l/a",
        KURED_PREFER_NO_SCHEDULE_TAINT="t",
        KURED_REBOOT_SENTINEL="/s",
        KURED_TIME_ZONE="Asia/Tokyo",
        KURED_START_TIME="2:00",
        KURED_END_TIME="4:00",
        KURED_REBOOT_DAYS="su",
        KURED_LOCK_TTL="5m",
    ),
    # --- pykured extensions, as kured sees them -------------------------------------------------------------
    c("extension-flag-lock-backend", "--lock-backend=lease"),
    e("extension-env-lock-backend", KURED_LOCK_BACKEND="lease"),
    e("extension-env-log-level-invalid", KURED_LOG_LEVEL="verbose"),
    e("extension-env-dump-config", KURED_DUMP_CONFIG="true"),
    e("extension-env-config-missing", KURED_CONFIG="/nonexistent/kured.conf"),
]

# Outputs that differ on purpose, with why; each reason is a row of COMPATIBILITY.md.
ENV_ERROR = (
    "a KURED_* value its flag type rejects: kured prints its message with fmt.Printf on stdout, unformatted; "
    "pykured logs the same words as one fatal line in the configured log format on stderr (every start-up "
    "failure is one log line), exit code 1 as kured"
)
SERVICE_LINK = (
    "kured #1108: a Kubernetes service-link value (tcp://…) in an int, bool or duration KURED_* variable "
    "crash-loops kured; pykured ignores it with a warning"
)
POSITIONAL = "pykured warns about ignored positional arguments (usually `--bool value`, which pflag ignores)"
FOOTGUN = "pykured adds a warning where kured silently does something surprising (COMPATIBILITY.md: footguns)"
EXTENSION = "pykured extension: kured has no such flag or variable"
KEPT: dict[str, str] = {
    **dict.fromkeys(
        [
            "force-reboot-env-invalid",
            "force-reboot-env-empty",
            "annotate-nodes-env-invalid",
            "alert-firing-only-env-invalid",
            "metrics-port-env-space",
            "metrics-port-env-empty",
            "drain-grace-period-env-invalid",
            "concurrency-env-hex",
            "period-env-invalid",
            "period-env-empty",
            "drain-delay-env-invalid",
            "reboot-delay-env-invalid",
            "lock-release-delay-env-invalid",
            "reboot-signal-env-invalid",
            "alert-filter-env-invalid",
            "env-errors-in-sorted-order",
        ],
        ENV_ERROR,
    ),
    **dict.fromkeys(
        [
            "metrics-port-env-service-link",
            "skip-wait-for-delete-timeout-env-service-link",
            "concurrency-env-service-link",
            "period-env-service-link",
            "env-service-link-kured-metrics",
        ],
        SERVICE_LINK,
    ),
    **dict.fromkeys(
        ["positional-ignored", "double-dash-ends-flags", "force-reboot-separate-value-positional"], POSITIONAL
    ),
    **dict.fromkeys(
        ["alert-filter-empty", "blocking-pod-selector-empty", "slack-username-channel", "slack-username-env"],
        FOOTGUN,
    ),
    **dict.fromkeys(
        [
            "reboot-method-zincati",
            "extension-flag-lock-backend",
            "extension-env-log-level-invalid",
            "extension-env-dump-config",
            "extension-env-config-missing",
        ],
        EXTENSION,
    ),
    "reboot-command-blank": (
        "a blank --reboot-command: kured starts and would run nsenter with no command at reboot time; "
        "pykured stops at start-up with kured's `Failed to build rebooter: no reboot command specified`"
    ),
    "reboot-signal-too-large": (
        "--reboot-signal above 64: kured fails only when it reboots; pykured refuses it at start-up "
        "(`Failed to build rebooter: invalid signal: 65`)"
    ),
    "slack-hook-url-and-notify-url": (
        "kured's `Cannot use both` warning swaps the two URLs and prints their secrets; pykured names each "
        "flag's own URL, redacted"
    ),
    "labels-without-equals": (
        "a node label without `=`: kured panics when it applies it; pykured refuses it at start-up"
    ),
}


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What one program printed and returned, normalised."""

    stdout: tuple[str, ...]
    stderr: tuple[str, ...]
    code: int

    def show(self) -> str:
        out = "\n".join(f"  stdout| {line}" for line in self.stdout)
        err = "\n".join(f"  stderr| {line}" for line in self.stderr)
        return f"  exit {self.code}\n{out}\n{err}".replace("\n\n", "\n")


_TEXT_TIME = re.compile(r'^time="\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(Z|[+-]\d\d:\d\d)" ')
_JSON_TIME = re.compile(r'"time":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(Z|[+-]\d\d:\d\d)"')
_VERSION = re.compile(r"Kubernetes Reboot Daemon: [^\"]*")


def normalise(line: str) -> str:
    """Only the clock (shape and UTC offset kept) and the product version are replaced."""
    line = _TEXT_TIME.sub(r'time="<time>\1" ', line)
    line = _JSON_TIME.sub(r'"time":"<time>\1"', line)
    return _VERSION.sub("Kubernetes Reboot Daemon: <version>", line)


_EXTENSION_USAGE = re.compile(
    r"^      --(" + "|".join(re.escape(spec.name) for spec in FLAGS if spec.extension) + r") "
)


def run(executable: Path, case: Case, *, pykured: bool = False) -> Outcome:
    """Run one program as ``kured`` (argv[0], as in kured's image) outside any cluster."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **case.env}
    done = subprocess.run(
        ["kured", *case.args],
        executable=str(executable),
        env=env,
        capture_output=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )

    out, err = _lines(done.stdout, pykured=pykured), _lines(done.stderr, pykured=pykured)
    return Outcome(out, err, done.returncode)


def _lines(data: bytes, *, pykured: bool) -> tuple[str, ...]:
    lines = data.decode("utf-8", "replace").splitlines()
    return tuple(normalise(line) for line in lines if not (pykured and _EXTENSION_USAGE.match(line)))


def pykured_executable() -> Path:
    """pykured's ``kured`` console script beside the interpreter running the tests."""
    return Path(sys.executable).parent / "kured"


ZYGOTE = """
import json, os, sys, time
import pykured.__main__, pykured.cli.agent  # what every start-up imports, imported once
for line in sys.stdin:
    case = json.loads(line)
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:  # a process of its own: kured's argv, the case's environment, its own stdout and stderr
        os.dup2(os.open(case["out"], os.O_WRONLY), 1)
        os.dup2(os.open(case["err"], os.O_WRONLY), 2)
        os.environ.clear()
        os.environ.update(case["env"])
        time.tzset()
        sys.argv = ["kured", *case["args"]]
        raise SystemExit(pykured.__main__.kured())
    print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
"""
"""pykured's start-ups, forked from one interpreter that has imported pykured: each case is still a process
with its own argv, environment, file descriptors and exit (``atexit`` and all), without paying the imports
~500 times. Started with only ``PATH`` in its environment, as each case's process would be."""


FORK_CHECKS = (
    "defaults",
    "help-long",
    "unknown-flag",
    "node-id-missing-json",
    "reboot-method-invalid-json",
    "time-zone-local",
    "log-timestamps-follow-TZ-text",
)


class Zygote:
    """Runs :data:`ZYGOTE`; :meth:`run` answers like :func:`run` for pykured."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.proc = subprocess.Popen(
            [sys.executable, "-c", ZYGOTE],
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def run(self, case: Case) -> Outcome:
        out, err = self.workdir / f"{case.id}.out", self.workdir / f"{case.id}.err"
        out.touch()
        err.touch()
        assert self.proc.stdin is not None and self.proc.stdout is not None
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **case.env}
        request = {"args": list(case.args), "env": env, "out": str(out), "err": str(err)}
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        code = int(self.proc.stdout.readline())
        return Outcome(_lines(out.read_bytes(), pykured=True), _lines(err.read_bytes(), pykured=True), code)

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=RUN_TIMEOUT_S)
        self.proc.stdout.close()


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Outcome, Outcome]]:
    """Every case through both programs, (kured, pykured): kured 4 at a time, pykured forked one by one."""
    kured = artifact("kured")
    zygote = Zygote(tmp_path_factory.mktemp("startups"))
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
            futures = {case.id: pool.submit(run, kured, case) for case in CASES}
            theirs = {case.id: zygote.run(case) for case in CASES}
            return {key: (future.result(), theirs[key]) for key, future in futures.items()}
    finally:
        zygote.close()


def test_the_forked_start_up_answers_as_the_console_script() -> None:
    """The fork changes nothing a start-up shows: a few cases run both ways give the same outcome."""
    picked = [case for case in CASES if case.id in FORK_CHECKS]
    assert len(picked) == len(FORK_CHECKS)
    with tempfile.TemporaryDirectory() as scratch:
        zygote = Zygote(Path(scratch))
        try:
            for case in picked:
                assert zygote.run(case) == run(pykured_executable(), case, pykured=True), case.id
        finally:
            zygote.close()


def test_cases_cover_every_kured_flag_and_env_var() -> None:
    assert len(CASES) >= 150
    assert len({case.id for case in CASES}) == len(CASES)
    text = [arg for case in CASES for arg in case.args] + [name for case in CASES for name in case.env]
    for spec in KURED_FLAGS:
        assert any(arg.startswith(f"--{spec.name}") for arg in text), spec.name
        assert spec.env_var in text, spec.env_var


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_same_output_as_kured(case: Case, outcomes: dict[str, tuple[Outcome, Outcome]]) -> None:
    kured, pykured = outcomes[case.id]
    if case.id in KEPT:
        assert kured != pykured, f"{case.id} is listed as a kept difference but the outputs now agree"
        return
    assert pykured == kured, f"\nkured:\n{kured.show()}\npykured:\n{pykured.show()}"


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_failure_is_one_line_in_the_log_format(
    case: Case, outcomes: dict[str, tuple[Outcome, Outcome]]
) -> None:
    _, pykured = outcomes[case.id]
    assert not any("Traceback" in line for line in pykured.stdout + pykured.stderr), pykured.show()
    if pykured.code in (0, 2):
        return
    fatal = [line for line in pykured.stderr if "level=fatal" in line or '"level":"fatal"' in line]
    assert len(fatal) == 1, pykured.show()
    assert pykured.stderr[-1] == fatal[0], pykured.show()
    if _wants_json(case):
        assert json.loads(fatal[0])["level"] == "fatal"
    else:
        assert fatal[0].startswith('time="<time>'), pykured.show()


def _wants_json(case: Case) -> bool:
    """Whether the case's log format is JSON (the env var wins, as kured's LoadFromEnv applies it last)."""
    if "KURED_LOG_FORMAT" in case.env:
        return case.env["KURED_LOG_FORMAT"] == "json"
    chosen = [arg.partition("=")[2] for arg in case.args if arg.startswith("--log-format=")]
    return bool(chosen) and chosen[-1] == "json"
