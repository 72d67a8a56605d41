# ruff: noqa: E501  (data tables: one flag per row)
"""Config: kured's 43 flags and pykured's extensions, their KURED_* env vars, validation, derived values."""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest

from pykured.blockers.options import NodeMark
from pykured.config import Config, parse
from pykured.config import settings as config
from pykured.config.flags import FLAGS, KURED_FLAGS, Kind
from pykured.config.reader import read_flags
from pykured.config.startup import lock_records, settle
from pykured.core.errors import ConfigError
from pykured.gocompat.goflags import Duration

NODE = {"KURED_NODE_ID": "node-1"}
D = Duration.parse

# flag name → the typed default kured (or pykured) documents (kured's ``cmd/kured/main.go`` flags).
DEFAULTS: dict[str, Any] = {
    "node-id": "", "force-reboot": False, "metrics-host": "", "metrics-port": 8080, "drain-grace-period": -1,
    "drain-pod-selector": "", "skip-wait-for-delete-timeout": 0, "drain-delay": D("0"), "drain-timeout": D("0"),
    "reboot-delay": D("0"), "reboot-method": "command", "period": D("1h"), "ds-namespace": "kube-system",
    "ds-name": "kured", "lock-annotation": "weave.works/kured-node-lock", "lock-ttl": D("0"),
    "lock-release-delay": D("0"), "prometheus-url": "", "alert-filter-regexp": None,
    "alert-filter-match-only": False, "alert-firing-only": False, "reboot-sentinel": "/var/run/reboot-required",
    "reboot-sentinel-command": "", "prefer-no-schedule-taint": "", "reboot-command": "/bin/systemctl reboot",
    "concurrency": 1, "reboot-signal": 39, "slack-hook-url": "", "slack-username": "kured", "slack-channel": "",
    "notify-url": "", "message-template-uncordon": "Node %s rebooted & uncordoned successfully!",
    "message-template-drain": "Draining node %s", "message-template-reboot": "Rebooting node %s",
    "blocking-pod-selector": (), "reboot-days": ("su", "mo", "tu", "we", "th", "fr", "sa"), "start-time": "0:00",
    "end-time": "23:59:59", "time-zone": "UTC", "annotate-nodes": False, "log-format": "text",
    "pre-reboot-node-labels": (), "post-reboot-node-labels": (),
    "lock-backend": "daemonset", "lease-prefix": "", "kubeconfig": "", "log-level": "info", "config": "",
    "dump-config": False, "zincati-marker-file": "/var/lib/zincati/admin/strategy/marker_file/allowfinalize.json",
    "zincati-allow-duration": D("1h"), "zincati-marker-content": "", "reboot-signal-relay": "", "reboot-retry-delay": D("10m"),
    "sentinel-loop-backoff": D("1h"), "events": True, "extra-notify-url": (), "fleetlock-listen": "",
    "fleetlock-mode": "node-local", "fleetlock-group": "default", "fleetlock-base-path": "/", "machine-id-file": "/etc/machine-id",
    "maintenance-window": (), "blackout": (), "policy-configmap": "kured-policy", "concurrency-label": "",
    "concurrency-per-label": 1, "max-unavailable": "", "resume-rolls": False, "prefer-no-schedule-early": False, "settle-pod-selector": (), "settle-nodes-ready": False, "settle-pdbs": False,
    "settle-prometheus-query": "", "settle-timeout": D("30m"), "before-reboot-annotations": (),
    "after-reboot-annotations": (), "reboot-hook-timeout": D("1h"), "reboot-deadline": D("0"),
    "max-failed-drains": 0, "blocking-node-label": (), "blocking-node-annotation": (),
    "drain-escalation": (),
    "alertmanager-url": "", "silence-during-reboot": "", "silence-max": D("2h"),
    "cluster-autoscaler-annotation": "cluster-autoscaler.kubernetes.io/scale-down-disabled",
    "karpenter-annotation": "karpenter.sh/do-not-disrupt",
    "reboot-condition": (), "reboot-condition-max": 2, "reboot-condition-period": D("24h"),
    "reboot-condition-fleet-max": "20%",
}  # fmt: skip


def test_the_table_has_kureds_43_flags_and_the_extensions() -> None:
    assert len(KURED_FLAGS) == 43
    assert {spec.name for spec in FLAGS} == set(DEFAULTS)
    assert [f.name for f in dataclasses.fields(Config)][: len(FLAGS)] == [spec.field for spec in FLAGS]


@pytest.mark.parametrize("spec", FLAGS, ids=lambda s: s.name)
def test_default(spec: Any) -> None:
    parsed = parse([], {"KURED_NODE_ID": "n"} if spec.name != "node-id" else {"KURED_DUMP_CONFIG": "true"})
    assert getattr(parsed, spec.field) == DEFAULTS[spec.name]
    assert getattr(Config(), spec.field) == DEFAULTS[spec.name]


