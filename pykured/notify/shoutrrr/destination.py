"""Where a converted shoutrrr URL sends to: an apprise URL, or a request pykured makes itself.

Most shoutrrr services have an apprise plugin that makes the same request (:class:`AppriseTarget`). A few
have none — shoutrrr's raw ``generic://`` body and legacy Teams MessageCard webhooks — and are sent natively
as a :class:`NativeRequest`, whose body is rendered from the message exactly as shoutrrr renders it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

__all__ = ["AppriseTarget", "Destination", "NativeRequest"]

BodyKind = Literal["raw", "json", "teams"]


@dataclass(frozen=True, slots=True)
class AppriseTarget:
    """Send through apprise. ``title`` is the title shoutrrr would send (``None`` = none)."""

    url: str
    service: str
    title: str | None = None
    note: str = ""


@dataclass(frozen=True, slots=True)
class NativeRequest:
    """An HTTP request pykured makes itself with urllib.

    ``body`` selects the payload: ``raw`` = the message text, ``json`` = a JSON object of ``fields`` plus
    ``title_key``/``message_key``, ``teams`` = an Office 365 connector MessageCard.
    """

    service: str
    method: str
    url: str
    headers: tuple[tuple[str, str], ...]
    body: BodyKind = "raw"
    fields: tuple[tuple[str, str], ...] = ()
    message_key: str = "message"
    title_key: str = "title"
    title: str | None = None
    color: str = ""
    note: str = ""

    def render(self, message: str, *, title: str | None = None) -> bytes:
        """The request body for ``message`` (and ``title``, falling back to the URL's title)."""
        title = title if title is not None else self.title
        if self.body == "raw":
            return message.encode()
        if self.body == "json":
            payload = dict(self.fields)
            if title:
                payload[self.title_key] = title
            payload[self.message_key] = message
            return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
        return _teams_card(message, title=title or "", color=self.color)


def _teams_card(message: str, *, title: str, color: str) -> bytes:
    """shoutrrr's MessageCard: one section per line; summary = title or first line (max 20 chars)."""
    sections = [{"text": line} if line else {} for line in message.split("\n")]
    summary = title or message.split("\n", 1)[0][:20]
    card: dict[str, object] = {
        "@type": "MessageCard",
        "@context": "http://schema.org/extensions",
        "markdown": True,
    }
    if title:
        card["title"] = title
    if summary:
        card["summary"] = summary
    card["sections"] = sections
    if color:
        card["themeColor"] = color
    return json.dumps(card, separators=(",", ":"), ensure_ascii=False).encode()


Destination = AppriseTarget | NativeRequest
