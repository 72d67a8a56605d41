"""kured's stripQuotes / validateNotificationURL (main_test.go tables), labels and the Local zone."""

from __future__ import annotations

import datetime
import zoneinfo

import pytest

from pykured.config.checks import local_zone, parse_labels, resolve_notify_url, strip_quotes
from pykured.core.errors import ConfigError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("unchanged", "unchanged"),
        ('"quoted"', "quoted"),
        ("'quoted'", "quoted"),
        ("\"unbalanced'", "\"unbalanced'"),
        ('"', '"'),
        ("", ""),
        ('""', '""'),
        ('"a"', "a"),
    ],
    ids=["unchanged", "double", "single", "unbalanced", "length-1", "length-0", "length-2", "length-3"],
)
def test_strip_quotes(text: str, expected: str) -> None:
    assert strip_quotes(text) == expected


TEAMS = "teams://79b4XXXX@0a20XXXX/204cXXXX/3e6eXXXX"
NOTIFY_CASES = [
    ("slack-only", "", "https://hooks.slack.com/services/BLABLABA12345/IAM931A0VERY/COMPLICATED711854TOKEN1SET",
     "slack://BLABLABA12345/IAM931A0VERY/COMPLICATED711854TOKEN1SET"),
    ("slack-and-notify", "slack://x/y/z", "https://hooks.slack.com/services/A/B/C", "slack://x/y/z"),
    ("slack-double-quotes", "", '"https://hooks.slack.com/services/A/B/C"', "slack://A/B/C"),
    ("slack-single-quotes", "", "'https://hooks.slack.com/services/A/B/C'", "slack://A/B/C"),
    ("teams-double-quotes", f'"{TEAMS}"', "", TEAMS),
    ("teams-single-quotes", f"'{TEAMS}'", "", TEAMS),
]  # fmt: skip


@pytest.mark.parametrize(
    ("notify", "slack", "expected"), [c[1:] for c in NOTIFY_CASES], ids=[c[0] for c in NOTIFY_CASES]
)
def test_resolve_notify_url(notify: str, slack: str, expected: str) -> None:
    assert resolve_notify_url(notify, slack)[0] == expected


@pytest.mark.parametrize(
    ("slack", "error"),
    [
        ("https://hooks.slack.com/services/A/B", "unexpected number of / in URL"),
        ("https://hooks.slack.com/services/A/B/C/D", "unexpected number of / in URL"),
        ("https://hooks.slack.com/services/A/%zz/C",
         'parse "https://hooks.slack.com/services/A/%zz/C": invalid URL escape "%zz"'),
        ("https://hooks slack.com/services/A/B/C",
         'parse "https://hooks slack.com/services/A/B/C": invalid character " " in host name'),
        ("https://hooks.slack.com:x/services/A/B/C",
         'parse "https://hooks.slack.com:x/services/A/B/C": invalid port ":x" after host'),
        ("https://hooks.slack.com/services/A\x01/B/C",
         'parse "https://hooks.slack.com/services/A\\x01/B/C": net/url: invalid control character in URL'),
    ],
    ids=["too-few", "too-many", "bad-escape", "host-character", "port", "control-character"],
)  # fmt: skip
def test_bad_slack_hook_gives_no_url_and_an_error(slack: str, error: str) -> None:
    """kured's text (Go url.Parse's error), with the newline kured's Errorf format ends with."""
    url, warnings = resolve_notify_url("", slack)
    assert url == ""
    assert (
        warnings[-1] == f"slack-hook-url is not properly formatted... no notification will be sent: {error}\n"
    )


def test_no_url() -> None:
    assert resolve_notify_url("", "") == ("", [])


@pytest.mark.parametrize("label", ["novalue", ""], ids=["no-equals", "empty"])
def test_label_without_equals_is_an_error(label: str) -> None:
    with pytest.raises(ConfigError, match="expected key=value") as err:
        parse_labels([label], flag="pre-reboot-node-labels")
    assert err.value.exit_code == 1


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"TZ": ""}, datetime.UTC),
        ({"TZ": "UTC"}, datetime.UTC),
        ({"TZ": "Europe/Berlin"}, zoneinfo.ZoneInfo("Europe/Berlin")),
        ({"TZ": ":Asia/Tokyo"}, zoneinfo.ZoneInfo("Asia/Tokyo")),
        ({"TZ": "Nowhere/Land"}, datetime.UTC),
        ({"TZ": "/nonexistent/zone"}, datetime.UTC),
    ],
    ids=["empty", "utc", "iana", "colon-prefix", "unknown-falls-back", "missing-file-falls-back"],
)
def test_local_zone(env: dict[str, str], expected: datetime.tzinfo) -> None:
    assert local_zone(env) == expected


def test_local_zone_without_tz_reads_etc_localtime_or_falls_back() -> None:
    zone = local_zone({})
    moment = datetime.datetime(2026, 1, 1, tzinfo=zone)
    assert moment.utcoffset() is not None
