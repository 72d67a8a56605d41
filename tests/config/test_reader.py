"""pflag command-line grammar and kured's LoadFromEnv (spf13/pflag and kured's ``LoadFromEnv``), via
read_flags."""

from __future__ import annotations

from typing import Any

import pytest

from pykured.config.reader import HelpRequested, read_flags
from pykured.core.errors import ConfigError
from pykured.gocompat.goflags import Duration

H = Duration.parse("1h")

CLI_CASES: list[tuple[str, list[str], str, Any]] = [
    ("bool-bare", ["--force-reboot"], "force-reboot", True),
    ("bool-equals-true", ["--force-reboot=true"], "force-reboot", True),
    ("bool-equals-false", ["--force-reboot=false"], "force-reboot", False),
    ("bool-equals-T", ["--force-reboot=T"], "force-reboot", True),
    ("bool-never-takes-next-arg", ["--force-reboot", "false"], "force-reboot", True),
    ("bool-last-wins", ["--force-reboot", "--force-reboot=0"], "force-reboot", False),
    ("string-equals", ["--node-id=n1"], "node-id", "n1"),
    ("string-space", ["--node-id", "n1"], "node-id", "n1"),
    ("string-takes-dash-value", ["--node-id", "--force-reboot"], "node-id", "--force-reboot"),
    ("string-empty", ["--ds-name="], "ds-name", ""),
    ("string-keeps-equals", ["--notify-url=smtp://h/?a=b"], "notify-url", "smtp://h/?a=b"),
    ("string-keeps-spaces", ["--reboot-command=/bin/systemctl reboot"],
     "reboot-command", "/bin/systemctl reboot"),
    ("string-last-wins", ["--ds-name=a", "--ds-name", "b"], "ds-name", "b"),
    ("int-hex", ["--metrics-port=0x1F90"], "metrics-port", 8080),
    ("int-octal", ["--metrics-port=017620"], "metrics-port", 8080),
    ("int-underscore", ["--metrics-port=8_080"], "metrics-port", 8080),
    ("int-negative-space", ["--drain-grace-period", "-5"], "drain-grace-period", -5),
    ("duration", ["--period=30m"], "period", Duration.parse("30m")),
    ("duration-space", ["--period", "1h30m"], "period", Duration.parse("1h30m")),
    ("duration-negative", ["--lock-ttl=-1h"], "lock-ttl", Duration.parse("-1h")),
    ("slice-csv", ["--reboot-days=mon,tue"], "reboot-days", ["mon", "tue"]),
    ("slice-repeat-appends", ["--reboot-days=mon", "--reboot-days=tue,wed"],
     "reboot-days", ["mon", "tue", "wed"]),
    ("slice-leading-space", ["--reboot-days=mon, tue"], "reboot-days", ["mon", " tue"]),
    ("slice-quoted", ['--reboot-days=a,"b,c"'], "reboot-days", ["a", "b,c"]),
    ("slice-empty", ["--reboot-days="], "reboot-days", []),
    ("slice-first-line", ["--reboot-days=a,b\nc,d"], "reboot-days", ["a", "b"]),
    ("array-no-split", ["--blocking-pod-selector=a=b,c=d", "--blocking-pod-selector", "e=f"],
     "blocking-pod-selector", ["a=b,c=d", "e=f"]),
    ("array-empty-element", ["--blocking-pod-selector="], "blocking-pod-selector", [""]),
    ("regexp", ["--alert-filter-regexp=^RebootRequired$"], "alert-filter-regexp", "^RebootRequired$"),
    ("regexp-empty", ["--alert-filter-regexp="], "alert-filter-regexp", ""),
    ("double-dash-ends-flags", ["--", "--force-reboot"], "force-reboot", False),
    ("positional-anywhere", ["junk", "--node-id=n", "more"], "node-id", "n"),
    ("go-test-flags-ignored", ["-test.v", "-test.run=x", "--node-id=n"], "node-id", "n"),
    ("single-dash-is-positional", ["-", "--node-id=n"], "node-id", "n"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "flag", "expected"), [c[1:] for c in CLI_CASES], ids=[c[0] for c in CLI_CASES]
)
def test_command_line_grammar(argv: list[str], flag: str, expected: Any) -> None:
    assert read_flags(argv, {}).values[flag] == expected


