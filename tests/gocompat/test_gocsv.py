"""pflag stringSlice values as Go encoding/csv reads them (vectors from Go's ``encoding/csv`` behaviour)."""

from __future__ import annotations

import pytest

from pykured.gocompat.gocsv import parse_string_slice, read_record
from pykured.gocompat.goflags import GoValueError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("mon,tue", ["mon", "tue"]),
        ("mon, tue", ["mon", " tue"]),
        ('a,"b,c"', ["a", "b,c"]),
        ("a,b\nc,d", ["a", "b"]),
        ("a,b\r\nc,d", ["a", "b"]),
        ("\n\na,b", ["a", "b"]),
        ('"a""b",c', ['a"b', "c"]),
        ('"a\nb",c', ["a\nb", "c"]),
        ('""', [""]),
        (",", ["", ""]),
        ("a,", ["a", ""]),
        ("a\r", ["a"]),
        ('"x"\n', ["x"]),
        ("su,mo,tu,we,th,fr,sa", ["su", "mo", "tu", "we", "th", "fr", "sa"]),
        ("ключ=значение", ["ключ=значение"]),
    ],
    ids=[
        "two",
        "leading-space-kept",
        "quoted-comma",
        "first-line-only",
        "crlf",
        "empty-lines-skipped",
        "escaped-quote",
        "multi-line-quoted",
        "empty-quoted",
        "two-empty",
        "trailing-empty",
        "trailing-cr",
        "quoted-then-newline",
        "kured-default-days",
        "utf8",
    ],
)
def test_read_record(text: str, expected: list[str]) -> None:
    assert read_record(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('a"b', 'parse error on line 1, column 2: bare " in non-quoted-field'),
        ('ab,c"d', 'parse error on line 1, column 5: bare " in non-quoted-field'),
        ('é"', 'parse error on line 1, column 3: bare " in non-quoted-field'),
        ('"a"b', 'parse error on line 1, column 3: extraneous or missing " in quoted-field'),
        ('"abc', 'parse error on line 1, column 5: extraneous or missing " in quoted-field'),
        ('"a\nb', 'record on line 1; parse error on line 2, column 2: extraneous or missing " in quoted-field'),  # noqa: E501
        ("\n", "EOF"),
        ("\r\n\n", "EOF"),
    ],
    ids=["bare-quote", "bare-quote-second-field", "byte-columns", "quote-after-quoted", "unterminated",
         "unterminated-multi-line", "only-newline", "only-empty-lines"],
)  # fmt: skip
def test_read_record_errors(text: str, message: str) -> None:
    with pytest.raises(GoValueError) as err:
        read_record(text)
    assert str(err.value) == message


@pytest.mark.parametrize(("text", "expected"), [("", []), ("a", ["a"])], ids=["empty-is-empty-list", "one"])
def test_parse_string_slice_empty_special_case(text: str, expected: list[str]) -> None:
    assert parse_string_slice(text) == expected
