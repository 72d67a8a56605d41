# ruff: noqa: E501  (conversion tables keep one URL per line)
"""shoutrrr v0.8.0 URL → apprise/native conversion: one case per shoutrrr service, plus errors."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pykured.core.errors import ConfigError
from pykured.notify.redact import redact_url as redact
from pykured.notify.shoutrrr import (
    AppriseTarget,
    NativeRequest,
    convert,
    slack_hook_to_url,
    strip_quotes,
)
from pykured.notify.shoutrrr.common import dash_case, flag, parse
from pykured.notify.shoutrrr.push import gotify_priority

G = "11111111-2222-3333-4444-555555555555"
T = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
OWNER = "99999999-8888-7777-6666-555555555555"
ALT = "0123456789abcdef0123456789ABCDEF"
SLACK_C = "XXXXXXXXXXXXXXXXXXXXXXXX"

# (id, shoutrrr URL, expected apprise URL, expected title)
APPRISE_CASES = [
    ("slack-legacy", f"slack://T00000000/B00000000/{SLACK_C}",
     f"slack://T00000000/B00000000/{SLACK_C}?image=no&footer=no", None),
    ("slack-legacy-botname", f"slack://kured@T00000000/B00000000/{SLACK_C}",
     f"slack://kured@T00000000/B00000000/{SLACK_C}?image=no&footer=no", None),
    ("slack-hook", "slack://hook:WNA3PBYV6-F20DUQND3RQ-Webc4MAvoacrpPakR8phF0zi@webhook?color=good"
     "&title=Great+News&icon=man-scientist&botname=Shoutrrrbot",
     "slack://Shoutrrrbot@WNA3PBYV6/F20DUQND3RQ/Webc4MAvoacrpPakR8phF0zi?image=no&footer=no", "Great News"),
    ("slack-hook-comma-channel", "slack://hook:WNA3PBYV6,F20DUQND3RQ,Webc4MAvoacrpPakR8phF0zi@C0123ABCD",
     "slack://WNA3PBYV6/F20DUQND3RQ/Webc4MAvoacrpPakR8phF0zi/+C0123ABCD?image=no&footer=no", None),
    ("slack-bot", "slack://xoxb:123456789012-1234567890123-4mt0t4l1YL3g1T5L4cK70k3N@C001CH4NN3L?botname=kured",
     "slack://kured@xoxb-123456789012-1234567890123-4mt0t4l1YL3g1T5L4cK70k3N/+C001CH4NN3L?image=no&footer=no", None),
    ("discord", "discord://tok3n@123456789?username=kured&title=T",
     "discord://kured@123456789/tok3n?footer=no&avatar=no", "T"),
    ("discord-avatar", "discord://tok3n@123456789?avatar=https://x.example/a.png",
     "discord://123456789/tok3n?footer=no&avatar_url=https:%2F%2Fx.example%2Fa.png", None),
    ("telegram", "telegram://110201543:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw@telegram?chats=@channel-1,-100123,42:7",
     "tgram://110201543:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/@channel-1/-100123/42:7?preview=yes&format=text", None),
    ("telegram-options", "telegram://1:s@telegram?channels=1&preview=no&notification=no&parsemode=HTML&title=X",
     "tgram://1:s/1?preview=no&format=html&silent=yes", "X"),
    ("smtp-starttls", "smtp://user:pass@mail.example.com:587/?fromAddress=k@x.io&toAddresses=a@x.io,b@x.io",
     "mailtos://user:pass@mail.example.com:587?from=k@x.io&to=a@x.io,b@x.io&mode=starttls&format=text",
     "Shoutrrr Notification"),
    ("smtp-465-auto-ssl", "smtp://u:p@mail.example.com:465/?from=k@x.io&to=a@x.io&subject=Hi",
     "mailtos://u:p@mail.example.com:465?from=k@x.io&to=a@x.io&mode=ssl&format=text", "Hi"),
    ("smtp-implicit", "smtp://mail.example.com:2465/?from=k@x.io&to=a@x.io&encryption=ImplicitTLS&fromname=K",
     "mailtos://mail.example.com:2465?from=k@x.io&to=a@x.io&mode=ssl&name=K&format=text", "Shoutrrr Notification"),
    ("smtp-none-default-port", "smtp://u%40x.io:p@mail.example.com/?from=k@x.io&to=a@x.io&encryption=None",
     "mailto://u%40x.io:p@mail.example.com:25?from=k@x.io&to=a@x.io&format=text", "Shoutrrr Notification"),
    ("smtp-no-starttls", "smtp://mail.example.com:25/?from=k@x.io&to=a@x.io&usestarttls=no&usehtml=yes",
     "mailto://mail.example.com:25?from=k@x.io&to=a@x.io&format=html", "Shoutrrr Notification"),
    ("smtp-auth-none-drops-user", "smtp://u:p@mail.example.com:587/?from=k@x.io&to=a@x.io&auth=None",
     "mailtos://mail.example.com:587?from=k@x.io&to=a@x.io&mode=starttls&format=text", "Shoutrrr Notification"),
    ("rocketchat", "rocketchat://kured@chat.example.com/TokA/TokB/general",
     "rockets://TokA/TokB@chat.example.com/%23general?avatar=no", None),
    ("rocketchat-user", "rocketchat://chat.example.com:3000/TokA/TokB/@bob",
     "rockets://TokA/TokB@chat.example.com:3000/@bob?avatar=no", None),
    ("rocketchat-fragment", "rocketchat://chat.example.com/TokA/TokB/#ops",
     "rockets://TokA/TokB@chat.example.com/%23ops?avatar=no", None),
    ("mattermost", "mattermost://kured@mm.example.com/tok3n/town?icon=https://i/x.png&title=T",
     "mmosts://kured@mm.example.com/tok3n?image=no&channel=town&icon_url=https:%2F%2Fi%2Fx.png", "T"),
    ("pushover", "pushover://shoutrrr:apiTok@userKey/?devices=d1,d2&priority=1&title=T",
     "pover://userKey@apiTok/d1/d2?priority=high", "T"),
    ("pushover-default-priority", "pushover://shoutrrr:apiTok@userKey/",
     "pover://userKey@apiTok?priority=normal", None),
    ("gotify", "gotify://gotify.example.com/sub/Aaaaaaaaaaaaaaa?priority=8&title=T",
     "gotifys://gotify.example.com/sub/Aaaaaaaaaaaaaaa?priority=high", "T"),
    ("gotify-http-default", "gotify://gotify.example.com:8080/Aaaaaaaaaaaaaaa?disabletls=yes",
     "gotify://gotify.example.com:8080/Aaaaaaaaaaaaaaa?priority=low", "Shoutrrr notification"),
    ("googlechat", "googlechat://chat.googleapis.com/v1/spaces/FOO/messages?key=bar&token=baz",
     "gchat://FOO/bar/baz", None),
    ("hangouts-alias", "hangouts://chat.googleapis.com/v1/spaces/FOO/messages?key=bar&token=baz",
     "gchat://FOO/bar/baz", None),
    ("ntfy", "ntfy://u:p@ntfy.sh/alerts?priority=urgent&tags=warning,skull&click=https://x&icon=https://i&title=T",
     "ntfys://u:p@ntfy.sh/alerts?image=no&priority=max&tags=warning,skull&click=https:%2F%2Fx"
     "&avatar_url=https:%2F%2Fi", "T"),
    ("ntfy-http-numeric", "ntfy://ntfy.example.com/t?scheme=http&priority=2",
     "ntfy://ntfy.example.com/t?image=no&priority=low", None),
    ("generic-json", "generic://hooks.example.com/api/v1?template=json&@acceptLanguage=en&$env=prod&foo=bar",
     "jsons://hooks.example.com/api/v1?:version=&:attachments=&:type=&:title=&:env=prod&+Accept-Language=en"
     "&-foo=bar", None),
    ("generic-json-keys", "generic+http://u:p@127.0.0.1:8080/x?template=JSON&messagekey=text&titlekey=t&title=Hi"
     "&method=put", "json://u:p@127.0.0.1:8080/x?:version=&:attachments=&:type=&:title=t&:message=text"
     "&method=PUT", "Hi"),
    ("generic-json-disabletls", "generic://h.example.com/p?template=json&disabletls=yes&contenttype=text/json",
     "json://h.example.com/p?:version=&:attachments=&:type=&:title=&+Content-Type=text%2Fjson", None),
    ("matrix", "matrix://bot:secret@matrix.example.com:8448/?rooms=!abc:example.com,ops",
     "matrixs://bot:secret@matrix.example.com:8448/!abc:example.com/%23ops?discovery=no", None),
    ("matrix-token-http", "matrix://:tok3n@matrix.example.com/?rooms=%23ops&disableTLS=yes",
     "matrix://tok3n@matrix.example.com/%23ops?discovery=no", None),
    ("zulip", "zulip://kured-bot%40zulip.example.com:k3y@zulip.example.com/?stream=ops&topic=reboots",
     "zulip://kured@zulip.example.com/k3y/ops", "reboots"),
    ("opsgenie", "opsgenie://api.eu.opsgenie.com/ap1k3y?responders=team:ops,user:bob@x.io&priority=P2"
     "&tags=a,b&details=env:prod&alias=kured",
     "opsgenie://ap1k3y/%23ops/@bob@x.io?action=new&region=eu&priority=2&tags=a,b&alias=kured&+env=prod", None),
    ("opsgenie-us", "opsgenie://api.opsgenie.com/ap1k3y", "opsgenie://ap1k3y?action=new&region=us", None),
    ("pushbullet", "pushbullet://t0ken/dev1/#chan", "pbul://t0ken/dev1/%23chan", None),
    ("join", "join://shoutrrr:k3y@join/?devices=a,b", "join://k3y/a/b?image=no", None),
    ("ifttt", "ifttt://k3y/?events=e1,e2", "ifttt://k3y/e1/e2", None),
    ("bark", "bark://devkey@bark.example.com:8080/sub?sound=alarm", "barks://bark.example.com:8080/sub/devkey?image=no&sound=alarm",
     None),
    ("passthrough-json", "json://127.0.0.1:9/x?:title=", "json://127.0.0.1:9/x?:title=", None),
    ("passthrough-tgram", "tgram://1:s/2", "tgram://1:s/2", None),
    ("passthrough-workflows", "https://prod-1.westeurope.logic.azure.com/workflows/abc/triggers/manual/paths/invoke"
     "?api-version=1&sig=S", "https://prod-1.westeurope.logic.azure.com/workflows/abc/triggers/manual/paths/invoke"
     "?api-version=1&sig=S", None),
    ("quotes-stripped", "'slack://T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX'",
     f"slack://T00000000/B00000000/{SLACK_C}?image=no&footer=no", None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("url", "expected", "title"), [c[1:] for c in APPRISE_CASES], ids=[c[0] for c in APPRISE_CASES]
)
def test_convert_to_apprise(url: str, expected: str, title: str | None) -> None:
    destination = convert(url)
    assert isinstance(destination, AppriseTarget)
    assert destination.url == expected
    assert destination.title == title


TEAMS_URL = f"https://org.webhook.office.com/webhookb2/{G}@{T}/IncomingWebhook/{ALT}/{OWNER}"
NATIVE_CASES = [
    ("teams-host", f"teams://{G}@{T}/{ALT}/{OWNER}?host=org.webhook.office.com&title=T&color=ff0000", "POST",
     TEAMS_URL, "teams"),
    ("teams-legacy-format", f"teams://{G}%40{T}:{ALT}@{OWNER}?host=org.webhook.office.com", "POST", TEAMS_URL, "teams"),
    ("teams-no-host", f"teams://{G}@{T}/{ALT}/{OWNER}", "POST",
     f"https://outlook.office.com/webhook/{G}@{T}/IncomingWebhook/{ALT}/{OWNER}", "teams"),
    ("teams-custom", f"teams+https://org.webhook.office.com/webhookb2/{G}@{T}/IncomingWebhook/{ALT}/{OWNER}", "POST",
     TEAMS_URL, "teams"),
    ("teams-pasted-https", TEAMS_URL, "POST", TEAMS_URL, "teams"),
    ("generic-raw", "generic://hooks.example.com/api?foo=bar&@xApiKey=k", "POST",
     "https://hooks.example.com/api?foo=bar", "raw"),
    ("generic-raw-http-put", "generic+http://127.0.0.1:9/api?method=put", "PUT", "http://127.0.0.1:9/api", "raw"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("url", "method", "target", "body"), [c[1:] for c in NATIVE_CASES], ids=[c[0] for c in NATIVE_CASES]
)
def test_convert_to_native(url: str, method: str, target: str, body: str) -> None:
    destination = convert(url)
    assert isinstance(destination, NativeRequest)
    assert (destination.method, destination.url, destination.body) == (method, target, body)


def test_generic_raw_headers_follow_shoutrrr() -> None:
    destination = convert("generic://u:p@hooks.example.com/api?@xApiKey=k&contenttype=text/plain")
    assert isinstance(destination, NativeRequest)
    assert dict(destination.headers) == {
        "Content-Type": "text/plain",
        "Accept": "text/plain",
        "X-Api-Key": "k",
        "Authorization": "Basic dTpw",
    }
    assert destination.render("Rebooting node n1") == b"Rebooting node n1"


def test_teams_card_matches_shoutrrr() -> None:
    destination = convert(f"teams://{G}@{T}/{ALT}/{OWNER}?host=org.webhook.office.com&color=ff0000")
    assert isinstance(destination, NativeRequest)
    card = json.loads(destination.render("Rebooting node node-with-a-long-name\nline 2"))
    assert card == {
        "@type": "MessageCard",
        "@context": "http://schema.org/extensions",
        "markdown": True,
        "summary": "Rebooting node node-",
        "sections": [{"text": "Rebooting node node-with-a-long-name"}, {"text": "line 2"}],
        "themeColor": "ff0000",
    }
    assert "Workflows" in destination.note


ERROR_CASES = [
    (
        "unparsable-slash-token",
        "slack://hook:T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX@channel",
        "invalid port",
    ),
    ("slack-bad-token", "slack://hook:short-token-x@webhook", "invalid slack token"),
    (
        "slack-bot-no-channel",
        "slack://xoxb:123456789012-1234567890123-4mt0t4l1YL3g1T5L4cK70k3N@webhook",
        "channel",
    ),
    (
        "unknown-key",
        f"slack://T00000000/B00000000/{SLACK_C}?colour=red",
        "'colour' is not a valid config key",
    ),
    ("teams-bad-uuid", f"teams://nope@{T}/{ALT}/{OWNER}", "invalid group"),
    ("msteams-retired", "msteams://a/b/c", "Workflows"),
    ("discord-raw", "discord://tok@123/raw", "use plain discord://"),
    ("telegram-no-chats", "telegram://1:s@telegram", "no chats"),
    ("telegram-bad-parsemode", "telegram://1:s@telegram?chats=1&parsemode=bbcode", "parsemode"),
    ("smtp-crammd5", "smtp://u:p@mail.example.com/?from=a@b.c&to=d@e.f&auth=CRAMMD5", "use auth=Plain"),
    ("smtp-no-to", "smtp://mail.example.com/?from=a@b.c", "required"),
    ("gotify-bad-token", "gotify://gotify.example.com/short", "invalid gotify token"),
    ("matrix-no-rooms", "matrix://u:p@matrix.example.com/", "?rooms="),
    (
        "zulip-mismatched-bot",
        "zulip://someone%40example.com:k@zulip.example.com/?stream=s",
        "<name>-bot@<host>",
    ),
    ("opsgenie-foreign-host", "opsgenie://alerts.example.com/k", "use api.opsgenie.com"),
    ("generic-unknown-template", "generic://h.example.com/?template=xml", "only json"),
    ("ifttt-custom-values", "ifttt://k/?events=e&messagevalue=1", "no apprise equivalent"),
    ("logger", "logger://", "pykured's own log"),
    ("custom-not-allowed", "slack+https://x.example.com/", "custom URLs"),
    ("no-scheme", "hooks.slack.com/services/A/B/C", "missing protocol scheme"),
]


@pytest.mark.parametrize(("url", "message"), [c[1:] for c in ERROR_CASES], ids=[c[0] for c in ERROR_CASES])
def test_not_convertible_errors_say_why(url: str, message: str) -> None:
    with pytest.raises(ConfigError, match=None) as excinfo:
        convert(url)
    assert message in str(excinfo.value)


HOOK_CASES = [
    ("plain", "https://hooks.slack.com/services/T000/B000/XXXX", "slack://T000/B000/XXXX"),
    ("double-quotes", '"https://hooks.slack.com/services/T000/B000/XXXX"', "slack://T000/B000/XXXX"),
    ("single-quotes", "'https://hooks.slack.com/services/T000/B000/XXXX'", "slack://T000/B000/XXXX"),
    ("case-kept", "https://hooks.slack.com/services/TaBc/BdEf/XyZ", "slack://TaBc/BdEf/XyZ"),
]


@pytest.mark.parametrize(("hook", "expected"), [c[1:] for c in HOOK_CASES], ids=[c[0] for c in HOOK_CASES])
def test_slack_hook_to_url(hook: str, expected: str) -> None:
    assert slack_hook_to_url(hook) == expected


@pytest.mark.parametrize(
    "hook",
    ["https://hooks.slack.com/services/T000/B000", "https://hooks.slack.com/services/T/B/X/Y"],
    ids=["2", "4"],
)
def test_slack_hook_needs_three_parts(hook: str) -> None:
    with pytest.raises(ConfigError, match="services/A/B/C"):
        slack_hook_to_url(hook)


QUOTE_CASES = [
    ("unchanged", "abc", "abc"),
    ("double", '"abc"', "abc"),
    ("single", "'abc'", "abc"),
    ("unbalanced", "'abc\"", "'abc\""),
    ("length-1", '"', '"'),
    ("empty", "", ""),
]


@pytest.mark.parametrize(("raw", "expected"), [c[1:] for c in QUOTE_CASES], ids=[c[0] for c in QUOTE_CASES])
def test_strip_quotes_like_kured(raw: str, expected: str) -> None:
    assert strip_quotes(raw) == expected


def test_parse_keeps_case_and_splits_userinfo_at_last_at() -> None:
    url = parse("Generic://us%40er:p@ss@Host.Example:8080/A%2FB/c?Key=1&key=2&Other=x+y#frag")
    assert (url.scheme, url.username, url.password) == ("generic", "us@er", "p@ss")
    assert (url.hostname, url.port, url.path, url.fragment) == ("Host.Example", "8080", "/A/B/c", "frag")
    assert url.get("KEY") == "1"
    assert url.get("other") == "x y"
    assert url.key_names() == ["key", "other"]


def test_parse_ipv6_host() -> None:
    url = parse("generic://[::1]:8080/x")
    assert (url.hostname, url.port, url.host) == ("::1", "8080", "[::1]:8080")


@pytest.mark.parametrize(
    ("value", "expected"), [("yes", True), ("Y", True), ("1", True), ("FALSE", False), ("n", False)],
    ids=["yes", "Y", "1", "FALSE", "n"],
)  # fmt: skip
def test_flag_booleans(value: str, expected: bool) -> None:
    assert flag(parse(f"x://h/?disabletls={value}"), "disabletls", default=not expected) is expected


def test_flag_rejects_garbage() -> None:
    with pytest.raises(ConfigError, match="invalid boolean"):
        flag(parse("x://h/?disabletls=maybe"), "disabletls", default=False)


REDACT_CASES = [
    ("slack", "slack://hook:SECRET-TOKEN@webhook?botname=bob", "slack://REDACTED@webhook?botname=REDACTED"),
    ("path-tokens", "https://hooks.slack.com/services/T/B/SECRET", "https://hooks.slack.com/REDACTED/REDACTED/REDACTED/REDACTED"),
    ("smtp", "smtp://u:pw@mail:25/?from=a@b&to=c@d", "smtp://REDACTED@mail:25/?from=REDACTED&to=REDACTED"),
    ("no-scheme", "garbage", "REDACTED"),
]  # fmt: skip


@pytest.mark.parametrize(("url", "expected"), [c[1:] for c in REDACT_CASES], ids=[c[0] for c in REDACT_CASES])
def test_redact(url: str, expected: str) -> None:
    assert redact(url) == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("acceptLanguage", "Accept-Language"),
        ("X-Custom", "X-Custom"),
        ("xApiKey", "X-Api-Key"),
        ("token", "Token"),
    ],
    ids=["camel", "dashed", "three", "single"],
)
def test_dash_case(name: str, expected: str) -> None:
    assert dash_case(name) == expected


@pytest.mark.parametrize(
    ("priority", "expected"),
    [(0, "low"), (2, "low"), (3, "moderate"), (5, "normal"), (7, "normal"), (8, "high"), (10, "emergency")],
    ids=["0", "2", "3", "5", "7", "8", "10"],
)
def test_gotify_priority_quantised(priority: int, expected: str) -> None:
    assert gotify_priority(priority) == expected


SECRET = st.text(alphabet="ABCDEFGHJKMNPQRSTUVWXYZ23456789", min_size=6, max_size=30).map(lambda s: "Zq" + s)


@given(user=SECRET, password=SECRET, token=SECRET, value=SECRET)
def test_redact_never_leaks_secrets(user: str, password: str, token: str, value: str) -> None:
    shown = redact(f"generic://{user}:{password}@hooks.example.com/api/{token}?key={value}")
    assert shown.startswith("generic://REDACTED@hooks.example.com/")
    for secret in (user, password, token, value):
        assert secret not in shown


@given(user=SECRET, password=SECRET, host=st.from_regex(r"[A-Za-z][A-Za-z0-9]{0,10}", fullmatch=True))
def test_parse_round_trips_userinfo_and_host_case(user: str, password: str, host: str) -> None:
    url = parse(f"generic://{user}:{password}@{host}:8080/p")
    assert (url.username, url.password, url.hostname, url.port) == (user, password, host, "8080")
