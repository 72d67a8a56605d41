"""Go RE2 regular expressions (kured's ``--alert-filter-regexp``) compiled with Python's :mod:`re`.

kured compiles the alert filter with Go's ``regexp`` package (RE2 syntax). Python's ``re`` accepts a different
language, and some patterns mean different things in the two, so this module translates the RE2 pattern into
an equivalent Python pattern and **refuses** what it cannot translate faithfully. Errors carry Go's wording
where Go itself rejects the pattern (``error parsing regexp: invalid or unsupported Perl syntax: `(?=```), so
the operator sees the same message kured would print.

Translated: ``\\z`` → ``\\Z``; ``$`` outside ``(?m)`` → ``\\Z`` (Go's ``$`` does not match before a final
newline); ``\\d \\w \\s \\b`` and their negations → ASCII-only forms (Go's are ASCII); POSIX classes
``[[:alpha:]]`` and ``[[:^alpha:]]`` → ranges; ``\\Q…\\E`` → escaped text; ``\\x{…}`` and octal ``\\123`` →
Python escapes; ``(?<name>`` → ``(?P<name>``; a ``{`` that is not a Go repetition → literal ``\\{``; ``[`` and
doubled ``& - | ~`` inside a class are escaped (Python would warn about set operations).

Refused (Go rejects them too): lookaround ``(?=`` ``(?!`` ``(?<=`` ``(?<!``, atomic ``(?>``, ``(?P=name)``,
comments ``(?#``, conditionals, backreferences ``\\1``, ``\\Z``, possessive/nested repetition ``a*+``, unknown
escapes. Refused although Go accepts them (pykured cannot mirror them in ``re``): ``(?U)``, Unicode classes
``\\p{…}``, and flag groups ``(?i)`` after the start of the pattern (write ``(?i:…)`` instead).
"""

from __future__ import annotations

import re

from pykured.gocompat.goflags import GoValueError

_ASCII_CLASSES = {
    "alnum": [(0x30, 0x39), (0x41, 0x5A), (0x61, 0x7A)],
    "alpha": [(0x41, 0x5A), (0x61, 0x7A)],
    "ascii": [(0x00, 0x7F)],
    "blank": [(0x09, 0x09), (0x20, 0x20)],
    "cntrl": [(0x00, 0x1F), (0x7F, 0x7F)],
    "digit": [(0x30, 0x39)],
    "graph": [(0x21, 0x7E)],
    "lower": [(0x61, 0x7A)],
    "print": [(0x20, 0x7E)],
    "punct": [(0x21, 0x2F), (0x3A, 0x40), (0x5B, 0x60), (0x7B, 0x7E)],
    "space": [(0x09, 0x0D), (0x20, 0x20)],
    "upper": [(0x41, 0x5A)],
    "word": [(0x30, 0x39), (0x41, 0x5A), (0x61, 0x7A), (0x5F, 0x5F)],
    "xdigit": [(0x30, 0x39), (0x41, 0x46), (0x61, 0x66)],
}
_PERL_CLASSES = {
    "d": _ASCII_CLASSES["digit"],
    "s": [(0x09, 0x0A), (0x0C, 0x0D), (0x20, 0x20)],
    "w": _ASCII_CLASSES["word"],
}
_SIMPLE_ESCAPES = frozenset("afnrtv")
_REPEAT = re.compile(r"\{(\d+)(,(\d*))?\}")
_FLAGS = re.compile(r"\(\?([A-Za-z]*)(?:-([A-Za-z]*))?([:)])")


def _fail(what: str) -> GoValueError:
    return GoValueError(f"error parsing regexp: {what}")


def _ranges(spans: list[tuple[int, int]], *, negate: bool) -> str:
    if negate:
        spans = sorted(spans)
        out: list[tuple[int, int]] = []
        low = 0
        for start, end in spans:
            if start > low:
                out.append((low, start - 1))
            low = max(low, end + 1)
        if low <= 0x10FFFF:
            out.append((low, 0x10FFFF))
        spans = out
    return "".join(f"\\U{a:08x}" if a == b else f"\\U{a:08x}-\\U{b:08x}" for a, b in spans)