ERROR_CASES = [
    ("unknown-flag", ["--x"], "unknown flag: --x"),
    ("unknown-flag-with-value", ["--x=1"], "unknown flag: --x"),
    ("no-abbreviation", ["--force"], "unknown flag: --force"),
    ("no-underscores", ["--force_reboot"], "unknown flag: --force_reboot"),
    ("no-shorthands", ["-x"], "unknown shorthand flag: 'x' in -x"),
    ("single-dash-long-name", ["-force-reboot"], "unknown shorthand flag: 'f' in -force-reboot"),
    ("bad-syntax-triple-dash", ["---x"], "bad flag syntax: ---x"),
    ("bad-syntax-equals", ["--=x"], "bad flag syntax: --=x"),
    ("needs-argument", ["--period"], "flag needs an argument: --period"),
    ("needs-argument-string", ["--node-id=n", "--ds-name"], "flag needs an argument: --ds-name"),
    ("bool-yes", ["--force-reboot=yes"],
     'invalid argument "yes" for "--force-reboot" flag: strconv.ParseBool: parsing "yes": invalid syntax'),
    ("bool-empty", ["--force-reboot="],
     'invalid argument "" for "--force-reboot" flag: strconv.ParseBool: parsing "": invalid syntax'),
    ("int-float", ["--metrics-port=80.0"],
     'invalid argument "80.0" for "--metrics-port" flag: strconv.ParseInt: parsing "80.0": invalid syntax'),
    ("int-range", ["--concurrency=9223372036854775808"],
     'invalid argument "9223372036854775808" for "--concurrency" flag: '
     'strconv.ParseInt: parsing "9223372036854775808": value out of range'),
    ("duration-no-unit", ["--period=5"],
     'invalid argument "5" for "--period" flag: time: missing unit in duration "5"'),
    ("duration-empty", ["--period="], 'invalid argument "" for "--period" flag: time: invalid duration ""'),
    ("duration-days", ["--lock-ttl=1d"],
     'invalid argument "1d" for "--lock-ttl" flag: time: unknown unit "d" in duration "1d"'),
    ("duration-takes-next-flag", ["--period", "--force-reboot"],
     'invalid argument "--force-reboot" for "--period" flag: time: invalid duration "--force-reboot"'),
    ("slice-bare-quote", ['--reboot-days=a"b'],
     'invalid argument "a\\"b" for "--reboot-days" flag: '
     'parse error on line 1, column 2: bare " in non-quoted-field'),
    ("regexp", ["--alert-filter-regexp=(?=x)"],
     'invalid argument "(?=x)" for "--alert-filter-regexp" flag: '
     "error parsing regexp: invalid or unsupported Perl syntax: `(?=`"),
    ("first-error-in-argv-order", ["--period=5", "--x"],
     'invalid argument "5" for "--period" flag: time: missing unit in duration "5"'),
]  # fmt: skip


@pytest.mark.parametrize(("argv", "message"), [c[1:] for c in ERROR_CASES], ids=[c[0] for c in ERROR_CASES])
def test_command_line_errors_are_pflag_text_with_exit_code_2(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        read_flags(argv, {})
    assert str(err.value) == message
    assert err.value.exit_code == 2


@pytest.mark.parametrize(
    "argv",
    [["-h"], ["--help"], ["--help=1"], ["-hx"], ["--node-id=n", "-h", "--x"]],
    ids=["-h", "--help", "--help=1", "-hx", "before-later-errors"],
)
def test_help_exits_0_with_usage(argv: list[str]) -> None:
    with pytest.raises(HelpRequested) as err:
        read_flags(argv, {})
    assert err.value.exit_code == 0
    assert str(err.value).startswith("Usage of kured:\n")


def test_help_after_an_error_is_not_reached() -> None:
    with pytest.raises(ConfigError) as err:
        read_flags(["--x", "-h"], {})
    assert err.value.exit_code == 2


def test_positional_arguments_are_reported_as_a_warning() -> None:
    flags = read_flags(["--force-reboot", "false", "--", "--x"], {})
    assert flags.warnings == ["Ignoring positional arguments: [false --x]"]


ENV_CASES: list[tuple[str, list[str], dict[str, str], str, Any]] = [
    ("env-overrides-cli-scalar", ["--period=30m"], {"KURED_PERIOD": "2h"}, "period", Duration.parse("2h")),
    ("env-sets-string", [], {"KURED_NODE_ID": "node-1"}, "node-id", "node-1"),
    ("env-empty-string-overrides", ["--node-id=n"], {"KURED_NODE_ID": ""}, "node-id", ""),
    ("env-bool-T", [], {"KURED_FORCE_REBOOT": "T"}, "force-reboot", True),
    ("env-bool-overrides-cli", ["--force-reboot"], {"KURED_FORCE_REBOOT": "0"}, "force-reboot", False),
    ("env-int-atoi-leading-zero-is-decimal", [], {"KURED_METRICS_PORT": "017620"}, "metrics-port", 17620),
    ("cli-int-leading-zero-is-octal", ["--metrics-port=017620"], {}, "metrics-port", 8080),
    ("env-int-signed", [], {"KURED_DRAIN_GRACE_PERIOD": "+30"}, "drain-grace-period", 30),
    ("env-slice-appends-to-cli", ["--reboot-days=mo"], {"KURED_REBOOT_DAYS": "sa"},
     "reboot-days", ["mo", "sa"]),
    ("env-slice-replaces-default", [], {"KURED_REBOOT_DAYS": "sa,su"}, "reboot-days", ["sa", "su"]),
    ("env-slice-empty-replaces-default", [], {"KURED_REBOOT_DAYS": ""}, "reboot-days", []),
    ("env-regexp", [], {"KURED_ALERT_FILTER_REGEXP": "^X$"}, "alert-filter-regexp", "^X$"),
    ("env-blocking-pod-selector-ignored", ["--blocking-pod-selector=a=b"],
     {"KURED_BLOCKING_POD_SELECTOR": "c=d"}, "blocking-pod-selector", ["a=b"]),
    ("env-extra-notify-url-whitespace-split", ["--extra-notify-url=a://x"],
     {"KURED_EXTRA_NOTIFY_URL": "b://y\nc://z"}, "extra-notify-url", ["a://x", "b://y", "c://z"]),
    ("service-link-int-ignored", ["--metrics-port=9090"],
     {"KURED_METRICS_PORT": "tcp://10.0.0.7:8080"}, "metrics-port", 9090),
    ("service-link-duration-ignored", [], {"KURED_DRAIN_TIMEOUT": "udp://10.0.0.7:53"},
     "drain-timeout", Duration(0)),
    ("service-link-bool-ignored", [], {"KURED_EVENTS": "sctp://10.0.0.7:1"}, "events", True),
    ("service-link-string-kept", [], {"KURED_METRICS_HOST": "tcp://10.0.0.7:8080"},
     "metrics-host", "tcp://10.0.0.7:8080"),
    ("unrelated-env-ignored", [], {"KUBECONFIG": "/x", "KURED": "1", "kured_period": "5m"}, "period", H),
]  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "env", "flag", "expected"), [c[1:] for c in ENV_CASES], ids=[c[0] for c in ENV_CASES]
)
def test_environment(argv: list[str], env: dict[str, str], flag: str, expected: Any) -> None:
    assert read_flags(argv, env).values[flag] == expected


