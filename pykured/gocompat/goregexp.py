"""Go regular expressions (kured's ``--alert-filter-regexp``) compiled with RE2, the engine Go's is a port of.

kured compiles the alert filter with Go's ``regexp`` package, whose syntax and semantics are RE2's. pykured
compiles the same pattern with RE2 itself (the ``google-re2`` bindings; this is the one module that imports
them), so ``(?i)`` mid-pattern, ``(?U)``, ``\\pL`` and ``\\p{Greek}``, ``\\z``, ``$`` never matching before a
final newline, ASCII ``\\d \\w \\s \\b`` and every other construct mean what they mean to Go. Where Go and
RE2 disagree, pykured follows Go:

* RE2 accepts ``\\C`` (any byte) and named groups with non-ASCII names (``(?P<é>x)``); Go refuses them, and
  so does pykured, with Go's error;
* RE2's error texts are its own; pykured reports Go's: ``error parsing regexp: <Go's code>: `<argument>```
  (``missing ]`` becomes ``missing closing ]``, ``bad repetition operator`` becomes ``invalid nested
  repetition operator``, and so on), with the argument Go reports for the code where the two differ.

RE2's own logging of parse errors (absl, on stderr) is switched off: the caller reports the error once.
``tests/gocompat/test_goregexp_go.py`` holds this module to Go's ``regexp`` over thousands of generated
patterns and inputs; what still differs is listed in COMPATIBILITY.md.
"""

from __future__ import annotations

import functools
from typing import Any

from pykured.gocompat.goflags import GoValueError

_CODES = {  # RE2's error code texts -> Go's regexp/syntax ErrorCode texts
    "invalid escape sequence": "invalid escape sequence",
    "invalid character class": "invalid character class",
    "invalid character class range": "invalid character class range",
    "missing ]": "missing closing ]",
    "missing )": "missing closing )",
    "unexpected )": "unexpected )",
    "trailing \\": "trailing backslash at end of expression",
    "no argument for repetition operator": "missing argument to repetition operator",
    "invalid repetition size": "invalid repeat count",
    "bad repetition operator": "invalid nested repetition operator",
    "invalid perl operator": "invalid or unsupported Perl syntax",
    "invalid UTF-8": "invalid UTF-8",
    "invalid named capture group": "invalid named capture",
}
_WHOLE_PATTERN = frozenset({"missing closing )", "unexpected )"})
"""Go reports these with the whole pattern as the argument."""


class GoRegexp:
    """A compiled Go regular expression: :meth:`search` finds the leftmost match, as Go's ``FindString``."""

    __slots__ = ("_compiled", "pattern")

    def __init__(self, pattern: str, compiled: Any) -> None:
        self.pattern = pattern
        self._compiled = compiled

    def search(self, text: str) -> str | None:
        """The leftmost match in ``text`` (Go's leftmost-first semantics), or None when there is none.

        RE2 also tries empty matches between the bytes of a multi-byte character (``\\B`` holds there); Go
        only between characters: such a match is skipped and the search goes on after it.
        """
        data = _utf8(text)
        found = self._compiled.search(data)
        while found is not None and _inside_a_character(data, found.start(), found.end()):
            found = self._compiled.search(data, found.start() + 1)
        if found is None:
            return None
        matched: bytes = found.group(0)
        return matched.decode("utf-8", "replace")

    def __repr__(self) -> str:
        return f"GoRegexp({self.pattern!r})"


def _inside_a_character(data: bytes, start: int, end: int) -> bool:
    """An empty match at a UTF-8 continuation byte: between the bytes of one character."""
    return start == end < len(data) and 0x80 <= data[start] < 0xC0