# One value per flag that differs from the default and is valid, as an env var and as a flag.
SAMPLES: dict[str, tuple[str | None, Any]] = {
    "node-id": ("n2", "n2"), "force-reboot": ("true", True), "metrics-host": ("127.0.0.1", "127.0.0.1"),
    "metrics-port": ("9090", 9090), "drain-grace-period": ("30", 30), "drain-pod-selector": ("app=x", "app=x"),
    "skip-wait-for-delete-timeout": ("60", 60), "drain-delay": ("1m", D("1m")), "drain-timeout": ("5m", D("5m")),
    "reboot-delay": ("90s", D("90s")), "reboot-method": ("signal", "signal"), "period": ("20s", D("20s")),
    "ds-namespace": ("kured", "kured"), "ds-name": ("my-kured", "my-kured"),
    "lock-annotation": ("example.com/lock", "example.com/lock"), "lock-ttl": ("30m", D("30m")),
    "lock-release-delay": ("2m", D("2m")), "prometheus-url": ("http://prom:9090", "http://prom:9090"),
    "alert-filter-regexp": ("^RebootRequired$", "^RebootRequired$"), "alert-filter-match-only": ("1", True),
    "alert-firing-only": ("t", True), "reboot-sentinel": ("/sentinel/reboot-required", "/sentinel/reboot-required"),
    "reboot-sentinel-command": ("sh -c true", "sh -c true"),
    "prefer-no-schedule-taint": ("weave.works/kured-node-reboot", "weave.works/kured-node-reboot"),
    "reboot-command": ("/sbin/reboot now", "/sbin/reboot now"), "concurrency": ("2", 2),
    "reboot-signal": ("15", 15), "slack-hook-url": ("https://hooks.slack.com/services/A/B/C", None),
    "slack-username": ("bot", "bot"), "slack-channel": ("#ops", "#ops"), "notify-url": ("slack://A/B/C", None),
    "message-template-uncordon": ("up %s", "up %s"), "message-template-drain": ("drain %s", "drain %s"),
    "message-template-reboot": ("boot %s", "boot %s"), "blocking-pod-selector": ("app=db", ("app=db",)),
    "reboot-days": ("mo,fr", ("mo", "fr")), "start-time": ("9pm", "9pm"), "end-time": ("5am", "5am"),
    "time-zone": ("Europe/Berlin", "Europe/Berlin"), "annotate-nodes": ("True", True),
    "log-format": ("json", "json"), "pre-reboot-node-labels": ("a=1,b=2", ("a=1", "b=2")),
    "post-reboot-node-labels": ("a=0", ("a=0",)), "lock-backend": ("lease", "lease"),
    "lease-prefix": ("kured-slot", "kured-slot"), "kubeconfig": ("/etc/kubeconfig", "/etc/kubeconfig"),
    "log-level": ("debug", "debug"), "config": (None, None), "dump-config": ("true", True),
    "zincati-marker-file": ("/run/m.json", "/run/m.json"), "zincati-allow-duration": ("15m", D("15m")),
    "zincati-marker-content": ("go", "go"), "reboot-signal-relay": ("/relay/reboot", "/relay/reboot"), "reboot-retry-delay": ("1m", D("1m")),
    "sentinel-loop-backoff": ("2h", D("2h")), "events": ("false", False),
    "extra-notify-url": ("generic://h/x", ("generic://h/x",)), "fleetlock-listen": ("127.0.0.1:3333", "127.0.0.1:3333"),
    "fleetlock-mode": ("central", "central"), "fleetlock-group": ("workers", "workers"),
    "fleetlock-base-path": ("/fleet/${group}/", "/fleet/${group}/"),
    "machine-id-file": ("/host/etc/machine-id", "/host/etc/machine-id"),
    "maintenance-window": ("FREQ=DAILY;BYHOUR=1;DURATION=1h", ("FREQ=DAILY;BYHOUR=1;DURATION=1h",)),
    "blackout": ("2026-12-23/2026-12-24", ("2026-12-23/2026-12-24",)),
    "policy-configmap": ("my-policy", "my-policy"), "concurrency-label": (None, None),
    "concurrency-per-label": ("2", 2), "max-unavailable": ("25%", "25%"), "resume-rolls": (None, None), "prefer-no-schedule-early": (None, None),
    "settle-pod-selector": ("app=web", ("app=web",)),
    "settle-nodes-ready": ("true", True), "settle-pdbs": ("true", True),
    "settle-prometheus-query": (None, None), "settle-timeout": ("5m", D("5m")),
    "before-reboot-annotations": ("lb/ok", ("lb/ok",)), "after-reboot-annotations": ("lb/ok", ("lb/ok",)),
    "reboot-hook-timeout": ("10m", D("10m")), "reboot-deadline": ("45m", D("45m")),
    "max-failed-drains": ("3", 3),
    "drain-escalation": (None, None),  # needs --drain-timeout: tests/config/test_escalation.py
    "blocking-node-label": ("example.com/hold=yes", ("example.com/hold=yes",)),
    "blocking-node-annotation": ("example.com/hold", ("example.com/hold",)),
    "alertmanager-url": ("http://am:9093", "http://am:9093"), "silence-during-reboot": (None, None),
    "silence-max": ("30m", D("30m")),
    "cluster-autoscaler-annotation": ("example.com/keep", "example.com/keep"),
    "karpenter-annotation": ("karpenter.sh/do-not-consolidate", "karpenter.sh/do-not-consolidate"),
    "reboot-condition": ("KernelDeadlock=True:5m", ("KernelDeadlock=True:5m",)),
    "reboot-condition-max": ("3", 3), "reboot-condition-period": ("12h", D("12h")),
    "reboot-condition-fleet-max": ("2", 2),
}  # fmt: skip


def _check_sample(cfg: Config, name: str, text: str, expected: Any) -> None:
    field = name.replace("-", "_")
    if expected is None:
        assert getattr(cfg, field) == text
    else:
        assert getattr(cfg, field) == expected


@pytest.mark.parametrize("spec", [s for s in FLAGS if SAMPLES[s.name][0] is not None], ids=lambda s: s.name)
def test_every_flag_on_the_command_line(spec: Any) -> None:
    text, expected = SAMPLES[spec.name]
    assert text is not None
    cfg = parse(
        [f"--{spec.name}={text}", "--node-id=n"] if spec.name != "node-id" else [f"--node-id={text}"], {}
    )
    _check_sample(cfg, spec.name, text, expected)


