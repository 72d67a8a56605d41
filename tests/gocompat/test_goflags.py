"""Go value grammars: vectors (Go's ``strconv`` and ``time`` behaviour) for ParseBool, ParseInt(s, 0, 64),
Atoi, ParseDuration."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pykured.gocompat.goflags import (
    Duration,
    GoValueError,
    atoi,
    format_bool,
    format_duration,
    go_quote,
    parse_bool,
    parse_duration,
    parse_int,
)

INT64_MAX = (1 << 63) - 1
INT64_MIN = -(1 << 63)


@pytest.mark.parametrize(
    ("text", "expected"),
    [(t, True) for t in ("1", "t", "T", "TRUE", "true", "True")]
    + [(f, False) for f in ("0", "f", "F", "FALSE", "false", "False")],
    ids=lambda v: repr(v),
)
def test_parse_bool_accepts_exactly_go_spellings(text: str, expected: bool) -> None:
    assert parse_bool(text) is expected


@pytest.mark.parametrize("text", ["yes", "y", "on", "off", "no", "tRuE", " true", "true ", "", "2"], ids=repr)
def test_parse_bool_rejects_other_spellings_with_go_text(text: str) -> None:
    with pytest.raises(GoValueError) as err:
        parse_bool(text)
    assert str(err.value) == f"strconv.ParseBool: parsing {go_quote(text)}: invalid syntax"


@pytest.mark.parametrize(("value", "text"), [(True, "true"), (False, "false")], ids=["true", "false"])
def test_format_bool(value: bool, text: str) -> None:
    assert format_bool(value) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("8080", 8080),
        ("0x1F90", 8080),
        ("0X1f90", 8080),
        ("017620", 8080),
        ("0o17620", 8080),
        ("0O17620", 8080),
        ("0b1111110010000", 8080),
        ("8_080", 8080),
        ("0x_1F90", 8080),
        ("0_17620", 8080),
        ("-1", -1),
        ("+5", 5),
        ("-0x10", -16),
        ("0", 0),
        ("-0", 0),
        ("9223372036854775807", INT64_MAX),
        ("-9223372036854775808", INT64_MIN),
    ],
    ids=lambda v: str(v),
)
def test_parse_int_base_zero(text: str, expected: int) -> None:
    assert parse_int(text) == expected


@pytest.mark.parametrize(
    "text",
    ["", " 80", "80 ", "80.0", "+", "-", "0x", "08", "_8080", "8080_", "8__080", "0x_", "1e3", "٣", "0b102"],
    ids=repr,
)
def test_parse_int_syntax_errors(text: str) -> None:
    with pytest.raises(GoValueError) as err:
        parse_int(text)
    assert str(err.value) == f"strconv.ParseInt: parsing {go_quote(text)}: invalid syntax"


@pytest.mark.parametrize(
    "text", ["9223372036854775808", "-9223372036854775809", "0x8000000000000000"], ids=str
)
def test_parse_int_range_errors(text: str) -> None:
    with pytest.raises(GoValueError) as err:
        parse_int(text)
    assert str(err.value) == f'strconv.ParseInt: parsing "{text}": value out of range'


@pytest.mark.parametrize(
    ("text", "expected"),
    [("017620", 17620), ("8080", 8080), ("+5", 5), ("-3", -3), ("-0", 0), ("007", 7)],
    ids=str,
)
def test_atoi_is_decimal_only(text: str, expected: int) -> None:
    assert atoi(text) == expected


@pytest.mark.parametrize("text", ["0x1F90", "8_080", "", "+", " 1", "1.0", "tcp://10.0.0.7:8080"], ids=repr)
def test_atoi_rejects(text: str) -> None:
    with pytest.raises(GoValueError, match=r"^strconv\.Atoi: parsing .*: invalid syntax$"):
        atoi(text)


def test_atoi_range() -> None:
    with pytest.raises(GoValueError, match="value out of range"):
        atoi("9223372036854775808")


S = 1_000_000_000


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("0", 0),
        ("-0", 0),
        ("+0", 0),
        ("0s", 0),
        ("1h", 3600 * S),
        ("60m", 3600 * S),
        ("30s", 30 * S),
        ("1h30m", 5400 * S),
        ("+15m", 900 * S),
        ("-1h", -3600 * S),
        ("1.5h", 5400 * S),
        (".5h", 1800 * S),
        ("1.h", 3600 * S),
        ("2h45m30.5s", 9930500000000),
        ("1m1m", 120 * S),
        ("100ms", 100_000_000),
        ("1us", 1000),
        ("1µs", 1000),
        ("1μs", 1000),
        ("1ns", 1),
        ("1.0000000001s", S),
        ("0.1ns", 0),
        ("9223372036854775807ns", INT64_MAX),
        ("-9223372036854775808ns", INT64_MIN),
        ("2562047h", 2562047 * 3600 * S),
    ],
    ids=lambda v: str(v),
)
def test_parse_duration_vectors(text: str, ns: int) -> None:
    assert parse_duration(text) == ns


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("00", 'time: missing unit in duration "00"'),
        ("1", 'time: missing unit in duration "1"'),
        ("10", 'time: missing unit in duration "10"'),
        ("1m30", 'time: missing unit in duration "1m30"'),
        ("1H", 'time: unknown unit "H" in duration "1H"'),
        ("1d", 'time: unknown unit "d" in duration "1d"'),
        ("1e3s", 'time: unknown unit "e" in duration "1e3s"'),
        ("1_000s", 'time: unknown unit "_" in duration "1_000s"'),
        ("1hm", 'time: unknown unit "hm" in duration "1hm"'),
        ("1h 30m", 'time: unknown unit "h " in duration "1h 30m"'),
        ("1h-1m", 'time: unknown unit "h-" in duration "1h-1m"'),
        ("", 'time: invalid duration ""'),
        (" 1h", 'time: invalid duration " 1h"'),
        (".", 'time: invalid duration "."'),
        ("9223372036854775808ns", 'time: invalid duration "9223372036854775808ns"'),
        ("2562048h", 'time: invalid duration "2562048h"'),
    ],
    ids=lambda v: str(v),
)
def test_parse_duration_errors(text: str, message: str) -> None:
    with pytest.raises(GoValueError) as err:
        parse_duration(text)
    assert str(err.value) == message


@pytest.mark.parametrize(
    ("ns", "text"),
    [(0, "0s"), (3600 * S, "1h0m0s"), (1800 * S, "30m0s"), (-300 * S, "-5m0s"), (1500 * S // 1000, "1.5s")],
    ids=lambda v: str(v),
)
def test_format_duration_go_form(ns: int, text: str) -> None:
    assert format_duration(ns) == text
    assert str(Duration(ns)) == text


@given(st.integers(min_value=INT64_MIN, max_value=INT64_MAX))
def test_duration_format_then_parse_round_trips(ns: int) -> None:
    assert Duration.parse(str(Duration(ns))).ns == ns


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        ("yes", '"yes"'),
        ('a"b', '"a\\"b"'),
        ("a\\b", '"a\\\\b"'),
        ("\n\t", '"\\n\\t"'),
        ("\x00", '"\\x00"'),
        ("\x7f", '"\\x7f"'),
        ("µs", '"µs"'),
        ("\u200b", '"\\u200b"'),
        ("\udcff", '"\\xff"'),
    ],
    ids=["plain", "quote", "backslash", "newline-tab", "nul", "del", "unicode", "zero-width", "raw-byte"],
)
def test_go_quote_matches_strconv_quote(text: str, quoted: str) -> None:
    assert go_quote(text) == quoted