def _utf8(text: str) -> bytes:
    """``text`` as UTF-8; a lone surrogate (not valid UTF-8) becomes U+FFFD, as Go decodes it."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode("utf-8")


def _fail(code: str, argument: str) -> GoValueError:
    return GoValueError(f"error parsing regexp: {code}: `{argument}`")


@functools.cache
def _options() -> Any:
    import re2

    options = re2.Options()
    options.log_errors = False  # RE2 would print each parse error on stderr through absl
    options.max_mem = 64 << 20
    return options


def _go_only_refusal(pattern: str) -> tuple[str, GoValueError] | None:
    """The first thing Go refuses and RE2 accepts, with the text before it (a class open there is closed):
    ``\\C``, and a named group (``(?P<`` or ``(?<``) without ``>`` or whose name is not ASCII letters,
    digits and ``_``."""
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            if pattern.startswith("\\Q", i):
                end = pattern.find("\\E", i + 2)
                if end < 0:
                    return None
                i = end + 2
                continue
            if pattern.startswith("\\C", i):
                return pattern[:i], _fail("invalid escape sequence", "\\C")
            i += 2
            continue
        if c == "[":
            end = _class_end(pattern, i)
            escape = _class_escape_c(pattern, i, end)
            if escape is not None:
                return pattern[:escape] + "]", _fail("invalid escape sequence", "\\C")
            i = end
            continue
        if pattern.startswith(("(?P<", "(?<"), i):
            rest = pattern[i:]
            if rest in ("(?P<", "(?<"):  # too short to be a named group to Go: a Perl flag error
                return pattern[:i], _fail("invalid or unsupported Perl syntax", rest[:3])
            begin = 4 if rest.startswith("(?P<") else 3
            end = rest.find(">")
            if end < 0:
                return pattern[:i], _fail("invalid named capture", rest)
            name = rest[begin:end]
            if not name or not all(ch == "_" or (ch.isascii() and ch.isalnum()) for ch in name):
                return pattern[:i], _fail("invalid named capture", rest[: end + 1])
        i += 1
    return None


def _class_escape_c(pattern: str, start: int, end: int) -> int | None:
    """The index of a ``\\C`` inside the class ``pattern[start:end]``, if any."""
    j = start + 1
    while j < end:
        if pattern.startswith("\\C", j):
            return j
        j += 2 if pattern[j] == "\\" else 1
    return None


def _class_end(pattern: str, i: int) -> int:
    """The index after the character class opening at ``i`` (its end, as Go's parser finds it)."""
    j = i + 1
    if pattern.startswith("^", j):
        j += 1
    if pattern.startswith("]", j):
        j += 1
    while j < len(pattern):
        if pattern.startswith("[:", j):
            end = pattern.find(":]", j + 2)
            if end >= 0:
                j = end + 2
                continue
        if pattern[j] == "\\":
            j += 2
            continue
        if pattern[j] == "]":
            return j + 1
        j += 1
    return j


def _re2_compile(source: bytes) -> Any:
    import re2

    return re2.compile(source, _options())


def compile_re2(pattern: str) -> GoRegexp:
    """Compile ``pattern`` as Go's ``regexp.Compile`` would (unanchored); raises :class:`GoValueError`.

    Go reports the first error in the pattern: a refusal of Go's own (:func:`_go_only_refusal`) wins unless
    RE2 finds an error in the text before it (other than the groups left open there).
    """
    import re2

    refusal = _go_only_refusal(pattern)
    if refusal is not None:
        before, error = refusal
        try:
            _re2_compile(before.encode("utf-8", "surrogateescape"))
        except re2.error as exc:
            earlier = _go_error(before, exc)
            if not str(earlier).startswith("error parsing regexp: missing closing ):"):
                try:  # an error before the refusal: RE2's reading of the whole pattern gives its argument
                    _re2_compile(pattern.encode("utf-8", "surrogateescape"))
                except re2.error as whole:
                    found = _go_error(pattern, whole)
                    raise (earlier if "missing closing ]" in str(found) else found) from None
        raise error
    try:
        compiled = _re2_compile(pattern.encode("utf-8", "surrogateescape"))
    except re2.error as exc:
        raise _go_error(pattern, exc) from None
    return GoRegexp(pattern, compiled)


def _go_error(pattern: str, exc: BaseException) -> GoValueError:
    raw = exc.args[0] if exc.args else ""
    text = raw.decode("utf-8", "surrogateescape") if isinstance(raw, bytes) else str(raw)
    code, _, argument = text.partition(": ")
    if code.startswith("pattern too large"):
        return _fail("expression too large", pattern)
    go_code = _CODES.get(code)
    if go_code is None:
        return GoValueError(f"error parsing regexp: {text}")
    if go_code in _WHOLE_PATTERN:
        argument = pattern
    if go_code == "trailing backslash at end of expression":
        argument = ""
    if go_code == "invalid repeat count" and argument.endswith("?"):  # RE2 includes the non-greedy mark
        argument = argument[:-1]
    if go_code == "invalid escape sequence" and argument.startswith("\\x") and argument[2:3] != "{":
        argument = _go_hex_escape(pattern, argument)
    return _fail(go_code, argument)


def _go_hex_escape(pattern: str, argument: str) -> str:
    """Go reads both characters after ``\\x`` before it refuses a two-digit hex escape; RE2 stops at the
    first that is not a hex digit. Go's argument is the escape with both characters."""
    i = 0
    while i < len(pattern):
        if pattern.startswith("\\Q", i):
            end = pattern.find("\\E", i + 2)
            if end < 0:
                break
            i = end + 2
        elif pattern[i] == "\\":
            if pattern.startswith(argument, i):
                return pattern[i : i + 4]
            i += 2
        else:
            i += 1
    return argument
