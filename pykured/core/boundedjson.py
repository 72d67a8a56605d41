"""JSON from the cluster or the network, read within bounds: the one decoder of every record pykured reads
from an object and of every JSON body a peer sends (a Prometheus answer, a FleetLock request).

Every value a Node, ConfigMap or Lease carries was written by someone else and is hostile until parsed. The
standard library's :func:`json.loads` recurses once per nesting level, so a few kilobytes of ``[`` raise
:class:`RecursionError` (not :class:`ValueError`) out of any parser that trusts it; a huge value costs time
and memory in proportion. :func:`loads` checks the size and the nesting depth *before* decoding, and is
total: any input that is not JSON within the bounds raises :class:`UnreadableJSON` (a :class:`ValueError`),
never anything else.

* Size: the text's length in characters (an annotation is at most 256 KiB on the API server; a record
  pykured writes is far below :data:`MAX_CHARS`); bytes from the network are counted before they are decoded
  (and must be UTF-8).
* Depth: counted without recursion. String literals are removed first (a bracket inside a string does not
  nest), then everything but brackets, and one scan counts the open ones, stopping at the first past the
  bound; brackets that do not balance are refused too (not JSON).
* Text: a lone surrogate (raw, or a ``\\uD800`` escape decoded) cannot be written back as UTF-8 or printed;
  such a value is refused. ``NaN`` and ``Infinity`` are not JSON (Go's ``encoding/json`` refuses them) and
  are refused too.

Pure, standard library only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

MAX_CHARS = 64 * 1024
"""The default size bound (characters): pykured's own records are a few hundred."""
MAX_DEPTH = 16
"""The default nesting bound: pykured's records nest at most four deep (kured's multi-owner lock)."""

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
"""A string literal, or an unterminated one to the end of the text: it matches from any quote at the first
try (no backtracking, so no quadratic time on many unterminated quotes)."""
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


class UnreadableJSON(ValueError):
    """The text is not JSON within the bounds (the message says which bound or what is wrong)."""


def depth_within(text: str, max_depth: int) -> bool:
    """Whether the brackets of ``text`` (outside strings) nest at most ``max_depth`` deep and balance.

    Never recurses: one scan of the bracket text, stopped at the first bracket past ``max_depth`` (a hostile
    value costs ``max_depth`` steps, not its length). Which kind closes which is left to the parser."""
    depth = 0
    for bracket in _NOT_BRACKET.sub("", _STRING.sub("", text)):
        if bracket in "[{":
            depth += 1
            if depth > max_depth:
                return False
        else:
            depth -= 1
            if depth < 0:
                return False
    return depth == 0


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def loads(
    text: object,
    *,
    max_chars: int = MAX_CHARS,
    max_depth: int = MAX_DEPTH,
    object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None,
) -> Any:
    """Decode ``text`` (or UTF-8 bytes) as JSON within the bounds; :class:`UnreadableJSON` otherwise (never
    anything else). The message is short and never echoes the input."""
    if isinstance(text, bytes):
        if len(text) > max_chars:
            raise UnreadableJSON(f"{len(text)} bytes, more than {max_chars}")
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise UnreadableJSON("not UTF-8") from None
    if not isinstance(text, str):
        raise UnreadableJSON(f"not text but {type(text).__name__}")
    if len(text) > max_chars:
        raise UnreadableJSON(f"{len(text)} characters, more than {max_chars}")
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise UnreadableJSON("not valid Unicode text (a lone surrogate)") from None
    if not depth_within(text, max_depth):
        raise UnreadableJSON(f"nested deeper than {max_depth} (or brackets that do not match)")
    try:
        value = json.loads(text, object_pairs_hook=object_pairs_hook, parse_constant=_reject_constant)
        if "\\u" in text:  # an escaped lone surrogate decodes to one; it cannot be written back
            json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise UnreadableJSON("not valid Unicode text (an escaped lone surrogate)") from None
    except (ValueError, RecursionError, TypeError) as exc:
        raise UnreadableJSON(f"not JSON: {_short(str(exc))}") from None
    return value


def _short(message: str, limit: int = 120) -> str:
    return message if len(message) <= limit else message[: limit - 1] + "…"
