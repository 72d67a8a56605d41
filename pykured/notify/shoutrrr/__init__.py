"""kured's notification URLs (shoutrrr v0.8.0 syntax) → where pykured sends them.

kured hands ``--notify-url`` to ``shoutrrr.Send``. pykured keeps that syntax: :func:`convert` parses the
URL with Go ``net/url`` semantics and returns a :data:`Destination` — an apprise URL that makes the request
shoutrrr makes, or a :class:`NativeRequest` for what apprise cannot send (raw ``generic://`` bodies, legacy
Teams MessageCards). URLs in apprise's own syntax (``json://``, ``tgram://``, ``https://…`` …) pass through
unchanged, which kured rejects (``unknown service "https"``). :func:`slack_hook_to_url` is kured's
conversion of the deprecated ``--slack-hook-url``. :func:`pykured.notify.redact.redact_url` makes any URL
safe to log.
"""

from __future__ import annotations

from collections.abc import Callable

from pykured.core.errors import ConfigError
from pykured.gocompat.gourl import GoURL
from pykured.notify.shoutrrr import chat, push
from pykured.notify.shoutrrr.common import not_convertible, parse
from pykured.notify.shoutrrr.destination import AppriseTarget, Destination, NativeRequest

__all__ = [
    "SHOUTRRR_SCHEMES",
    "AppriseTarget",
    "Destination",
    "NativeRequest",
    "convert",
    "slack_hook_to_url",
    "strip_quotes",
]

_CONVERTERS: dict[str, Callable[[GoURL], Destination]] = {
    "bark": push.bark,
    "discord": chat.discord,
    "generic": push.generic,
    "gotify": push.gotify,
    "googlechat": chat.googlechat,
    "hangouts": chat.googlechat,
    "ifttt": push.ifttt,
    "join": push.join,
    "matrix": chat.matrix,
    "mattermost": chat.mattermost,
    "ntfy": push.ntfy,
    "opsgenie": push.opsgenie,
    "pushbullet": push.pushbullet,
    "pushover": push.pushover,
    "rocketchat": chat.rocketchat,
    "slack": chat.slack,
    "smtp": push.smtp,
    "teams": chat.teams,
    "telegram": chat.telegram,
    "zulip": chat.zulip,
}
SHOUTRRR_SCHEMES = frozenset({*_CONVERTERS, "logger"})
_WORKFLOWS = "a Teams Workflows webhook URL (https://….logic.azure.com/workflows/…&sig=…) or workflows://"


def strip_quotes(value: str) -> str:
    """kured's ``stripQuotes``: drop one matching pair of surrounding ``"…"`` or ``'…'``."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def slack_hook_to_url(hook: str) -> str:
    """kured's ``--slack-hook-url`` conversion: ``https://hooks.slack.com/services/A/B/C`` → ``slack://A/B/C``."""
    try:
        url = parse(strip_quotes(hook))
    except ConfigError as exc:
        raise ConfigError(f"slack hook URL could not be parsed: {exc}") from exc
    parts = url.path.replace("/services/", "").split("/")
    if len(parts) != 3:
        raise ConfigError("slack hook URL is not in the expected https://hooks.slack.com/services/A/B/C form")
    return "slack://" + "/".join(parts)


def _passthrough(raw: str, scheme: str) -> Destination:
    """A URL in apprise's own syntax (which Go may not even parse, e.g. ``tgram://1:secret/chat``)."""
    if "://" not in raw or not scheme.isascii() or not scheme.replace("+", "").isalnum():
        raise ConfigError("missing protocol scheme")
    if scheme == "msteams":
        raise not_convertible("msteams", "apprise retired msteams:// (Office 365 connectors)", _WORKFLOWS)
    if scheme == "https" and ".webhook.office.com/webhookb2/" in raw.lower():
        return chat.teams(
            parse(raw), custom=True
        )  # kured: unknown service "https"; pykured sends it as Teams
    return AppriseTarget(url=raw, service=scheme)


def convert(raw: str) -> Destination:
    """The destination for one ``--notify-url``; :class:`ConfigError` says why (and what to use) if none."""
    text = strip_quotes(raw.strip())
    scheme = text.partition(":")[0].lower()
    service, plus, custom = scheme.partition("+")
    if service not in SHOUTRRR_SCHEMES:
        return _passthrough(text, scheme)
    url = parse(text)
    if plus:
        if service not in ("generic", "teams") or custom not in ("http", "https"):
            raise ConfigError(f"custom URLs are not supported by {service!r}")
        if service == "teams":
            return chat.teams(url, custom=True)
        return push.generic(url, custom=custom)
    if service == "logger":
        raise not_convertible(
            "logger", "shoutrrr's logger service is not available", "pykured's own log output"
        )
    return _CONVERTERS[service](url)
