"""shoutrrr v0.8.0 mail, push and webhook services → apprise URLs or native requests: smtp, pushover, gotify,
ntfy, generic, opsgenie, pushbullet, join, ifttt, bark.

Mapping rules follow shoutrrr v0.8.0's services (COMPATIBILITY.md, notifications); apprise defaults that
differ from shoutrrr's (priority, title, TLS mode) are always written out explicitly.
"""

from __future__ import annotations

import base64

from pykured.core.errors import ConfigError
from pykured.gocompat.gourl import GoURL
from pykured.notify.shoutrrr.common import (
    check_keys,
    dash_case,
    enc,
    flag,
    not_convertible,
    query,
    split_list,
)
from pykured.notify.shoutrrr.destination import AppriseTarget, Destination, NativeRequest

__all__ = ["bark", "generic", "gotify", "ifttt", "join", "ntfy", "opsgenie", "pushbullet", "pushover", "smtp"]

_SMTP_KEYS = (
    "fromaddress",
    "from",
    "toaddresses",
    "to",
    "fromname",
    "subject",
    "title",
    "auth",
    "encryption",
)
_GENERIC_KEYS = {"template", "titlekey", "messagekey", "method", "contenttype", "disabletls", "title"}


def _auth(user: str | None, password: str | None) -> str:
    if not user:
        return ""
    return f"{enc(user)}:{enc(password)}@" if password is not None else f"{enc(user)}@"


def smtp(url: GoURL) -> Destination:
    check_keys(url, "smtp", (*_SMTP_KEYS, "usestarttls", "starttls", "usehtml", "clienthost"))
    sender, recipients = url.get("fromaddress") or url.get("from"), url.get("toaddresses") or url.get("to")
    if not sender or not split_list(recipients):
        raise ConfigError("smtp: from and to addresses are required (?from=…&to=…)")
    port = int(url.port or "25")
    encryption = url.get("encryption", "Auto").lower()
    if encryption not in ("auto", "none", "explicittls", "implicittls"):
        raise ConfigError(f"smtp: invalid encryption {url.get('encryption')!r}")
    auth = url.get("auth", "Unknown").lower()
    if auth in ("crammd5", "oauth2"):
        raise not_convertible("smtp", f"auth={url.get('auth')} is not supported by apprise", "auth=Plain")
    if auth not in ("none", "plain", "unknown"):
        raise ConfigError(f"smtp: invalid auth {url.get('auth')!r}")
    starttls = flag(url, "usestarttls", default=True) and flag(url, "starttls", default=True)
    if encryption == "implicittls" or (encryption == "auto" and port == 465):
        scheme, mode = "mailtos", "ssl"
    elif encryption == "none" or not starttls:
        scheme, mode = "mailto", ""
    else:
        scheme, mode = "mailtos", "starttls"
    creds = "" if auth == "none" else _auth(url.username, url.password)
    params = [("from", sender), ("to", ",".join(split_list(recipients)))]
    if mode:
        params.append(("mode", mode))
    if url.get("fromname"):
        params.append(("name", url.get("fromname")))
    params.append(("format", "html" if flag(url, "usehtml", default=False) else "text"))
    return AppriseTarget(
        url=f"{scheme}://{creds}{url.hostname}:{port}{query(params)}",
        service="smtp",
        title=url.get("subject") or url.get("title") or "Shoutrrr Notification",
    )


def pushover(url: GoURL) -> Destination:
    check_keys(url, "pushover", ("devices", "priority", "title"))
    if not url.password or not url.hostname:
        raise ConfigError("pushover: expected pushover://shoutrrr:apiToken@userKey/")
    names = {"-2": "low", "-1": "moderate", "0": "normal", "1": "high"}
    priority = names.get(url.get("priority", "0").strip(), "normal")
    devices = "".join(f"/{enc(d)}" for d in split_list(url.get("devices")))
    return AppriseTarget(
        url=f"pover://{enc(url.hostname)}@{enc(url.password)}{devices}{query([('priority', priority)])}",
        service="pushover",
        title=url.get("title") or None,
    )


def gotify_priority(value: int) -> str:
    """apprise's gotify priority names for shoutrrr's integer priority."""
    for limit, name in ((2, "low"), (4, "moderate"), (7, "normal"), (9, "high")):
        if value <= limit:
            return name
    return "emergency"


