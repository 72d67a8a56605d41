"""Secrets in notification and Prometheus URLs are redacted; scheme and host stay."""

from __future__ import annotations

import pytest

from pykured.notify.redact import redact_password, redact_url


@pytest.mark.parametrize(
    ("url", "redacted"),
    [
        ("slack://T000/B000/XXXX", "slack://T000/REDACTED/REDACTED"),
        ("https://hooks.slack.com/services/T0/B0/XX",
         "https://hooks.slack.com/REDACTED/REDACTED/REDACTED/REDACTED"),
        ("smtp://u:p@host:587/?from=a@b&to=c@d", "smtp://REDACTED@host:587/?from=REDACTED&to=REDACTED"),
        ("telegram://123:abc@telegram?chats=@x", "telegram://REDACTED@telegram?chats=REDACTED"),
        ("discord://token@12345", "discord://REDACTED@12345"),
        ("gotify://host/token#frag", "gotify://host/REDACTED#REDACTED"),
        ("generic://host?flag", "generic://host?flag"),
        ("", ""),
        ("not a url", "REDACTED"),
        ("http://[::1", "REDACTED"),
    ],
    ids=["slack", "slack-hook", "smtp", "telegram", "discord", "fragment", "query-key-only", "empty",
         "no-url", "invalid"],
)  # fmt: skip
def test_redact_url(url: str, redacted: str) -> None:
    assert redact_url(url) == redacted


@pytest.mark.parametrize(
    ("url", "redacted"),
    [
        ("http://admin:pw@prom:9090/prometheus", "http://admin:REDACTED@prom:9090/prometheus"),
        ("http://prom:9090", "http://prom:9090"),
        ("http://user@prom", "http://user@prom"),
        ("", ""),
        ("http://[::1", "REDACTED"),
    ],
    ids=["password", "none", "user-only", "empty", "invalid"],
)
def test_redact_password(url: str, redacted: str) -> None:
    assert redact_password(url) == redacted