@pytest.mark.parametrize(
    "spec",
    [s for s in FLAGS if SAMPLES[s.name][0] is not None and s.name != "blocking-pod-selector"],
    ids=lambda s: s.env_var,
)
def test_every_flag_from_its_kured_env_var(spec: Any) -> None:
    text, expected = SAMPLES[spec.name]
    assert text is not None
    assert spec.env_var == "KURED_" + spec.name.upper().replace("-", "_")
    env = {"KURED_NODE_ID": "n", spec.env_var: text}
    _check_sample(parse([], env), spec.name, text, expected)


def test_blocking_pod_selector_env_is_ignored() -> None:
    """kured prints ``Unsupported flag type for blocking-pod-selector`` (the reader's ``printed``)."""
    cfg = parse([], {**NODE, "KURED_BLOCKING_POD_SELECTOR": "app=db"})
    assert cfg.blocking_pod_selector == ()


@pytest.mark.parametrize(
    ("argv", "env", "field", "expected"),
    [
        (["--period=30m"], {"KURED_PERIOD": "2h"}, "period", D("2h")),
        (["--reboot-days=mo"], {"KURED_REBOOT_DAYS": "sa"}, "reboot_days", ("mo", "sa")),
        (["--pre-reboot-node-labels=a=1"], {"KURED_PRE_REBOOT_NODE_LABELS": "b=2"}, "pre_reboot_node_labels",
         ("a=1", "b=2")),
        (["--node-id=cli"], {"KURED_NODE_ID": "env"}, "node_id", "env"),
        (["--metrics-port=017620"], {}, "metrics_port", 8080),
        ([], {"KURED_METRICS_PORT": "017620"}, "metrics_port", 17620),
    ],
    ids=["scalar", "slice-appends", "labels-append", "node-id", "cli-octal", "env-decimal"],
)  # fmt: skip
def test_precedence_env_over_cli(argv: list[str], env: dict[str, str], field: str, expected: Any) -> None:
    assert getattr(parse(argv, {**NODE, **env}), field) == expected


def test_node_id_is_required() -> None:
    with pytest.raises(ConfigError) as err:
        parse([], {})
    assert str(err.value) == "KURED_NODE_ID environment variable required"
    assert err.value.exit_code == 1


def test_empty_env_node_id_overrides_the_flag_and_is_refused() -> None:
    with pytest.raises(ConfigError, match="KURED_NODE_ID environment variable required"):
        parse(["--node-id=n"], {"KURED_NODE_ID": ""})


def test_dump_config_works_without_node_id() -> None:
    cfg = parse(["--dump-config"], {})
    assert cfg.dump_config is True
    assert cfg.node_id == ""


VALIDATION_ERRORS = [
    ("reboot-method", ["--reboot-method=kexec"],
     "Failed to build rebooter: invalid reboot-method configured kexec, expected signal or command"),
    ("signal-zero", ["--reboot-method=signal", "--reboot-signal=0"], "Failed to build rebooter: invalid signal: 0"),
    ("signal-too-big", ["--reboot-method=signal", "--reboot-signal=65"],
     "Failed to build rebooter: invalid signal: 65"),
    ("empty-command", ["--reboot-command="], "Failed to build rebooter: no reboot command specified"),
    ("blank-command", ["--reboot-command=  "], "Failed to build rebooter: no reboot command specified"),
    ("command-quote", ["--reboot-command=sh -c 'reboot"],
     "Failed to build rebooter: error EOF found when expecting closing quote when parsing reboot command "
     "sh -c 'reboot"),
    ("sentinel-command-quote", ["--reboot-sentinel-command=sh -c \"x"],
     "Failed to build reboot checker: error parsing provided sentinel command: EOF found when expecting "
     "closing quote"),
    ("pre-label", ["--pre-reboot-node-labels=nolabel"],
     "invalid label 'nolabel' in --pre-reboot-node-labels: expected key=value"),
    ("post-label", ["--post-reboot-node-labels=a=1,b"],
     "invalid label 'b' in --post-reboot-node-labels: expected key=value"),
    ("weekday", ["--reboot-days=mo,funday"], "Failed to build time window: invalid weekday: funday"),
    ("weekday-number", ["--reboot-days=7"], "Failed to build time window: invalid weekday, number out of range: 7"),
    ("start-time", ["--start-time=5:00pm"], "Failed to build time window: invalid time format: 5:00pm"),
    ("end-time", ["--end-time=10 AM"], "Failed to build time window: invalid time format: 10 AM"),
    ("time-zone", ["--time-zone=Mars/Olympus"], "Failed to build time window: unknown time zone Mars/Olympus"),
    ("lock-backend", ["--lock-backend=configmap"], "invalid lock-backend configured configmap, expected daemonset or lease"),
    ("log-level", ["--log-level=trace"], "invalid log-level configured trace, expected debug, info, warning or error"),
    ("fleetlock-mode", ["--fleetlock-mode=global"], "invalid fleetlock-mode configured global, expected node-local or central"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "message"), [c[1:] for c in VALIDATION_ERRORS], ids=[c[0] for c in VALIDATION_ERRORS]
)
def test_validation_errors_are_fatal_exit_1(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse(argv, NODE)
    assert str(err.value) == message
    assert err.value.exit_code == 1


@pytest.mark.parametrize(
    "argv",
    [
        ["--reboot-method=command", "--reboot-signal=0"],
        ["--reboot-method=signal", "--reboot-command="],
        ["--reboot-method=zincati", "--reboot-command="],
        ["--reboot-days="],
        ["--reboot-days=,,,"],
        ["--time-zone=Local"],
    ],
    ids=["signal-unused", "command-unused", "zincati", "no-days", "commas-only", "local-zone"],
)
def test_valid_combinations(argv: list[str]) -> None:
    assert parse(argv, NODE).node_id == "node-1"


def test_time_window_is_built_from_the_flags() -> None:
    cfg = parse(
        ["--reboot-days=mo,tu,we,th", "--start-time=8:00", "--end-time=18:00", "--time-zone=Europe/Berlin"],
        NODE,
    )
    assert str(cfg.time_window) == "---MonTueWedThu------ between 08:00 and 18:00 Europe/Berlin"
    assert cfg.time_window == Config().time_window.parse(
        ("mo", "tu", "we", "th"), "8:00", "18:00", "Europe/Berlin"
    )


def test_local_time_zone_follows_tz_from_the_given_environment() -> None:
    cfg = parse(
        ["--time-zone=Local", "--start-time=10:00", "--end-time=11:00"], {**NODE, "TZ": "Asia/Kolkata"}
    )
    import datetime

    assert cfg.time_window.contains(datetime.datetime(2026, 1, 6, 4, 45, tzinfo=datetime.UTC))
    assert str(cfg.time_window).endswith(" Asia/Kolkata")  # Go names its Local zone after TZ


@pytest.mark.parametrize(
    ("command", "argv"),
    [
        ("/bin/systemctl reboot", ("/bin/systemctl", "reboot")),
        ('sh -c "! needs-restarting --reboothint"', ("sh", "-c", "! needs-restarting --reboothint")),
        ("reboot # now", ("reboot",)),
    ],
    ids=["default", "needs-restarting", "comment"],
)
def test_command_argv(command: str, argv: tuple[str, ...]) -> None:
    cfg = parse([f"--reboot-command={command}", f"--reboot-sentinel-command={command}"], NODE)
    assert cfg.reboot_command_argv == argv
    assert cfg.reboot_sentinel_command_argv == argv


def test_sentinel_command_argv_empty_by_default() -> None:
    assert Config().reboot_sentinel_command_argv == ()


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        (["a=1", "b=2"], {"a": "1", "b": "2"}),
        (["k=v=w"], {"k": "v"}),
        (["k="], {"k": ""}),
        (["k=1", "k=2"], {"k": "2"}),
        ([], {}),
    ],
    ids=["two", "between-first-and-second-equals", "empty-value", "last-wins", "none"],
)
def test_labels(labels: list[str], expected: dict[str, str]) -> None:
    argv = [f"--pre-reboot-node-labels={label}" for label in labels]
    argv += [f"--post-reboot-node-labels={label}" for label in labels]
    cfg = parse(argv, NODE)
    assert cfg.pre_reboot_labels == expected
    assert cfg.post_reboot_labels == expected