def gotify(url: GoURL) -> Destination:
    check_keys(url, "gotify", ("priority", "title", "disabletls"))
    segments = [s for s in url.path.split("/") if s]
    token = segments[-1] if segments else ""
    if len(token) != 15 or not token.startswith("A"):
        raise ConfigError("gotify: invalid gotify token")
    try:
        priority = int(url.get("priority", "0"))
    except ValueError as exc:
        raise ConfigError(f"gotify: invalid priority {url.get('priority')!r}") from exc
    scheme = "gotify" if flag(url, "disabletls", default=False) else "gotifys"
    path = "".join(f"/{enc(s)}" for s in segments)
    return AppriseTarget(
        url=f"{scheme}://{url.host}{path}{query([('priority', gotify_priority(priority))])}",
        service="gotify",
        title=url.get("title") or "Shoutrrr notification",
    )


_NTFY_PRIORITY = {"1": "min", "2": "low", "3": "default", "4": "high", "5": "max", "urgent": "max"}
_NTFY_DIRECT = ("tags", "click", "attach", "filename", "delay", "email")


def ntfy(url: GoURL) -> Destination:
    check_keys(
        url, "ntfy", ("scheme", "priority", "title", "icon", "actions", "cache", "firebase", *_NTFY_DIRECT)
    )
    topic = url.path.strip("/")
    if not topic:
        raise ConfigError("ntfy: no topic given (ntfy://host/topic)")
    scheme = url.get("scheme", "https").lower()
    if scheme not in ("http", "https"):
        raise ConfigError(f"ntfy: invalid scheme {url.get('scheme')!r}")
    params = [("image", "no")]
    if url.get("priority"):
        raw = url.get("priority").lower()
        params.append(("priority", _NTFY_PRIORITY.get(raw, raw)))
    params += [(key, url.get(key)) for key in _NTFY_DIRECT if url.get(key)]
    if url.get("icon"):
        params.append(("avatar_url", url.get("icon")))
    return AppriseTarget(
        url=f"{'ntfys' if scheme == 'https' else 'ntfy'}://{_auth(url.username, url.password)}{url.host}/"
        f"{enc(topic)}{query(params)}",
        service="ntfy",
        title=url.get("title") or None,
    )


def generic(url: GoURL, *, custom: str = "") -> Destination:
    """``generic://`` (https unless disabletls) or ``generic+http(s)://`` (``custom`` = that scheme)."""
    headers: list[tuple[str, str]] = []
    fields: list[tuple[str, str]] = []
    forwarded: list[tuple[str, str]] = []
    seen: set[str] = set()
    for key, value in url.query:
        if key.lower() in seen:
            continue
        seen.add(key.lower())
        if key.startswith("@"):
            headers.append((dash_case(key[1:]), value))
        elif key.startswith("$"):
            fields.append((key[1:], value))
        elif key.lower() not in _GENERIC_KEYS:
            forwarded.append((key, value))
    secure = custom == "https" if custom else not flag(url, "disabletls", default=False)
    template = url.get("template").lower()
    method = url.get("method", "POST").upper()
    content_type = url.get("contenttype", "application/json")
    if template == "json":
        params = [(":version", ""), (":attachments", ""), (":type", "")]
        params.append((":title", url.get("titlekey", "title") if url.get("title") else ""))
        if url.get("messagekey", "message") != "message":
            params.append((":message", url.get("messagekey")))
        params += [(f":{k}", v) for k, v in fields] + [(f"+{k}", v) for k, v in headers]
        params += [(f"-{k}", v) for k, v in forwarded]
        if content_type != "application/json":
            params.append(("+Content-Type", content_type))
        if method != "POST":
            params.append(("method", method))
        scheme = "jsons" if secure else "json"
        auth = _auth(url.username, url.password)
        return AppriseTarget(
            url=f"{scheme}://{auth}{url.host}{enc(url.path, safe='/')}{query(params)}",
            service="generic",
            title=url.get("title") or None,
        )
    if template:
        raise ConfigError(f"generic: unknown template {url.get('template')!r} (only json is available)")
    all_headers = [("Content-Type", content_type), ("Accept", content_type), *headers]
    if url.username is not None:
        raw = f"{url.username}:{url.password or ''}".encode()
        all_headers.append(("Authorization", "Basic " + base64.b64encode(raw).decode()))
    target = f"{'https' if secure else 'http'}://{url.host}{enc(url.path, safe='/')}{query(forwarded)}"
    return NativeRequest(service="generic", method=method, url=target, headers=tuple(all_headers), body="raw")


