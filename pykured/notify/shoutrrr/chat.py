"""shoutrrr v0.8.0 chat services → apprise URLs (or native requests): slack, teams, discord, telegram,
rocketchat, mattermost, googlechat/hangouts, zulip, matrix.

Each converter takes a parsed :class:`GoURL` and returns the destination that makes the request shoutrrr makes
(COMPATIBILITY.md, notifications). Cases apprise cannot express raise :class:`ConfigError` naming an
alternative.
"""

from __future__ import annotations

import re

from pykured.core.errors import ConfigError
from pykured.gocompat.gourl import GoURL
from pykured.notify.shoutrrr.common import check_keys, enc, flag, not_convertible, query, split_list
from pykured.notify.shoutrrr.destination import AppriseTarget, Destination, NativeRequest

__all__ = [
    "discord",
    "googlechat",
    "matrix",
    "mattermost",
    "rocketchat",
    "slack",
    "teams",
    "telegram",
    "zulip",
]

_SLACK_TOKEN = re.compile(
    r"^(?:(?P<type>xox[a-z]|hook)[-:]|:?)(?P<a>[A-Z0-9]{9,})(?P<sep>[-/,])(?P<b>[A-Z0-9]{9,})(?P=sep)"
    r"(?P<c>[A-Za-z0-9]{24,})$"
)
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_HEX32 = re.compile(r"^[0-9a-fA-F]{32}$")
_TEAMS_PATH = re.compile(r"^/webhookb2/([^/@]+)@([^/]+)/IncomingWebhook/([^/]+)/([^/]+)/?$")
_ZULIP_LABEL = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
_WORKFLOWS = "a Teams Workflows webhook URL (https://….logic.azure.com/workflows/…&sig=…)"


def slack(url: GoURL) -> Destination:
    check_keys(url, "slack", ("botname", "username", "icon", "color", "title", "thread_ts", "channel"))
    if len(url.path) > 1:  # legacy slack://[botname@]A/B/C
        token, channel, botname = url.hostname + url.path, "webhook", url.username or ""
    else:
        user = url.username or ""
        token = f"{user}:{url.password}" if url.password is not None else user
        channel, botname = url.hostname, ""
    botname = url.get("botname") or url.get("username") or botname
    channel = url.get("channel") or channel
    match = _SLACK_TOKEN.match(token)
    if not match:
        raise ConfigError("slack: invalid slack token format")
    kind = match.group("type") or "hook"
    who = f"{enc(botname)}@" if botname else ""
    target = "" if channel in ("", "webhook") else f"/+{enc(channel)}"
    params = query([("image", "no"), ("footer", "no")])
    title = url.get("title") or None
    if kind == "hook":
        return AppriseTarget(
            url=f"slack://{who}{match['a']}/{match['b']}/{match['c']}{target}{params}",
            service="slack",
            title=title,
        )
    if not target:
        raise ConfigError("slack: a bot token needs a channel (slack://xoxb:TOKEN@CHANNEL)")
    bot = f"{kind}-{match['a']}-{match['b']}-{match['c']}"
    return AppriseTarget(url=f"slack://{who}{bot}{target}{params}", service="slack", title=title)


def teams(url: GoURL, *, custom: bool = False) -> Destination:
    """Legacy Office 365 connector webhook: sent natively as shoutrrr's MessageCard (apprise has none)."""
    check_keys(url, "teams", ("title", "color", "host"))
    host = url.get("host")
    if custom:
        match = _TEAMS_PATH.match(url.path)
        if not match:
            raise ConfigError("teams: invalid webhook URL format")
        parts = match.groups()
        host = url.host
    elif url.password is not None:  # teams://group@tenant:altId@groupOwner
        group, at, tenant = (url.username or "").partition("@")
        if not at:
            raise ConfigError("teams: invalid URL format")
        parts = (group, tenant, url.password, url.hostname)
    else:
        segments = [s for s in url.path.split("/") if s]
        if len(segments) != 2:
            raise ConfigError("teams: invalid URL format, expected teams://group@tenant/altId/groupOwner")
        parts = (url.username or "", url.hostname, segments[0], segments[1])
    group, tenant, alt_id, owner = parts
    for label, value, pattern in (
        ("group", group, _UUID),
        ("tenant", tenant, _UUID),
        ("altId", alt_id, _HEX32),
        ("groupOwner", owner, _UUID),
    ):
        if not pattern.match(value):
            raise ConfigError(f"teams: invalid {label} in webhook URL")
    path = "webhookb2" if host else "webhook"
    target = (
        f"https://{host or 'outlook.office.com'}/{path}/{group}@{tenant}/IncomingWebhook/{alt_id}/{owner}"
    )
    return NativeRequest(
        service="teams",
        method="POST",
        url=target,
        headers=(("Content-Type", "application/json"),),
        body="teams",
        title=url.get("title") or None,
        color=url.get("color"),
        note=f"Office 365 connector webhooks are being retired by Microsoft; consider {_WORKFLOWS}",
    )


def discord(url: GoURL) -> Destination:
    allowed = ("title", "username", "avatar", "avatarurl", "color", "colorerror", "colorwarn", "colorinfo")
    check_keys(url, "discord", (*allowed, "colordebug", "colortrace", "splitlines", "json"))
    if url.path.strip("/") == "raw" or flag(url, "json", default=False):
        raise not_convertible(
            "discord", "raw JSON mode (/raw, json=yes) has no apprise equivalent", "plain discord://token@id"
        )
    if not url.username or not url.hostname:
        raise ConfigError("discord: expected discord://token@webhookid")
    who = f"{enc(url.get('username'))}@" if url.get("username") else ""
    avatar = url.get("avatar") or url.get("avatarurl")
    params = [("footer", "no"), ("avatar_url", avatar) if avatar else ("avatar", "no")]
    return AppriseTarget(
        url=f"discord://{who}{enc(url.hostname)}/{enc(url.username)}{query(params)}",
        service="discord",
        title=url.get("title") or None,
    )