NOTIFY_CASES = [
    ("slack-hook-only", "", "https://hooks.slack.com/services/A/B/C", "slack://A/B/C"),
    ("notify-wins", "teams://x@y/z/w", "https://hooks.slack.com/services/A/B/C", "teams://x@y/z/w"),
    ("slack-double-quotes", "", '"https://hooks.slack.com/services/A/B/C"', "slack://A/B/C"),
    ("slack-single-quotes", "", "'https://hooks.slack.com/services/A/B/C'", "slack://A/B/C"),
    ("notify-double-quotes", '"teams://x@y/z/w"', "", "teams://x@y/z/w"),
    ("notify-single-quotes", "'teams://x@y/z/w'", "", "teams://x@y/z/w"),
    ("none", "", "", ""),
    ("slack-bad-path", "", "https://hooks.slack.com/services/A/B", ""),
]  # fmt: skip


@pytest.mark.parametrize(
    ("notify", "slack", "expected"), [c[1:] for c in NOTIFY_CASES], ids=[c[0] for c in NOTIFY_CASES]
)
def test_effective_notify_url(notify: str, slack: str, expected: str) -> None:
    cfg = parse([f"--notify-url={notify}", f"--slack-hook-url={slack}"], NODE)
    assert cfg.effective_notify_url == expected


def _logged(argv: list[str]) -> list[tuple[int, str]]:
    lines: list[tuple[int, str]] = []
    settle(read_flags(argv, NODE), NODE, log=lambda level, message: lines.append((level, message)))
    return lines


def test_notify_warnings_are_logged_after_the_node_id_as_kured() -> None:
    both = _logged(["--notify-url=slack://A/B/C", "--slack-hook-url=https://hooks.slack.com/services/A/B/C"])
    assert both[1] == (
        logging.WARNING,
        "Cannot use both --notify-url (given: slack://A/REDACTED/REDACTED) and --slack-hook-url "
        "(given: https://hooks.slack.com/REDACTED/REDACTED/REDACTED/REDACTED) flags. Kured will only use "
        "--notify-url flag",
    )
    slack = _logged(["--slack-hook-url=https://hooks.slack.com/services/A/B/C"])
    assert slack[:2] == [
        (logging.INFO, "Node ID: node-1"),
        (logging.WARNING, "Deprecated flag(s). Please use --notify-url flag instead."),
    ]
    bad = _logged(["--slack-hook-url=https://hooks.slack.com/x"])
    assert bad[2] == (
        logging.ERROR,
        "slack-hook-url is not properly formatted... no notification will be sent: unexpected number of / in "
        "URL\n",
    )


@pytest.mark.parametrize(
    ("argv", "warning"),
    [
        (["--slack-channel=#ops"], "--slack-username and --slack-channel are ignored, as in kured"),
        (["--alert-filter-regexp="], "--alert-filter-regexp is empty: it matches every alert name"),
        (["--blocking-pod-selector="], "an empty --blocking-pod-selector matches every pod on the node"),
        (["--force-reboot", "false"], "Ignoring positional arguments: [false]"),
    ],
    ids=["slack-extras", "empty-regexp", "empty-selector", "positional"],
)
def test_pykured_warnings(argv: list[str], warning: str) -> None:
    assert warning in parse(argv, NODE).warnings


