"""Hiding secrets in URLs before they are printed (``--dump-config``, warnings).

kured logs ``--notify-url`` and ``--slack-hook-url`` values verbatim in its "Cannot use both" warning, and
notification URLs carry their credentials in the userinfo, the path (Slack/Teams/Mattermost tokens) or the
query (``?token=``). pykured keeps only what identifies the destination: the scheme, the host and the query
*keys*. Everything else that is present becomes ``REDACTED``.
"""

from __future__ import annotations

import urllib.parse

REDACTED = "REDACTED"


def redact_secret_url(url: str) -> str:
    """A notification URL with userinfo, path segments, query values and fragment replaced by ``REDACTED``."""
    if not url:
        return url
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return REDACTED
    if not parts.scheme or not parts.netloc:
        return REDACTED
    userinfo, at, hostport = parts.netloc.rpartition("@")
    netloc = f"{REDACTED}@{hostport}" if at and userinfo else hostport
    path = "/".join(REDACTED if segment else "" for segment in parts.path.split("/"))
    query = "&".join(
        f"{key}={REDACTED}" if eq else key
        for key, eq, _ in (item.partition("=") for item in parts.query.split("&") if item)
    )
    fragment = REDACTED if parts.fragment else ""
    return urllib.parse.urlunsplit((parts.scheme, netloc, path, query, fragment))


def redact_password(url: str) -> str:
    """A URL with only the password of its userinfo replaced (``http://user:REDACTED@host/path``)."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return REDACTED
    userinfo, at, hostport = parts.netloc.rpartition("@")
    user, colon, _ = userinfo.partition(":")
    if not at or not colon:
        return url
    netloc = f"{user}:{REDACTED}@{hostport}"
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
