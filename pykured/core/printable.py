"""Terminal-safe text: what pykured prints never drives the operator's terminal.

A reboot request's ``reason``, an agent's status, a lock holder's name are written by whoever may write a
Node or a Lease; printed raw, an escape sequence in one of them would move the cursor, rewrite lines, set the
window title or hide text on the operator's terminal. Every command's output passes through
:func:`terminal_safe` at its edge (:mod:`pykured.cli.output`), and each table cell through :func:`one_line`
(a newline in a cell would forge a row).

What is escaped, as ``\\uXXXX`` (which is also the JSON escape, so a JSON document stays valid JSON):

* C0 controls (U+0000-U+001F) but newline and tab where the output is meant to span lines, and DEL (U+007F)
  — ESC among them, so no escape sequence survives (its printable rest stays, harmless);
* C1 controls (U+0080-U+009F), single-character introducers of escape sequences on some terminals;
* the bidirectional overrides and isolates (U+202A-U+202E, U+2066-U+2069), which reorder what is shown;
* lone surrogates (U+D800-U+DFFF), which cannot be written as UTF-8 at all.

Pure, standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_UNSAFE = "\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff"
_MULTI_LINE = re.compile(f"[{_UNSAFE}]")
_ONE_LINE = re.compile(f"[\t\n{_UNSAFE}]")


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def terminal_safe(text: str) -> str:
    """``text`` with every unsafe character escaped; newlines and tabs are kept (multi-line output)."""
    return text if text.isprintable() else _MULTI_LINE.sub(_escape, text)


def one_line(text: str) -> str:
    """``text`` with every unsafe character escaped, newlines and tabs too (one table cell, one line)."""
    return text if text.isprintable() else _ONE_LINE.sub(_escape, text)


def cut(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters (the last one ``…`` when cut)."""
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def bounded_names(names: Sequence[str], *, limit: int = 10, each: int = 80, uncounted: int = 0) -> str:
    """Names for one log line or message, bounded whatever their number: ``ns/a, ns/b and 490 more`` (each
    cut at ``each`` characters and made one line, at most ``limit`` of them; ``uncounted``: how many more
    there are than ``names`` holds). A drain of 500 pods names ten, never a 100 KB line."""
    shown = [one_line(cut(name, each)) for name in names[:limit]]
    more = len(names) - len(shown) + max(0, uncounted)
    text = ", ".join(shown) if shown else "none"
    return text + (f" and {more} more" if more > 0 else "")