def test_notify_urls_combines_effective_and_extra() -> None:
    cfg = parse(["--slack-hook-url=https://hooks.slack.com/services/A/B/C", "--extra-notify-url='generic://h/x'",
                 "--extra-notify-url="], NODE)  # fmt: skip
    assert cfg.notify_urls == ("slack://A/B/C", "generic://h/x")


def test_alert_filter_is_compiled_with_re2_semantics() -> None:
    cfg = parse(["--alert-filter-regexp=^RebootRequired$"], NODE)
    assert cfg.alert_filter is not None
    assert cfg.alert_filter.search("RebootRequired")
    assert not cfg.alert_filter.search("RebootRequired\n")
    assert Config().alert_filter is None


@pytest.mark.parametrize(
    ("argv", "prefix"),
    [([], "kured-lock"), (["--ds-name=k"], "k-lock"), (["--lease-prefix=p"], "p")],
    ids=["default", "ds-name", "explicit"],
)
def test_lease_name_prefix(argv: list[str], prefix: str) -> None:
    assert parse(argv, NODE).lease_name_prefix == prefix


def test_metrics_address() -> None:
    assert Config().metrics_address == ":8080"
    assert parse(["--metrics-host=127.0.0.1", "--metrics-port=9"], NODE).metrics_address == "127.0.0.1:9"


def test_config_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Config().node_id = "x"  # type: ignore[misc]


def test_flag_errors_keep_exit_code_2() -> None:
    with pytest.raises(ConfigError) as err:
        parse(["--unknown"], NODE)
    assert (str(err.value), err.value.exit_code) == ("unknown flag: --unknown", 2)


def test_help() -> None:
    with pytest.raises(config.HelpRequested) as err:
        parse(["--help"], {})
    assert err.value.exit_code == 0
    assert str(err.value) == config.usage()


# kured's Helm chart 6.1.0 (``templates/daemonset.yaml``), default render: --reboot-command is ONE element.
HELM_DEFAULT = [
    "--ds-name=kured", "--ds-namespace=kube-system", "--metrics-port=8080",
    "--reboot-sentinel=/sentinel/reboot-required", "--reboot-command=/bin/systemctl reboot",
    "--log-format=text", "--concurrency=1",
]  # fmt: skip


def test_helm_default_render() -> None:
    cfg = parse(HELM_DEFAULT, NODE)
    assert cfg.reboot_sentinel == "/sentinel/reboot-required"
    assert cfg.reboot_command == "/bin/systemctl reboot"
    assert cfg.reboot_command_argv == ("/bin/systemctl", "reboot")
    expected = dataclasses.replace(Config(node_id="node-1", reboot_sentinel="/sentinel/reboot-required"))
    assert cfg == expected
    assert cfg.warnings == ()


# Every configuration.* value set, each rendered as the chart renders it (one `--key=value` per list item,
# `--force-reboot` bare, booleans as `=true`), plus extraArgs in sorted key order.
HELM_FULL: list[tuple[str, str, Any]] = [
    ("--metrics-host=0.0.0.0", "metrics_host", "0.0.0.0"),
    ("--metrics-port=9100", "metrics_port", 9100),
    ("--lock-ttl=30m", "lock_ttl", D("30m")),
    ("--lock-release-delay=5m", "lock_release_delay", D("5m")),
    ("--alert-filter-regexp=^(RebootRequired|Watchdog)$", "alert_filter_regexp", "^(RebootRequired|Watchdog)$"),
    ("--alert-firing-only=true", "alert_firing_only", True),
    ("--alert-filter-match-only=true", "alert_filter_match_only", True),
    ("--blocking-pod-selector=runtime=long,cost=expensive", "blocking_pod_selector",
     ("runtime=long,cost=expensive", "name=temperamental")),
    ("--blocking-pod-selector=name=temperamental", "blocking_pod_selector",
     ("runtime=long,cost=expensive", "name=temperamental")),
    ("--end-time=5am", "end_time", "5am"),
    ("--lock-annotation=weave.works/kured-node-lock", "lock_annotation", "weave.works/kured-node-lock"),
    ("--period=1h", "period", D("1h")),
    ("--force-reboot", "force_reboot", True),
    ("--drain-grace-period=60", "drain_grace_period", 60),
    ("--drain-pod-selector=app=web", "drain_pod_selector", "app=web"),
    ("--drain-delay=30s", "drain_delay", D("30s")),
    ("--drain-timeout=10m", "drain_timeout", D("10m")),
    ("--skip-wait-for-delete-timeout=300", "skip_wait_for_delete_timeout", 300),
    ("--prometheus-url=http://prometheus.monitoring:9090", "prometheus_url", "http://prometheus.monitoring:9090"),
    ("--reboot-days=mon", "reboot_days", ("mon", "tue")),
    ("--reboot-days=tue", "reboot_days", ("mon", "tue")),
    ("--pre-reboot-node-labels=kured=rebooting", "pre_reboot_node_labels", ("kured=rebooting",)),
    ("--post-reboot-node-labels=kured=done", "post_reboot_node_labels", ("kured=done",)),
    ("--reboot-sentinel=/var/run/reboot-required", "reboot_sentinel", "/var/run/reboot-required"),
    ("--reboot-sentinel-command=sh -c \"! needs-restarting --reboothint\"", "reboot_sentinel_command_argv",
     ("sh", "-c", "! needs-restarting --reboothint")),
    ("--reboot-command=/usr/bin/systemctl reboot --no-wall", "reboot_command_argv",
     ("/usr/bin/systemctl", "reboot", "--no-wall")),
    ("--reboot-delay=90s", "reboot_delay", D("90s")),
    ("--reboot-method=signal", "reboot_method", "signal"),
    ("--reboot-signal=39", "reboot_signal", 39),
    ("--slack-channel=alerting", "slack_channel", "alerting"),
    ("--slack-hook-url=https://hooks.slack.com/services/T0/B0/XX", "slack_hook_url",
     "https://hooks.slack.com/services/T0/B0/XX"),
    ("--slack-username=kured-bot", "slack_username", "kured-bot"),
    ("--notify-url=smtp://u:p@smtp.example.com:587/?from=k@example.com&to=ops@example.com", "effective_notify_url",
     "smtp://u:p@smtp.example.com:587/?from=k@example.com&to=ops@example.com"),
    ("--message-template-drain=Draining node %s", "message_template_drain", "Draining node %s"),
    ("--message-template-reboot=Rebooting node %s", "message_template_reboot", "Rebooting node %s"),
    ("--message-template-uncordon=Node %s is back", "message_template_uncordon", "Node %s is back"),
    ("--start-time=9pm", "start_time", "9pm"),
    ("--time-zone=Europe/Paris", "time_zone", "Europe/Paris"),
    ("--annotate-nodes=true", "annotate_nodes", True),
    ("--prefer-no-schedule-taint=weave.works/kured-node-reboot", "prefer_no_schedule_taint",
     "weave.works/kured-node-reboot"),
    ("--log-format=json", "log_format", "json"),
    ("--concurrency=2", "concurrency", 2),
    ("--lock-backend=lease", "lock_backend", "lease"),  # extraArgs: {lock-backend: lease}
]  # fmt: skip