@pytest.mark.parametrize(
    ("env", "warning"),
    [
        ({"KURED_METRICS_PORT": "tcp://10.0.0.7:8080"},
         "Ignoring KURED_METRICS_PORT=tcp://10.0.0.7:8080: it looks like a Kubernetes service link variable "
         "(set enableServiceLinks: false), not a pykured setting"),
    ],
    ids=["service-link"],
)  # fmt: skip
def test_environment_warnings(env: dict[str, str], warning: str) -> None:
    assert read_flags([], env).warnings == [warning]


def test_blocking_pod_selector_env_is_printed_as_kured_prints_it() -> None:
    """kured's LoadFromEnv prints this with fmt.Printf (stdout, no log format) and goes on."""
    flags = read_flags([], {"KURED_BLOCKING_POD_SELECTOR": "a=b"})
    assert flags.printed == ["Unsupported flag type for blocking-pod-selector"]
    assert flags.warnings == []
    assert flags.values["blocking-pod-selector"] == []


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"KURED_FORCE_REBOOT": "yes"}, "Invalid value for KURED_FORCE_REBOOT: yes"),
        ({"KURED_FORCE_REBOOT": ""}, "Invalid value for KURED_FORCE_REBOOT: "),
        ({"KURED_METRICS_PORT": "0x1F90"}, "Invalid value for env var named KURED_METRICS_PORT"),
        ({"KURED_METRICS_PORT": "8_080"}, "Invalid value for env var named KURED_METRICS_PORT"),
        ({"KURED_METRICS_PORT": ""}, "Invalid value for env var named KURED_METRICS_PORT"),
        ({"KURED_METRICS_PORT": "http://10.0.0.7:80"}, "Invalid value for env var named KURED_METRICS_PORT"),
        ({"KURED_PERIOD": "5"}, "Invalid duration for KURED_PERIOD: 5"),
        ({"KURED_PERIOD": ""}, "Invalid duration for KURED_PERIOD: "),
        ({"KURED_REBOOT_DAYS": 'a"b'}, 'cannot set flag reboot-days from env{KURED_REBOOT_DAYS}: a"b'),
        ({"KURED_ALERT_FILTER_REGEXP": "(?!x)"},
         "cannot set flag alert-filter-regexp from env{KURED_ALERT_FILTER_REGEXP}: (?!x)"),
    ],
    ids=lambda v: f"{next(iter(v))}={next(iter(v.values()))!r}" if isinstance(v, dict) else "",
)  # fmt: skip
def test_environment_errors_exit_1(env: dict[str, str], message: str) -> None:
    """kured's LoadFromEnv words each flag type's error differently (checked against kured's binary)."""
    with pytest.raises(ConfigError) as err:
        read_flags([], env)
    assert str(err.value) == message
    assert err.value.exit_code == 1


def test_environment_is_visited_in_sorted_flag_order() -> None:
    with pytest.raises(ConfigError, match="KURED_CONCURRENCY"):
        read_flags([], {"KURED_PERIOD": "x", "KURED_CONCURRENCY": "x"})


def test_command_line_errors_come_before_environment_errors() -> None:
    with pytest.raises(ConfigError) as err:
        read_flags(["--x"], {"KURED_PERIOD": "x"})
    assert err.value.exit_code == 2