def telegram(url: GoURL) -> Destination:
    check_keys(url, "telegram", ("chats", "channels", "preview", "notification", "parsemode", "title"))
    if not url.username or url.password is None:
        raise ConfigError("telegram: expected telegram://botid:secret@telegram?chats=…")
    chats = split_list(url.get("chats") or url.get("channels"))
    if not chats:
        raise ConfigError("telegram: no chats given (?chats=@channel,chat-id)")
    mode = url.get("parsemode", "None").lower()
    formats = {"none": "text", "markdown": "markdown", "markdownv2": "markdown", "html": "html"}
    if mode not in formats:
        raise ConfigError(f"telegram: invalid parsemode {url.get('parsemode')!r}")
    params = [("preview", "yes" if flag(url, "preview", default=True) else "no"), ("format", formats[mode])]
    if not flag(url, "notification", default=True):
        params.append(("silent", "yes"))
    path = "/".join(enc(chat, safe="@:-") for chat in chats)
    return AppriseTarget(
        url=f"tgram://{enc(url.username)}:{enc(url.password)}/{path}{query(params)}",
        service="telegram",
        title=url.get("title") or None,
    )


def rocketchat(url: GoURL) -> Destination:
    check_keys(url, "rocketchat", ("disabletls",))
    segments = [s for s in url.path.split("/") if s]
    if len(segments) < 2:
        raise ConfigError("rocketchat: expected rocketchat://host/tokenA/tokenB[/channel]")
    channel = segments[2] if len(segments) > 2 else ""
    if url.fragment:
        channel = "#" + url.fragment
    elif channel and channel[0] not in "@#":
        channel = "#" + channel
    scheme = "rocket" if flag(url, "disabletls", default=False) else "rockets"
    target = f"/{enc(channel, safe='@')}" if channel else ""
    token = f"{enc(segments[0])}/{enc(segments[1])}"
    return AppriseTarget(
        url=f"{scheme}://{token}@{url.host}{target}{query([('avatar', 'no')])}",
        service="rocketchat",
        note="the {user}@ sender override has no apprise equivalent" if url.username else "",
    )


def mattermost(url: GoURL) -> Destination:
    check_keys(url, "mattermost", ("icon", "title", "disabletls", "channel"))
    segments = [s for s in url.path.split("/") if s]
    if not segments:
        raise ConfigError("mattermost: expected mattermost://host/token[/channel]")
    channel = url.get("channel") or (segments[1] if len(segments) > 1 else "")
    params = [("image", "no")]
    if channel:
        params.append(("channel", channel))
    if url.get("icon"):
        params.append(("icon_url", url.get("icon")))
    who = f"{enc(url.username)}@" if url.username else ""
    scheme = "mmost" if flag(url, "disabletls", default=False) else "mmosts"
    return AppriseTarget(
        url=f"{scheme}://{who}{url.host}/{enc(segments[0])}{query(params)}",
        service="mattermost",
        title=url.get("title") or None,
    )


def googlechat(url: GoURL) -> Destination:
    check_keys(url, "googlechat", ("key", "token"))
    segments = [s for s in url.path.split("/") if s]
    space = segments[segments.index("spaces") + 1] if "spaces" in segments[:-1] else ""
    key, token = url.get("key"), url.get("token")
    if not (space and key and token):
        raise ConfigError(
            "googlechat: expected googlechat://chat.googleapis.com/v1/spaces/S/messages?key=&token="
        )
    return AppriseTarget(url=f"gchat://{enc(space)}/{enc(key)}/{enc(token)}", service="googlechat")


def zulip(url: GoURL) -> Destination:
    check_keys(url, "zulip", ("stream", "topic"))
    botmail, key, host = url.username or "", url.password or "", url.hostname
    name, sep, domain = botmail.rpartition("-bot@")
    if not (
        sep and domain == host and "." in host and _ZULIP_LABEL.match(host.split(".")[0]) and name and key
    ):
        raise not_convertible(
            "zulip",
            "apprise can only send as a bot whose e-mail is <name>-bot@<zulip host>",
            "a bot named <name>-bot@<host> (zulip://<name>-bot%40<host>:<key>@<host>/?stream=…)",
        )
    stream = url.get("stream")
    if not stream:
        raise ConfigError("zulip: no stream given (?stream=…)")
    return AppriseTarget(
        url=f"zulip://{enc(name)}@{host}/{enc(key)}/{enc(stream)}",
        service="zulip",
        title=url.get("topic") or None,
    )


def matrix(url: GoURL) -> Destination:
    check_keys(url, "matrix", ("rooms", "room", "disabletls", "title"))
    rooms = split_list(url.get("rooms") or url.get("room"))
    if not rooms:
        raise not_convertible(
            "matrix",
            "without ?rooms= shoutrrr posts to every joined room, which apprise cannot do",
            "matrix://user:password@host/?rooms=!roomid,#alias",
        )
    rooms = [room if room[0] in "!#" else "#" + room for room in rooms]
    if url.username:
        auth = f"{enc(url.username)}:{enc(url.password or '')}@"
    elif url.password:
        auth = f"{enc(url.password)}@"  # token form matrix://:TOKEN@host
    else:
        auth = ""
    scheme = "matrix" if flag(url, "disabletls", default=False) else "matrixs"
    path = "/".join(enc(room, safe="!:") for room in rooms)
    return AppriseTarget(
        url=f"{scheme}://{auth}{url.host}/{path}{query([('discovery', 'no')])}",
        service="matrix",
        title=url.get("title") or None,
    )