@pytest.mark.parametrize(
    ("arg", "field", "expected"), HELM_FULL, ids=[row[0].split("=")[0] for row in HELM_FULL]
)
def test_helm_render_with_every_value(arg: str, field: str, expected: Any) -> None:
    argv = ["--ds-name=kured", "--ds-namespace=kube-system", *(row[0] for row in HELM_FULL)]
    cfg = parse(argv, NODE)
    assert arg in argv
    assert getattr(cfg, field) == expected


def test_config_file_sits_between_defaults_and_the_command_line(tmp_path: Path) -> None:
    path = tmp_path / "kured.conf"
    path.write_text(
        "# pykured config\nperiod = 5m\nreboot-days = [mo, tu]\nforce-reboot = true\nds-name: from-file\n"
        "concurrency = 0x3\n"
    )
    cfg = parse([f"--config={path}", "--ds-name=from-cli"], {**NODE, "KURED_CONCURRENCY": "4"})
    assert cfg.period == D("5m")
    assert cfg.reboot_days == ("mo", "tu")
    assert cfg.force_reboot is True
    assert cfg.ds_name == "from-cli"
    assert cfg.concurrency == 4
    assert cfg.config == str(path)


def test_config_file_slice_is_replaced_by_the_command_line(tmp_path: Path) -> None:
    path = tmp_path / "kured.conf"
    path.write_text("reboot-days = [mo, tu]\n")
    assert parse([f"--config={path}", "--reboot-days=fr"], NODE).reboot_days == ("fr",)


