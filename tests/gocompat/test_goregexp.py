"""RE2 patterns for --alert-filter-regexp: translated to Python re, or refused with Go-style errors."""

from __future__ import annotations

import pytest

from pykured.gocompat.goflags import GoValueError
from pykured.gocompat.goregexp import compile_re2, translate


@pytest.mark.parametrize(
    ("pattern", "matches", "misses"),
    [
        ("^RebootRequired$", ["RebootRequired"], ["RebootRequired\n", "xRebootRequired"]),
        ("Pod", ["PodCrashing-dev", "PodRestart-dev"], ["GatekeeperViolations"]),
        ("Gatekeeper|Pod", ["GatekeeperViolations", "PodRestart-dev"], ["PrometheusTargetDown"]),
        ("(?i)pod", ["PodCrashing"], ["Gatekeeper"]),
        ("(?i:pod)x", ["PODx"], ["PODX"]),
        ("a\\z", ["ba"], ["a\n"]),
        ("(?m)^b$", ["a\nb\nc"], ["ab"]),
        ("(?m:a$)", ["a\nb"], ["ab"]),
        ("[[:alpha:]]+[[:digit:]]", ["abc1"], ["123", "é1"]),
        ("^[[:^digit:]]$", ["x", "é"], ["5"]),
        ("^\\d+$", ["123"], ["١٢٣"]),
        ("^\\w+$", ["abc_1"], ["é"]),
        ("^\\D$", ["١"], ["1"]),
        ("x\\b", ["x é", "xé"], ["xy"]),
        ("^\\Qa.b\\E$", ["a.b"], ["axb"]),
        ("^\\x{41}\\x42\\101$", ["ABA"], ["AB"]),
        ("^\\12$", ["\n"], ["\\12"]),
        ("^(?<name>x)$", ["x"], ["y"]),
        ("^(?P<name>x)$", ["x"], ["y"]),
        ("^a{,3}$", ["a{,3}"], ["aa"]),
        ("^a{2}$", ["aa"], ["a"]),
        ("^a{1,2}?$", ["a"], ["aaa"]),
        ("^[a&&b]$", ["&"], ["c"]),
        ("^[[]$", ["["], ["a"]),
        ("^[]a]$", ["]"], ["b"]),
        ("^[a\\-z]$", ["-"], ["b"]),
        ("", ["anything"], []),
    ],
    ids=lambda v: repr(v) if isinstance(v, str) else None,
)
def test_re2_semantics(pattern: str, matches: list[str], misses: list[str]) -> None:
    compiled = compile_re2(pattern)
    for text in matches:
        assert compiled.search(text), text
    for text in misses:
        assert not compiled.search(text), text


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("(?=x)", "invalid or unsupported Perl syntax: `(?=`"),
        ("(?!x)", "invalid or unsupported Perl syntax: `(?!`"),
        ("(?<=x)", "invalid or unsupported Perl syntax: `(?<`"),
        ("(?<!x)", "invalid or unsupported Perl syntax: `(?<`"),
        ("(?>x)", "invalid or unsupported Perl syntax: `(?>`"),
        ("(?P=n)", "invalid or unsupported Perl syntax: `(?P`"),
        ("(?#c)", "invalid or unsupported Perl syntax: `(?#`"),
        ("(?(1)a|b)", "invalid or unsupported Perl syntax: `(?(`"),
        ("(?x)a", "invalid or unsupported Perl syntax: `(?x`"),
        ("(a)\\1", "invalid escape sequence: `\\1`"),
        ("\\8", "invalid escape sequence: `\\8`"),
        ("a\\Z", "invalid escape sequence: `\\Z`"),
        ("\\e", "invalid escape sequence: `\\e`"),
        ("\\N{DASH}", "invalid escape sequence: `\\N`"),
        ("a*+", "invalid nested repetition operator: `*+`"),
        ("a++", "invalid nested repetition operator: `++`"),
        ("a**", "invalid nested repetition operator: `**`"),
        ("a*??", "invalid nested repetition operator: `*??`"),
        ("*", "missing argument to repetition operator: `*`"),
        ("a|*", "missing argument to repetition operator: `*`"),
        ("a{1001}", "invalid repeat count: `{1001}`"),
        ("[[:foo:]]", "invalid character class range: `[:foo:]`"),
        ("[a", "missing closing ]: `[a`"),
        ("a)", "unexpected ): `a)`"),
        ("\\", "trailing backslash at end of expression: ``"),
    ],
    ids=lambda v: repr(v),
)
def test_refused_like_go(pattern: str, message: str) -> None:
    with pytest.raises(GoValueError) as err:
        compile_re2(pattern)
    assert str(err.value) == f"error parsing regexp: {message}"


@pytest.mark.parametrize(
    ("pattern", "fragment"),
    [("(?U)a*", "(?U)"), ("\\pL", "Unicode classes"), ("\\p{Greek}", "Unicode classes"), ("a(?i)b", "start")],
    ids=["ungreedy", "unicode-class", "unicode-class-braces", "mid-pattern-flags"],
)
def test_refused_by_pykured_with_a_clear_message(pattern: str, fragment: str) -> None:
    with pytest.raises(GoValueError, match="pykured") as err:
        compile_re2(pattern)
    assert fragment in str(err.value)


@pytest.mark.parametrize(
    ("pattern", "message"),
    [("(", "missing closing ): `(`"), ("x((a)", "missing closing ): `x((a)`"), ("a)", "unexpected ): `a)`")],
    ids=["open", "nested-open", "close"],
)
def test_python_paren_errors_read_as_go_s(pattern: str, message: str) -> None:
    """Python's ``re`` finds these; the text is Go's regexp/syntax error (checked against kured's binary)."""
    with pytest.raises(GoValueError) as err:
        compile_re2(pattern)
    assert str(err.value) == f"error parsing regexp: {message}"


@pytest.mark.parametrize(
    ("pattern", "python"),
    [("a$", "a\\Z"), ("a\\z", "a\\Z"), ("(?<n>x)", "(?P<n>x)"), ("a{,3}", "a\\{,3}"), ("(?i)x", "(?i)x")],
    ids=["dollar", "z", "named-group", "literal-brace", "leading-flags"],
)
def test_translate(pattern: str, python: str) -> None:
    assert translate(pattern) == python
