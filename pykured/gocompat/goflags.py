"""Go's value grammars, as kured's flags (spf13/pflag, Go's standard library) accept and print them.

Pure functions, standard library only. ``Duration`` is Go's ``time.Duration``: an integer count of
nanoseconds, parsed with ``time.ParseDuration``'s grammar and printed as ``Duration.String()`` prints it
(``1h0m0s``, ``30m0s``, ``1.5s``, ``0s``).
"""

from __future__ import annotations

import dataclasses

_INT64_MAX = (1 << 63) - 1
_UNITS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,  # U+00B5 micro sign
    "μs": 1_000,  # U+03BC Greek small letter mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}


class GoValueError(ValueError):
    """A value Go would reject; the message is Go's own error text."""


_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def go_quote(value: str) -> str:
    """Go ``strconv.Quote`` (what ``%q`` prints): double quotes, Go escapes, printable runes kept."""
    out = ['"']
    for ch in value:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif 0xDC80 <= code <= 0xDCFF:  # an undecodable byte carried by surrogateescape
            out.append(f"\\x{code - 0xDC00:02x}")
        elif ch == " " or ch.isprintable():
            out.append(ch)
        elif code < 0x80:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def parse_duration(text: str) -> int:
    """Go ``time.ParseDuration``: returns nanoseconds or raises :class:`GoValueError` with Go's message."""
    orig = text
    s = text
    neg = False
    if s and s[0] in "+-":
        neg = s[0] == "-"
        s = s[1:]
    if s == "0":
        return 0
    if not s:
        raise GoValueError(f"time: invalid duration {go_quote(orig)}")
    total = 0
    while s:
        if not (s[0] == "." or (s[0].isascii() and s[0].isdigit())):
            raise GoValueError(f"time: invalid duration {go_quote(orig)}")
        i = 0
        while i < len(s) and s[i].isascii() and s[i].isdigit():
            i += 1
        int_digits = s[:i]
        s = s[i:]
        frac_digits = ""
        if s.startswith("."):
            s = s[1:]
            j = 0
            while j < len(s) and s[j].isascii() and s[j].isdigit():
                j += 1
            frac_digits = s[:j]
            s = s[j:]
        if not int_digits and not frac_digits:
            raise GoValueError(f"time: invalid duration {go_quote(orig)}")
        k = 0
        while k < len(s) and s[k] != "." and not (s[k].isascii() and s[k].isdigit()):
            k += 1
        unit_text = s[:k]
        s = s[k:]
        if not unit_text:
            raise GoValueError(f"time: missing unit in duration {go_quote(orig)}")
        if unit_text not in _UNITS:
            raise GoValueError(f"time: unknown unit {go_quote(unit_text)} in duration {go_quote(orig)}")
        unit = _UNITS[unit_text]
        whole = int(int_digits) if int_digits else 0
        if whole * unit > _INT64_MAX + 1:
            raise GoValueError(f"time: invalid duration {go_quote(orig)}")
        value = whole * unit
        if frac_digits:
            # Go accumulates the fraction with truncation: floor(frac * unit / 10**len(frac)).
            value += int(frac_digits) * unit // (10 ** len(frac_digits))
        total += value
        if total > _INT64_MAX + (1 if neg else 0):
            raise GoValueError(f"time: invalid duration {go_quote(orig)}")
    if total > _INT64_MAX:
        if neg and total == _INT64_MAX + 1:
            return -total
        raise GoValueError(f"time: invalid duration {go_quote(orig)}")
    return -total if neg else total


def _fmt_frac(v: int, prec: int) -> tuple[str, int]:
    digits = []
    printed = False
    for _ in range(prec):
        digit = v % 10
        printed = printed or digit != 0
        if printed:
            digits.append(str(digit))
        v //= 10
    text = ("." + "".join(reversed(digits))) if printed else ""
    return text, v


def format_duration(ns: int) -> str:
    """Go ``time.Duration.String()``."""
    if ns == 0:
        return "0s"
    neg = ns < 0
    u = -ns if neg else ns
    if u < 1_000_000_000:
        if u < 1_000:
            out = f"{u}ns"
        elif u < 1_000_000:
            frac, whole = _fmt_frac(u, 3)
            out = f"{whole}{frac}µs"
        else:
            frac, whole = _fmt_frac(u, 6)
            out = f"{whole}{frac}ms"
    else:
        frac, secs = _fmt_frac(u, 9)
        out = f"{secs % 60}{frac}s"
        mins = secs // 60
        if mins > 0:
            out = f"{mins % 60}m{out}"
            hours = mins // 60
            if hours > 0:
                out = f"{hours}h{out}"
    return "-" + out if neg else out