def test_config_file_from_kured_config_env(tmp_path: Path) -> None:
    path = tmp_path / "kured.conf"
    path.write_text("period = 7m\n")
    cfg = parse(["--config=/nonexistent"], {**NODE, "KURED_CONFIG": str(path)})
    assert cfg.period == D("7m")
    assert cfg.config == str(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("bogus = 1\n", "unrecognized arguments: --bogus=1"),
        ("period = 5\n", 'invalid argument "5" for "--period" flag: time: missing unit in duration "5"'),
        ("force-reboot = yes\n", 'invalid argument "yes" for "--force-reboot" flag'),
    ],
    ids=["unknown-key", "bad-duration", "bad-bool"],
)
def test_config_file_errors(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "kured.conf"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        parse([f"--config={path}"], NODE)
    assert str(err.value).startswith(message)
    assert err.value.exit_code == 2


def test_missing_config_file() -> None:
    with pytest.raises(ConfigError, match=r"Unable to open config file: /nonexistent/kured\.conf"):
        parse(["--config=/nonexistent/kured.conf"], NODE)


def test_to_public_dict_is_json_with_go_durations_and_redacted_secrets() -> None:
    cfg = parse(
        [
            "--notify-url=smtp://user:secret@mail.example.com:587/?from=a@example.com&to=b@example.com",
            "--slack-hook-url=https://hooks.slack.com/services/T0/B0/XXSECRET",
            "--extra-notify-url=telegram://123:TOKEN@telegram?chats=@ops",
            "--prometheus-url=http://admin:pw@prom:9090/prometheus",
            "--alertmanager-url=https://ops:am-pw@am.example:9093/am",
            "--lock-ttl=30m",
        ],
        NODE,
    )
    public = json.loads(json.dumps(cfg.to_public_dict()))
    assert list(public) == [spec.name for spec in FLAGS]
    assert public["lock-ttl"] == "30m0s"
    assert public["period"] == "1h0m0s"
    assert public["reboot-days"] == ["su", "mo", "tu", "we", "th", "fr", "sa"]
    assert public["alert-filter-regexp"] is None
    assert public["notify-url"] == "smtp://REDACTED@mail.example.com:587/?from=REDACTED&to=REDACTED"
    assert public["slack-hook-url"] == "https://hooks.slack.com/REDACTED/REDACTED/REDACTED/REDACTED"
    assert public["extra-notify-url"] == ["telegram://REDACTED@telegram?chats=REDACTED"]
    assert public["prometheus-url"] == "http://admin:REDACTED@prom:9090/prometheus"
    assert public["alertmanager-url"] == "https://ops:REDACTED@am.example:9093/am"
    text = json.dumps(public)
    for secret in ("secret", "XXSECRET", "TOKEN", ":pw@", "am-pw"):
        assert secret not in text


def test_to_public_dict_kinds() -> None:
    public = Config().to_public_dict()
    for spec in FLAGS:
        value = public[spec.name]
        if spec.kind is Kind.DURATION:
            assert isinstance(value, str)
            assert Duration.parse(value) == getattr(Config(), spec.field)
        elif spec.kind in (Kind.STRING_SLICE, Kind.STRING_ARRAY):
            assert isinstance(value, list)


# -- maintenance policy extensions ---------------------------------------------------------------------------


def test_calendar_windows_and_blackouts_build_the_maintenance_policy() -> None:
    cfg = parse(
        [
            "--node-id=n",
            "--time-zone=Europe/Berlin",
            "--maintenance-window=FREQ=MONTHLY;BYDAY=+2TU;BYHOUR=1;DURATION=4h",
            "--blackout=2026-03-10T02:00/2026-03-10T03:00 release",
        ],
        {"KURED_MAINTENANCE_WINDOW": "RDATE=20261205T010000;DURATION=1h"},
    )
    assert len(cfg.maintenance.windows) == 2  # kured's default window steps aside
    berlin = cfg.time_window.location
    assert cfg.maintenance.contains(datetime.datetime(2026, 3, 10, 1, 30, tzinfo=berlin))
    assert not cfg.maintenance.contains(datetime.datetime(2026, 3, 10, 2, 30, tzinfo=berlin))
    assert cfg.maintenance.contains(datetime.datetime(2026, 12, 5, 1, 30, tzinfo=berlin))
    assert cfg.to_public_dict()["maintenance-window"] == [
        "FREQ=MONTHLY;BYDAY=+2TU;BYHOUR=1;DURATION=4h",
        "RDATE=20261205T010000;DURATION=1h",
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--maintenance-window=FREQ=MONTHLY;BYDAY=XX;DURATION=1h"],
            "invalid --maintenance-window 'FREQ=MONTHLY;BYDAY=XX;DURATION=1h': invalid RRULE",
        ),
        (["--maintenance-window=FREQ=DAILY"], "DURATION is required"),
        (["--blackout=next week"], "--blackout: invalid blackout 'next week'"),
        (
            ["--concurrency-label=topology.kubernetes.io/zone"],
            "--concurrency-label needs --lock-backend=lease",
        ),
        (["--lock-backend=lease", "--concurrency-label=z", "--concurrency-per-label=0"], "must be >= 1"),
        (["--resume-rolls"], "--resume-rolls needs --lock-backend=lease"),
        (["--settle-prometheus-query=up"], "--settle-prometheus-query needs --prometheus-url"),
        (["--blocking-node-label="], "invalid --blocking-node-label '': empty key"),
        (["--blocking-node-label==yes"], "invalid --blocking-node-label '=yes': empty key"),
        (
            ["--blocking-node-label=bad key"],
            "invalid --blocking-node-label 'bad key': name 'bad key' must be",
        ),
        (["--blocking-node-label=Ex.com/hold"], "prefix 'Ex.com' is not a DNS subdomain"),
        (["--blocking-node-label=/hold"], "invalid --blocking-node-label '/hold': empty prefix"),
        (["--blocking-node-label=hold=a b"], "label value 'a b' is not a valid label value"),
        (["--blocking-node-annotation=-hold"], "invalid --blocking-node-annotation '-hold': name '-hold'"),
        (["--blocking-node-annotation=" + "x" * 64], "must be at most 63"),
        (['--silence-during-reboot=node="{{.Node}}"'], "--silence-during-reboot needs --alertmanager-url"),
        (
            [
                "--alertmanager-url=http://am:9093",
                '--silence-during-reboot=node="{{.Node}}"',
                "--silence-max=0s",
            ],
            "invalid --silence-max 0s: must be > 0",
        ),
        (
            [
                "--alertmanager-url=http://am:9093",
                '--silence-during-reboot=node="{{.Node}}"',
                "--silence-max=720h",
            ],
            "invalid --silence-max 720h0m0s: at most 24h0m0s",
        ),
        (
            ["--alertmanager-url=http://am:9093", '--silence-during-reboot=severity="critical"'],
            "invalid --silence-during-reboot 'severity=\"critical\"': no matcher names the node",
        ),
        (
            ["--alertmanager-url=http://am:9093", '--silence-during-reboot=instance=~"{{.Node}}.*"'],
            "{{.Node}} next to .* or .+ also matches other nodes' names",
        ),
        (
            ["--alertmanager-url=http://am:9093", "--silence-during-reboot=node=={{.Node}}"],
            "invalid --silence-during-reboot 'node=={{.Node}}'",
        ),
        (
            ["--alertmanager-url=http://am:9093", '--silence-during-reboot=node="{{.Host}}"'],
            "unknown template '{{.Host}}'",
        ),
    ],
)
def test_bad_policy_input_is_one_line_exit_1(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)) as info:
        parse(["--node-id=n", *argv], {})
    assert info.value.exit_code == 1 and "\n" not in str(info.value)


def test_blocking_node_marks_from_flags_and_env() -> None:
    """Repeatable flags (``key`` or ``key=value``); the env var is split on whitespace; an annotation's value
    may be any text."""
    argv = ["--node-id=n", "--blocking-node-label=example.com/hold", "--blocking-node-label=tier=db"]
    cfg = parse(argv, {"KURED_BLOCKING_NODE_ANNOTATION": "example.com/why=disk swap"})
    assert cfg.blocking_node_labels == (NodeMark("example.com/hold"), NodeMark("tier", "db"))
    assert cfg.blocking_node_annotation == ("example.com/why=disk", "swap")
    assert cfg.blocking_node_annotations == (NodeMark("example.com/why", "disk"), NodeMark("swap"))
    cfg = parse(["--node-id=n"], {"KURED_BLOCKING_NODE_LABEL": "a b=c"})
    assert cfg.blocking_node_labels == (NodeMark("a"), NodeMark("b", "c"))
    cfg = parse(["--node-id=n", "--blocking-node-annotation=example.com/why=disk swap, soon"], {})
    assert cfg.blocking_node_annotations == (NodeMark("example.com/why", "disk swap, soon"),)
    assert parse(["--node-id=n"], {}).blocking_node_labels == ()