_OPSGENIE_TARGETS = {"team": "#", "user": "@", "schedule": "*", "escalation": "^"}


def opsgenie(url: GoURL) -> Destination:
    keys = ("alias", "description", "responders", "visibleto", "actions", "tags", "details", "entity")
    check_keys(url, "opsgenie", (*keys, "source", "priority", "note", "user", "title"))
    regions = {"api.opsgenie.com": "us", "api.eu.opsgenie.com": "eu"}
    region = regions.get(url.hostname.lower())
    if region is None:
        raise not_convertible(
            "opsgenie", f"host {url.hostname!r} is not an Opsgenie API host", "api.opsgenie.com"
        )
    apikey = url.path.strip("/")
    if not apikey:
        raise ConfigError("opsgenie: no API key given (opsgenie://api.opsgenie.com/KEY)")
    targets = []
    for item in split_list(url.get("responders")):
        kind, _, name = item.partition(":")
        if kind.lower() not in _OPSGENIE_TARGETS or not name:
            raise ConfigError(f"opsgenie: invalid responder {item!r}")
        targets.append("/" + enc(_OPSGENIE_TARGETS[kind.lower()] + name, safe="@*^"))
    params = [("action", "new"), ("region", region)]
    priority = url.get("priority").upper()
    if priority:
        if priority not in ("P1", "P2", "P3", "P4", "P5"):
            raise ConfigError(f"opsgenie: invalid priority {url.get('priority')!r}")
        params.append(("priority", priority[1]))
    params += [(key, url.get(key)) for key in ("tags", "entity", "alias") if url.get(key)]
    for item in split_list(url.get("details")):
        key, _, value = item.partition(":")
        params.append((f"+{key}", value))
    return AppriseTarget(
        url=f"opsgenie://{enc(apikey)}{''.join(targets)}{query(params)}",
        service="opsgenie",
        title=url.get("title") or None,
    )


def pushbullet(url: GoURL) -> Destination:
    check_keys(url, "pushbullet", ("title",))
    targets = [s for s in url.path.split("/") if s] + (["#" + url.fragment] if url.fragment else [])
    path = "".join("/" + enc(t, safe="@") for t in targets)
    return AppriseTarget(
        url=f"pbul://{enc(url.hostname)}{path}", service="pushbullet", title=url.get("title") or None
    )


def join(url: GoURL) -> Destination:
    check_keys(url, "join", ("devices", "title", "icon"))
    devices = split_list(url.get("devices"))
    if not url.password or not devices:
        raise ConfigError("join: expected join://shoutrrr:api-key@join/?devices=…")
    path = "".join("/" + enc(d) for d in devices) + "?image=no"
    return AppriseTarget(
        url=f"join://{enc(url.password)}{path}", service="join", title=url.get("title") or None
    )


def ifttt(url: GoURL) -> Destination:
    check_keys(url, "ifttt", ("events", "value1", "value2", "value3", "messagevalue", "titlevalue", "title"))
    events = split_list(url.get("events"))
    if not events:
        raise ConfigError("ifttt: no events given (?events=…)")
    if url.get("messagevalue", "2") != "2" or url.get("titlevalue") or url.get("value1") or url.get("value3"):
        raise not_convertible(
            "ifttt", "custom value mapping has no apprise equivalent", "ifttt://KEY/?events=E"
        )
    path = "".join("/" + enc(e) for e in events)
    return AppriseTarget(
        url=f"ifttt://{enc(url.hostname)}{path}", service="ifttt", title=url.get("title") or None
    )


def bark(url: GoURL) -> Destination:
    check_keys(url, "bark", ("title", "scheme", "sound", "badge", "icon", "group", "url", "category", "copy"))
    if not url.username:
        raise ConfigError("bark: expected bark://devicekey@host")
    scheme = "bark" if url.get("scheme", "https").lower() == "http" else "barks"
    path = enc(url.path.rstrip("/"), safe="/")
    extras = ("sound", "badge", "group", "category")
    params = [("image", "no")] + [(key, url.get(key)) for key in extras if url.get(key)]
    return AppriseTarget(
        url=f"{scheme}://{url.host}{path}/{enc(url.username)}{query(params)}",
        service="bark",
        title=url.get("title") or None,
    )
