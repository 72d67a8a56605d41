"""Go ``net/url`` parsing as shoutrrr v0.8.0 sees a notification URL.

shoutrrr parses ``--notify-url`` with Go's ``url.Parse``. Python's ``urllib.parse`` differs in ways that
break tokens: ``.hostname`` lower-cases (``T00000000`` → ``t00000000``) and userinfo handling differs. So
this module splits the URL itself: userinfo ends at the **last** ``@`` of the authority, the port must be
digits (Go's ``invalid port ":x" after host``), the path and userinfo are percent-decoded, query keys are
matched case-insensitively (shoutrrr lower-cases them) and only the first value of a key counts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote, unquote_plus

from pykured.gocompat.goflags import GoValueError

__all__ = ["GoURL", "parse", "split_host"]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):(.*)$", re.DOTALL)


@dataclass(frozen=True, slots=True)
class GoURL:
    """A parsed URL; ``hostname`` keeps its case, ``query`` keeps order and original key case."""

    scheme: str
    username: str | None
    password: str | None
    hostname: str
    port: str
    path: str
    query: tuple[tuple[str, str], ...]
    fragment: str = ""

    @property
    def host(self) -> str:
        """``hostname[:port]`` as written (IPv6 literals get their brackets back)."""
        name = f"[{self.hostname}]" if ":" in self.hostname else self.hostname
        return f"{name}:{self.port}" if self.port else name

    def get(self, key: str, default: str = "") -> str:
        """First value of ``key``, matched case-insensitively like shoutrrr's config resolver."""
        wanted = key.lower()
        for name, value in self.query:
            if name.lower() == wanted:
                return value
        return default

    def has(self, key: str) -> bool:
        wanted = key.lower()
        return any(name.lower() == wanted for name, _ in self.query)

    def key_names(self) -> list[str]:
        """Distinct lower-cased query keys in order of appearance."""
        seen: list[str] = []
        for name, _ in self.query:
            if name.lower() not in seen:
                seen.append(name.lower())
        return seen


def _split_query(raw: str) -> tuple[tuple[str, str], ...]:
    pairs: list[tuple[str, str]] = []
    for part in raw.split("&"):
        if not part:
            continue
        if ";" in part:
            raise GoValueError("invalid semicolon separator in query")
        key, _, value = part.partition("=")
        pairs.append((unquote_plus(key), unquote_plus(value)))
    return tuple(pairs)


def split_host(hostport: str) -> tuple[str, str]:
    if hostport.startswith("["):
        close = hostport.find("]")
        if close < 0:
            raise GoValueError("missing ']' in host")
        name, rest = hostport[1:close], hostport[close + 1 :]
        if rest and (not rest.startswith(":") or not rest[1:].isdigit()):
            raise GoValueError(f'invalid port "{rest}" after host')
        return unquote(name), rest[1:]
    name, colon, port = hostport.rpartition(":")
    if not colon:
        return unquote(hostport), ""
    if port and not port.isdigit():
        raise GoValueError(f'invalid port ":{port}" after host')
    return unquote(name), port


def parse(url: str) -> GoURL:
    """Parse ``url`` with Go ``net/url`` semantics; a URL Go would reject raises :class:`GoValueError`."""
    match = _SCHEME.match(url)
    if not match:
        raise GoValueError("missing protocol scheme")
    scheme, rest = match.group(1).lower(), match.group(2)
    rest, _, fragment = rest.partition("#")
    rest, _, raw_query = rest.partition("?")
    username: str | None = None
    password: str | None = None
    hostname = port = ""
    if rest.startswith("//"):
        authority, slash, path_rest = rest[2:].partition("/")
        path = slash + path_rest
        userinfo, at, hostport = authority.rpartition("@")
        if at:
            user, colon, secret = userinfo.partition(":")
            username = unquote(user)
            password = unquote(secret) if colon else None
        hostname, port = split_host(hostport)
    else:
        path = rest
    return GoURL(
        scheme=scheme,
        username=username,
        password=password,
        hostname=hostname,
        port=port,
        path=unquote(path),
        query=_split_query(raw_query),
        fragment=unquote(fragment),
    )