@dataclasses.dataclass(frozen=True, slots=True, order=True)
class Duration:
    """A Go ``time.Duration``: whole nanoseconds."""

    ns: int = 0

    @classmethod
    def parse(cls, text: str) -> Duration:
        """Parse Go duration syntax (``1h30m``, ``90s``, ``0``)."""
        return cls(parse_duration(text))

    @classmethod
    def of_seconds(cls, seconds: float) -> Duration:
        """A duration of ``seconds`` (rounded to the nanosecond)."""
        return cls(round(seconds * 1_000_000_000))

    @property
    def seconds(self) -> float:
        """The duration in (fractional) seconds, for ``time.sleep`` and arithmetic."""
        return self.ns / 1_000_000_000

    def __bool__(self) -> bool:
        return self.ns != 0

    def __str__(self) -> str:
        return format_duration(self.ns)


_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def parse_bool(text: str) -> bool:
    """Go ``strconv.ParseBool``: exactly ``1 t T TRUE true True`` / ``0 f F FALSE false False``."""
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise GoValueError(f"strconv.ParseBool: parsing {go_quote(text)}: invalid syntax")


def format_bool(value: bool) -> str:
    """Go ``strconv.FormatBool``."""
    return "true" if value else "false"


def _underscores_ok(text: str) -> bool:
    """Go's rule: ``_`` only between digits, or between a base prefix and a digit."""
    s = text[1:] if text[:1] in "+-" else text
    saw = "^"
    i = 0
    hexa = False
    if len(s) >= 2 and s[0] == "0" and s[1].lower() in "box":
        i, saw, hexa = 2, "0", s[1].lower() == "x"
    for ch in s[i:]:
        if ch.isascii() and (ch.isdigit() or (hexa and ch.lower() in "abcdef")):
            saw = "0"
        elif ch == "_":
            if saw != "0":
                return False
            saw = "_"
        elif saw == "_":
            return False
        else:
            saw = "!"
    return saw != "_"


def parse_int(text: str, *, bits: int = 64) -> int:
    """Go ``strconv.ParseInt(text, 0, bits)``: sign, ``0x``/``0o``/``0b``/``0`` prefixes, ``_`` separators."""
    syntax = GoValueError(f"strconv.ParseInt: parsing {go_quote(text)}: invalid syntax")
    s = text
    neg = False
    if s[:1] in ("+", "-"):
        neg = s[0] == "-"
        s = s[1:]
    if not s:
        raise syntax
    base = 10
    if s[0] == "0":
        prefix = s[1:2].lower()
        if len(s) >= 3 and prefix in ("b", "o", "x"):
            base = {"b": 2, "o": 8, "x": 16}[prefix]
            s = s[2:]
        else:
            base = 8
            s = s[1:]
    value = 0
    underscores = False
    for ch in s:
        if ch == "_":
            underscores = True
            continue
        digit = int(ch, 36) if ch.isascii() and ch.isalnum() else 99
        if digit >= base:
            raise syntax
        value = value * base + digit
    if underscores and not _underscores_ok(text):
        raise syntax
    limit = 1 << (bits - 1)
    if (neg and value > limit) or (not neg and value >= limit):
        raise GoValueError(f"strconv.ParseInt: parsing {go_quote(text)}: value out of range")
    return -value if neg else value


def atoi(text: str) -> int:
    """Go ``strconv.Atoi`` (decimal only, optional sign, no ``_``), as kured's env loader uses for ints."""
    s = text[1:] if text[:1] in "+-" else text
    if not s or not all(ch in "0123456789" for ch in s):
        raise GoValueError(f"strconv.Atoi: parsing {go_quote(text)}: invalid syntax")
    value = int(text)
    if not -(1 << 63) <= value < (1 << 63):
        raise GoValueError(f"strconv.Atoi: parsing {go_quote(text)}: value out of range")
    return value
