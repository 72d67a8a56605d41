"""Secrets in notification and Prometheus URLs are redacted; scheme and host stay."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

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


@pytest.mark.parametrize(
    ("url", "redacted"),
    [
        ("gotify://h/t#f", "gotify://h/REDACTED#REDACTED"),
        ("tgram://123:secret/chat", "REDACTED"),  # apprise syntax: no '@', the "port" is a secret
        ("smtp://u:p@mail:25/?from=a@b", "smtp://REDACTED@mail:25/?from=REDACTED"),
        ("SLACK://T0/B0/XX", "slack://T0/REDACTED/REDACTED"),
        ("generic:opaque-token", "REDACTED"),
        ("json://h/x\ttab", "REDACTED"),
    ],
    ids=["fragment", "secret-as-port", "no-slash-lost", "scheme-case", "opaque", "control-character"],
)
def test_redact_url_edge_cases(url: str, redacted: str) -> None:
    assert redact_url(url) == redacted


SECRET = st.text(alphabet="ABCDEFGHJKMNPQRSTUVWXYZ23456789", min_size=6, max_size=30).map(lambda s: "Zq" + s)


@given(user=SECRET, password=SECRET, token=SECRET, value=SECRET, fragment=SECRET)
def test_redact_url_never_leaks_userinfo_path_query_or_fragment(
    user: str, password: str, token: str, value: str, fragment: str
) -> None:
    shown = redact_url(f"generic://{user}:{password}@hooks.example.com/api/{token}?key={value}#{fragment}")
    assert shown == "generic://REDACTED@hooks.example.com/REDACTED/REDACTED?key=REDACTED#REDACTED"
    for secret in (user, password, token, value, fragment):
        assert secret not in shown