def _char(code: int) -> str:
    return f"\\U{code:08x}"


class _Translator:
    def __init__(self, pattern: str) -> None:
        self.p = pattern
        self.i = 0
        self.out: list[str] = []
        self.multiline = [False]  # (?m) state per open group
        self.prev = "none"  # what a repetition operator would apply to: none, atom or repeat

    def run(self) -> str:
        while self.i < len(self.p):
            self.step()
        return "".join(self.out)

    def emit(self, text: str, *, prev: str = "atom") -> None:
        self.out.append(text)
        self.prev = prev

    def escape(self, *, in_class: bool) -> str:
        p, i = self.p, self.i
        if i + 1 >= len(p):
            raise _fail("trailing backslash at end of expression: ``")
        c = p[i + 1]
        self.i = i + 2
        if c == "0" or (c in "1234567" and i + 2 < len(p) and p[i + 2] in "01234567"):
            j = self.i
            while j < len(p) and j < self.i + 2 and p[j] in "01234567":
                j += 1
            code = int(p[i + 1 : j], 8)
            self.i = j
            return _char(code)
        if c.isdigit():
            raise _fail(f"invalid escape sequence: `\\{c}`")
        if c == "x":
            if p.startswith("{", self.i):
                end = p.find("}", self.i)
                digits = p[self.i + 1 : end] if end > 0 else ""
                if not digits or not re.fullmatch(r"[0-9A-Fa-f]+", digits) or int(digits, 16) > 0x10FFFF:
                    raise _fail(f"invalid escape sequence: `{p[i : (end + 1) if end > 0 else len(p)]}`")
                self.i = end + 1
                return _char(int(digits, 16))
            digits = p[self.i : self.i + 2]
            if not re.fullmatch(r"[0-9A-Fa-f]{2}", digits):
                raise _fail(f"invalid escape sequence: `{p[i : self.i + 2]}`")
            self.i += 2
            return _char(int(digits, 16))
        if c.lower() in _PERL_CLASSES:
            spans = _PERL_CLASSES[c.lower()]
            body = _ranges(spans, negate=c.isupper())
            return body if in_class else f"[{body}]"
        if c in "bB" and not in_class:
            return f"(?a:\\{c})"
        if c == "A" and not in_class:
            return "\\A"
        if c == "z" and not in_class:
            return "\\Z"
        if c in _SIMPLE_ESCAPES:
            return "\\" + c
        if c in "pP":
            raise _fail(f"pykured does not support Unicode classes: `{p[i : i + 3]}`")
        if c.isascii() and not c.isalnum():
            return re.escape(c)
        raise _fail(f"invalid escape sequence: `\\{c}`")

    def char_class(self) -> None:
        p = self.p
        j = self.i + 1
        parts = ["["]
        if p.startswith("^", j):
            parts.append("^")
            j += 1
        first = True
        while True:
            if j >= len(p):
                raise _fail(f"missing closing ]: `{p[self.i :]}`")
            c = p[j]
            if c == "]" and not first:
                j += 1
                break
            first = False
            if c == "[" and p.startswith("[:", j):
                end = p.find(":]", j + 2)
                name = p[j + 2 : end] if end > 0 else ""
                negate = name.startswith("^")
                if end < 0 or name.lstrip("^") not in _ASCII_CLASSES:
                    raise _fail(f"invalid character class range: `{p[j : end + 2 if end > 0 else len(p)]}`")
                parts.append(_ranges(_ASCII_CLASSES[name.lstrip("^")], negate=negate))
                j = end + 2
            elif c == "\\":
                self.i = j
                parts.append(self.escape(in_class=True))
                j = self.i
            elif c in "[&~|" or (c == "-" and p.startswith("--", j)):
                parts.append("\\" + c)
                j += 1
            else:
                parts.append(c)
                j += 1
        parts.append("]")
        self.i = j
        self.emit("".join(parts))

    def group(self) -> None:
        p, i = self.p, self.i
        if not p.startswith("(?", i):
            self.multiline.append(self.multiline[-1])
            self.i += 1
            self.emit("(", prev="none")
            return
        for prefix in ("(?P<", "(?<"):
            if p.startswith(prefix, i) and not p.startswith(("(?<=", "(?<!"), i):
                self.multiline.append(self.multiline[-1])
                self.i += len(prefix)
                self.emit("(?P<", prev="none")
                return
        flags = _FLAGS.match(p, i)
        if flags is None or not set(flags.group(1) + (flags.group(2) or "")) <= set("imsU"):
            raise _fail(f"invalid or unsupported Perl syntax: `{p[i : i + 3]}`")
        on, off, end = flags.group(1), flags.group(2) or "", flags.group(3)
        if "U" in on + off:
            raise _fail("pykured does not support the (?U) ungreedy flag")
        multiline = (self.multiline[-1] or "m" in on) and "m" not in off
        self.i = flags.end()
        if end == ":":
            self.multiline.append(multiline)
            neg = f"-{off}" if off else ""
            self.emit(f"(?{on}{neg}:" if on or off else "(?:", prev="none")
            return
        if "".join(self.out) or len(self.multiline) > 1:
            raise _fail(f"pykured accepts `(?{on})` only at the start of the pattern; use `(?{on}:…)`")
        self.multiline[-1] = multiline
        if on:
            self.emit(f"(?{on})", prev="none")

    def step(self) -> None:
        p, i = self.p, self.i
        c = p[i]
        if c in "*+?" or (c == "{" and _REPEAT.match(p, i)):
            span = _REPEAT.match(p, i)
            op = span.group(0) if span else c
            if self.prev == "none":
                raise _fail(f"missing argument to repetition operator: `{op}`")
            if span and max(int(span.group(1)), int(span.group(3) or 0)) > 1000:
                raise _fail(f"invalid repeat count: `{op}`")
            self.i += len(op)
            if p.startswith("?", self.i):
                op += "?"
                self.i += 1
            if self.i < len(p) and (p[self.i] in "*+?" or _REPEAT.match(p, self.i)):
                raise _fail(f"invalid nested repetition operator: `{op}{p[self.i]}`")
            self.emit(op, prev="repeat")
        elif c == "\\":
            if p.startswith("\\Q", i):
                end = p.find("\\E", i + 2)
                literal = p[i + 2 :] if end < 0 else p[i + 2 : end]
                self.i = len(p) if end < 0 else end + 2
                if literal:
                    self.emit("".join(re.escape(ch) for ch in literal))
                return
            self.emit(self.escape(in_class=False))
        elif c == "[":
            self.char_class()
        elif c == "(":
            self.group()
        elif c == ")":
            if len(self.multiline) == 1:
                raise _fail(f"unexpected ): `{p}`")
            self.multiline.pop()
            self.i += 1
            self.emit(")")
        elif c == "|":
            self.i += 1
            self.emit("|", prev="none")
        elif c == "$":
            self.i += 1
            self.emit("$" if self.multiline[-1] else "\\Z")
        elif c == "{":
            self.i += 1
            self.emit("\\{")
        else:
            self.i += 1
            self.emit(c)


def translate(pattern: str) -> str:
    """The Python ``re`` pattern equivalent to the RE2 ``pattern``; raises :class:`GoValueError`."""
    return _Translator(pattern).run()


def compile_re2(pattern: str) -> re.Pattern[str]:
    """Compile an RE2 pattern as Go would (unanchored; use ``^…$``); raises :class:`GoValueError`."""
    translated = translate(pattern)
    try:
        return re.compile(translated)
    except re.error as exc:
        message = str(exc)
        if message.startswith("missing ), unterminated subpattern"):
            message = f"missing closing ): `{pattern}`"
        elif message.startswith("unbalanced parenthesis"):
            message = f"unexpected ): `{pattern}`"
        raise _fail(message) from exc
