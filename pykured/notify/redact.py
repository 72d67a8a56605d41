"""Hiding secrets in URLs before they are printed (log lines, ``--dump-config``, ``notify-test``).

kured logs ``--notify-url`` and ``--slack-hook-url`` values verbatim in its "Cannot use both" warning, and
notification URLs carry their credentials in the userinfo, the path (Slack/Teams/Mattermost tokens), the query
(``?token=``) or the fragment. :func:`redact_url` is the one redactor for them: it splits the URL as Go's
``net/url`` does (the way shoutrrr reads it, :mod:`pykured.gocompat.gourl`) and keeps only what identifies the
destination: the scheme, the host and port, the path's shape and the query *keys*. Every userinfo, path
segment, query value and fragment that is present becomes ``REDACTED``; a URL whose host part does not parse
(a secret may sit where the host should be) is ``REDACTED`` as a whole.

:func:`redact_password` is for URLs whose path is not a secret (``--prometheus-url``): only the password of
the userinfo is hidden.
"""

from __future__ import annotations

import re
import urllib.parse

from pykured.gocompat.goflags import GoValueError
from pykured.gocompat.gourl import split_host

__all__ = ["REDACTED", "redact_password", "redact_url"]

REDACTED = "REDACTED"
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):(.*)$", re.DOTALL)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def redact_url(url: str) -> str:
    """``url`` safe to log: userinfo, path segments, query values and fragment replaced by ``REDACTED``.

    ``gotify://h/t#f`` becomes ``gotify://h/REDACTED#REDACTED``; an empty string stays empty; anything that
    is not ``scheme://host…`` (or has control characters, or a host Go would reject) is ``REDACTED``.
    """
    if not url:
        return url
    match = _SCHEME.match(url)
    if not match or _CONTROL.search(url):
        return REDACTED
    scheme, rest = match.group(1).lower(), match.group(2)
    rest, _, fragment = rest.partition("#")
    rest, _, raw_query = rest.partition("?")
    if not rest.startswith("//"):
        return REDACTED
    authority, slash, path = rest[2:].partition("/")
    _, at, hostport = authority.rpartition("@")
    if not authority:
        return REDACTED
    try:
        split_host(hostport)
    except GoValueError:
        return REDACTED
    out = f"{scheme}://" + (f"{REDACTED}@" if at else "") + hostport
    if slash:
        out += "/" + "/".join(REDACTED if segment else "" for segment in path.split("/"))
    if raw_query:
        out += "?" + "&".join(
            f"{key}={REDACTED}" if eq else key
            for key, eq, _ in (item.partition("=") for item in raw_query.split("&") if item)
        )
    if fragment:
        out += f"#{REDACTED}"
    return out


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
