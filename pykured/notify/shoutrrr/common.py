"""Helpers shared by the shoutrrr service converters: parsing, booleans, key checks, quoting, headers.

shoutrrr rejects a query key its service does not know (``… is not a valid config key``); pykured keeps that
rejection so an invalid kured configuration stays invalid.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import quote, urlencode

from pykured.core.errors import ConfigError
from pykured.gocompat import gourl
from pykured.gocompat.goflags import GoValueError
from pykured.gocompat.gourl import GoURL

__all__ = ["check_keys", "dash_case", "enc", "flag", "not_convertible", "parse", "query", "split_list"]

_TRUE = {"true", "1", "yes", "y"}
_FALSE = {"false", "0", "no", "n"}


def parse(url: str) -> GoURL:
    """``url`` parsed as shoutrrr's Go ``url.Parse`` does; a URL Go rejects raises :class:`ConfigError`."""
    try:
        return gourl.parse(url)
    except GoValueError as exc:
        raise ConfigError(str(exc)) from exc


def flag(url: GoURL, key: str, default: bool) -> bool:
    """A shoutrrr boolean query value: ``true/1/yes/y`` or ``false/0/no/n`` (any case), else ``default``."""
    raw = url.get(key).strip().lower()
    if not raw:
        return default
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise ConfigError(f"invalid boolean value {raw!r} for {key}")


def check_keys(url: GoURL, service: str, allowed: Iterable[str]) -> None:
    """Raise like shoutrrr when ``url`` carries a query key ``service`` does not define."""
    known = {key.lower() for key in allowed}
    for key in url.key_names():
        if key not in known:
            raise ConfigError(f"{service}: {key!r} is not a valid config key")


def enc(value: str, safe: str = "") -> str:
    """Percent-encode one URL component (``#``, ``/``, ``@`` and ``:`` included unless ``safe``)."""
    return quote(value, safe=safe)


def query(pairs: Iterable[tuple[str, str]]) -> str:
    """``?k=v&…`` (empty string when there are no pairs); ``:`` ``+`` ``-`` key prefixes survive."""
    items = list(pairs)
    return "?" + urlencode(items, safe=":+-,@") if items else ""


def split_list(value: str) -> list[str]:
    """shoutrrr's comma-separated list values, blanks dropped."""
    return [item.strip() for item in value.split(",") if item.strip()]


def dash_case(name: str) -> str:
    """shoutrrr's header key conversion: ``acceptLanguage`` → ``Accept-Language``."""
    parts: list[str] = []
    current = ""
    for char in name:
        if char == "-":
            if current:
                parts.append(current)
            current = ""
        elif char.isupper() and current:
            parts.append(current)
            current = char
        else:
            current += char
    if current:
        parts.append(current)
    return "-".join(part[:1].upper() + part[1:] for part in parts)


def not_convertible(service: str, why: str, instead: str) -> ConfigError:
    """The error for a shoutrrr URL pykured cannot send: what is wrong and what to use instead."""
    return ConfigError(f"{service}: {why}; use {instead} instead")
