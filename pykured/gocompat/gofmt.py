"""Go ``fmt.Sprintf`` for string arguments: how kured renders its notification templates.

kured builds every notification with ``fmt.Sprintf(template, nodeName)``. Operators write these templates
(``--message-template-drain`` …), so pykured must produce byte-identical text, including Go's in-band error
markers: a template without a verb yields ``Rebooting%!(EXTRA string=node-1)``, a second ``%s`` yields
``%!s(MISSING)``, and a verb that does not suit a string yields ``%!d(string=node-1)``.

Only string arguments exist in kured's calls, so only the verbs and flags that matter for strings are
implemented: ``%s``, ``%v``, ``%q``, ``%x``/``%X`` (hex of the bytes), ``%%``, the ``-`` flag, width and
precision. ``*`` widths (which need an int argument) are not supported. :func:`go_list` is ``%v`` of a
``[]string``, as kured prints a list of names in a message.
"""

from __future__ import annotations

from collections.abc import Sequence

from pykured.gocompat.goflags import go_quote

__all__ = ["go_list", "sprintf"]

_FLAGS = "+-# 0"
_STRING_VERBS = "svqxX"


def _format_one(verb: str, arg: str, *, flags: str, width: int | None, precision: int | None) -> str:
    if verb in "sv":
        text = arg if precision is None else arg[:precision]
    elif verb == "q":
        text = go_quote(arg if precision is None else arg[:precision])
    else:  # x / X
        raw = arg.encode() if precision is None else arg.encode()[:precision]
        text = raw.hex() if verb == "x" else raw.hex().upper()
    if width is not None and len(text) < width:
        pad = width - len(text)
        if "-" in flags:
            text += " " * pad
        elif "0" in flags and verb in "sv":
            text = "0" * pad + text
        else:
            text = " " * pad + text
    return text


def _read_number(template: str, pos: int) -> tuple[int | None, int]:
    start = pos
    while pos < len(template) and template[pos].isdigit():
        pos += 1
    return (int(template[start:pos]) if pos > start else None), pos


def sprintf(template: str, *args: str) -> str:
    """Render ``template`` with ``args`` exactly as Go's ``fmt.Sprintf`` does for string arguments."""
    out: list[str] = []
    used = 0
    pos = 0
    end = len(template)
    while pos < end:
        pct = template.find("%", pos)
        if pct < 0:
            out.append(template[pos:])
            break
        out.append(template[pos:pct])
        pos = pct + 1
        if pos >= end:
            out.append("%!(NOVERB)")
            break
        flags = ""
        while pos < end and template[pos] in _FLAGS:
            flags += template[pos]
            pos += 1
        width, pos = _read_number(template, pos)
        precision: int | None = None
        if pos < end and template[pos] == ".":
            precision, pos = _read_number(template, pos + 1)
            precision = precision or 0
        if pos >= end:
            out.append("%!(NOVERB)")
            break
        verb = template[pos]
        pos += 1
        if verb == "%":
            out.append("%")
            continue
        if used >= len(args):
            out.append(f"%!{verb}(MISSING)")
            continue
        arg = args[used]
        used += 1
        if verb in _STRING_VERBS:
            out.append(_format_one(verb, arg, flags=flags, width=width, precision=precision))
        else:
            out.append(f"%!{verb}(string={arg})")
    if used < len(args):
        extras = ", ".join(f"string={arg}" for arg in args[used:])
        out.append(f"%!(EXTRA {extras})")
    return "".join(out)


def go_list(items: Sequence[str]) -> str:
    """Go's ``%v`` of a ``[]string``: ``[a b c]``."""
    return "[" + " ".join(items) + "]"