def test_concurrency_label_with_the_lease_backend() -> None:
    cfg = parse(
        ["--node-id=n", "--lock-backend=lease", "--concurrency-label=topology.kubernetes.io/zone"], {}
    )
    assert cfg.concurrency_label == "topology.kubernetes.io/zone" and cfg.concurrency_per_label == 1


def test_resume_rolls_from_the_flag_or_kured_resume_rolls() -> None:
    assert parse(["--node-id=n", "--lock-backend=lease", "--resume-rolls"], {}).resume_rolls
    env = {"KURED_LOCK_BACKEND": "lease", "KURED_RESUME_ROLLS": "true"}
    assert parse(["--node-id=n"], env).resume_rolls
    assert not parse(["--node-id=n", "--lock-backend=lease"], {}).resume_rolls


# -- budgets (--max-unavailable, --concurrency-per-label) ----------------------------------------------------


@pytest.mark.parametrize(
    ("flag", "text", "value"),
    [("max-unavailable", "3", 3), ("max-unavailable", "25%", "25%"), ("max-unavailable", "100%", "100%"),
     ("max-unavailable", "", ""), ("concurrency-per-label", "50%", "50%"), ("concurrency-per-label", "2", 2)],
)  # fmt: skip
def test_budgets_are_int_or_percent(flag: str, text: str, value: int | str) -> None:
    """Kubernetes' IntOrString: an int stays an int (dump-config prints 3), a percentage its text."""
    field = flag.replace("-", "_")
    for cfg in (parse([f"--{flag}={text}"], NODE), parse([], {**NODE, f"KURED_{field.upper()}": text})):
        assert getattr(cfg, field) == value
        assert cfg.to_public_dict()[flag] == value


def test_budget_values_as_budgets() -> None:
    cfg = parse(["--max-unavailable=25%", "--concurrency-per-label=2"], NODE)
    assert str(cfg.max_unavailable_budget) == "25%" and cfg.max_unavailable_budget.percent  # type: ignore[union-attr]
    assert str(cfg.concurrency_per_label_budget) == "2" and not cfg.concurrency_per_label_budget.percent
    assert parse([], NODE).max_unavailable_budget is None


@pytest.mark.parametrize(
    ("text", "why"),
    [("0%", "a percentage must be from 1% to 100%"), ("101%", "a percentage must be from 1% to 100%"),
     ("x%", "want a number of nodes"), ("2.5%", "want a number of nodes"), ("lots", "want a number of nodes"),
     ("2.5", "want a number of nodes"), (" 3", "want a number of nodes")],
)  # fmt: skip
@pytest.mark.parametrize("flag", ["max-unavailable", "concurrency-per-label"])
def test_a_budget_that_is_no_int_or_percent_exits_2_like_pflag(flag: str, text: str, why: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse([f"--{flag}={text}"], NODE)
    assert err.value.exit_code == 2 and "\n" not in str(err.value)
    assert str(err.value).startswith(f'invalid argument "{text}" for "--{flag}" flag: ') and why in str(
        err.value
    )


@pytest.mark.parametrize(
    ("flag", "text", "message"),
    [("max-unavailable", "0", "invalid --max-unavailable 0: must be >= 1, or a percentage (1% to 100%)"),
     ("max-unavailable", "-2", "invalid --max-unavailable -2: must be >= 1"),
     ("max-unavailable", "100001", "invalid --max-unavailable 100001: a number of nodes must be from 1 to 100000"),
     ("concurrency-per-label", "0", "invalid --concurrency-per-label 0: must be >= 1")],
)  # fmt: skip
def test_a_budget_out_of_range_exits_1(flag: str, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse([f"--{flag}={text}"], NODE)
    assert err.value.exit_code == 1 and str(err.value).startswith(message)


@pytest.mark.parametrize("text", ["lots", "0%", "150%", "2.5"])
def test_a_bad_budget_in_the_environment_exits_1_as_kureds_env_loader(text: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse([], {**NODE, "KURED_MAX_UNAVAILABLE": text})
    assert err.value.exit_code == 1
    assert str(err.value).startswith("Invalid value for env var named KURED_MAX_UNAVAILABLE: want a number")


def test_max_unavailable_start_up_line() -> None:
    lines = [m for _, m in lock_records(parse(["--max-unavailable=25%", "--concurrency=4"], NODE))]
    assert (
        "Max unavailable: 25% of the nodes of DaemonSet kube-system/kured (with --concurrency 4: the lower wins)"
        in lines
    )
    lines = [m for _, m in lock_records(parse(["--max-unavailable=2"], NODE))]
    assert "Max unavailable: 2 nodes (with --concurrency 1: the lower wins)" in lines
    assert not any(m.startswith("Max unavailable") for _, m in lock_records(parse([], NODE)))


def test_a_silence_during_reboot() -> None:
    cfg = parse(
        [
            "--node-id=n",
            "--alertmanager-url=http://am:9093",
            '--silence-during-reboot=node="{{.Node}}",a!~"b"',
        ],
        {},
    )
    assert cfg.silence_during_reboot == 'node="{{.Node}}",a!~"b"'
    assert cfg.silence_max == D("2h")
    argv = ["--node-id=n", "--alertmanager-url=http://am:9093", '--silence-during-reboot=node="{{.Node}}"']
    assert parse([*argv, "--silence-max=24h"], {}).silence_max == D("24h")  # the ceiling itself
    assert parse(argv, {"KURED_SILENCE_MAX": "1h30m"}).silence_max == D("1h30m")  # Go's duration syntax
