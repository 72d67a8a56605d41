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


def _quote(value: str) -> str:
    out = []
    for ch in value:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


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
        raise GoValueError(f"time: invalid duration {_quote(orig)}")
    total = 0
    while s:
        if not (s[0] == "." or s[0].isascii() and s[0].isdigit()):
            raise GoValueError(f"time: invalid duration {_quote(orig)}")
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
            raise GoValueError(f"time: invalid duration {_quote(orig)}")
        k = 0
        while k < len(s) and s[k] != "." and not (s[k].isascii() and s[k].isdigit()):
            k += 1
        unit_text = s[:k]
        s = s[k:]
        if not unit_text:
            raise GoValueError(f"time: missing unit in duration {_quote(orig)}")
        if unit_text not in _UNITS:
            raise GoValueError(f"time: unknown unit {_quote(unit_text)} in duration {_quote(orig)}")
        unit = _UNITS[unit_text]
        whole = int(int_digits) if int_digits else 0
        if whole * unit > _INT64_MAX + 1:
            raise GoValueError(f"time: invalid duration {_quote(orig)}")
        value = whole * unit
        if frac_digits:
            # Go accumulates the fraction with truncation: floor(frac * unit / 10**len(frac)).
            value += int(frac_digits) * unit // (10 ** len(frac_digits))
        total += value
        if total > _INT64_MAX + (1 if neg else 0):
            raise GoValueError(f"time: invalid duration {_quote(orig)}")
    if total > _INT64_MAX:
        if neg and total == _INT64_MAX + 1:
            return -total
        raise GoValueError(f"time: invalid duration {_quote(orig)}")
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
