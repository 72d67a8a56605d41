"""Go patterns for --alert-filter-regexp, compiled with RE2: Go's meaning, or refused with Go's error text.

Every expectation here was checked against Go's ``regexp`` (the ``goregexp`` oracle); the generated
differential is ``test_goregexp_go.py``.
"""

from __future__ import annotations

import pytest

from pykured.gocompat.goflags import GoValueError
from pykured.gocompat.goregexp import compile_re2


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
        ("^(?i)watchdog|info$", ["WatchDog", "xinfo"], ["infox", "xwatchdog"]),
        ("a(?i)b", ["aB"], ["AB"]),
        ("^(?U)a+", ["a"], []),
        ("^\\p{Greek}+$", ["λόγος"], ["logos"]),
        ("^\\pL\\PL$", ["é1"], ["11"]),
        ("^\\p{Lu}$", ["Ω"], ["ω"]),
        ("(?i)k", ["\u212a"], ["x"]),
        ("^.$", ["😀"], ["\n"]),
        ("(?s)^.$", ["\n"], []),
        ("^(?P<n>a)(?P<n>b)$", ["ab"], []),
    ],
    ids=lambda v: repr(v) if isinstance(v, str) else None,
)
def test_re2_semantics(pattern: str, matches: list[str], misses: list[str]) -> None:
    compiled = compile_re2(pattern)
    for text in matches:
        assert compiled.search(text) is not None, text
    for text in misses:
        assert compiled.search(text) is None, text


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("(?=x)", "invalid or unsupported Perl syntax: `(?=`"),
        ("(?!x)", "invalid or unsupported Perl syntax: `(?!`"),
        ("(?<=x)", "invalid named capture: `(?<=x)`"),
        ("(?<!x)", "invalid named capture: `(?<!x)`"),
        ("(?<", "invalid or unsupported Perl syntax: `(?<`"),
        ("(?P<", "invalid or unsupported Perl syntax: `(?P`"),
        ("(?P<é>x)", "invalid named capture: `(?P<é>`"),
        ("(?<é>", "invalid named capture: `(?<é>`"),
        ("x\\C", "invalid escape sequence: `\\C`"),
        ("[\\C]", "invalid escape sequence: `\\C`"),
        ("[a\\C", "invalid escape sequence: `\\C`"),
        ("[z-a\\C]", "invalid character class range: `z-a`"),
        ("x{2,1}(?<é>", "invalid repeat count: `{2,1}`"),
        ("\\p{x(?<é>", "invalid character class range: `\\p{x(?<é>`"),
        ("\\xZ1", "invalid escape sequence: `\\xZ1`"),
        ("a{2,1}?", "invalid repeat count: `{2,1}`"),
        ("(a{500}){500}", "invalid repeat count: `{500}`"),
        ("\\p{Foo}", "invalid character class range: `\\p{Foo}`"),
        ("[z-a]", "invalid character class range: `z-a`"),
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
    ("pattern", "message"),
    [("(", "missing closing ): `(`"), ("x((a)", "missing closing ): `x((a)`"), ("a)", "unexpected ): `a)`")],
    ids=["open", "nested-open", "close"],
)
def test_python_paren_errors_read_as_go_s(pattern: str, message: str) -> None:
    """Python's ``re`` finds these; the text is Go's regexp/syntax error (checked against kured's binary)."""
    with pytest.raises(GoValueError) as err:
        compile_re2(pattern)
    assert str(err.value) == f"error parsing regexp: {message}"


def test_parse_errors_leave_stderr_alone(capfd: pytest.CaptureFixture[str]) -> None:
    """RE2 would log each parse error on stderr (absl); the caller prints Go's error once, nothing else."""
    for pattern in ("(?=x)", "a**", "[a", "\\8"):
        with pytest.raises(GoValueError):
            compile_re2(pattern)
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")


def test_empty_matches_fall_between_characters_only() -> None:
    """RE2 sees ``\\B`` between the two bytes of ``ω``; Go only between characters (none here)."""
    assert compile_re2("\\B").search("aωX") is None
    assert compile_re2("\\B").search("ωω") == ""
    assert compile_re2("x\\B").search("ωx") is None
    assert compile_re2("(?i)Ω").search("aω") == "ω"


def test_unencodable_text_is_matched_as_go_decodes_it() -> None:
    assert compile_re2("^a.b$").search("a\ud800b") == "a\ufffdb"
