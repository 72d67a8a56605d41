import json
import sys
import time

import pytest

from pykured.core import boundedjson
from pykured.core.boundedjson import UnreadableJSON, depth_within, loads


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"a":[1,{"b":"[[[[{{{{"}]}', {"a": [1, {"b": "[[[[{{{{"}]}),
        ('"\\"[\\\\"', '"[\\'),
        ("[]", []),
        ("null", None),
        ('"\\ud83d\\ude00"', "\U0001f600"),  # an escaped surrogate pair is one character
        ('{"x": "é"}', {"x": "é"}),
    ],
    ids=["brackets-in-strings", "escaped-quotes", "empty", "null", "surrogate-pair", "unicode"],
)
def test_json_within_the_bounds_decodes_as_json_does(text: str, value: object) -> None:
    assert loads(text) == value == json.loads(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[" * 2000, "nested deeper than 16"),
        ("{" * 60_000, "nested deeper than 16"),
        ('{"a":' * 17 + "1" + "}" * 17, "nested deeper than 16"),
        ("[1,2", "do not match"),
        ("][", "do not match"),
        ('"' + "x" * boundedjson.MAX_CHARS + '"', "more than 65536"),
        ("NaN", "NaN is not JSON"),
        ("[Infinity]", "Infinity is not JSON"),
        ("1" * 5000, "not JSON"),
        ("", "not JSON"),
        ('{"a":1}{"b":2}', "not JSON"),
        ('"\\ud800"', "lone surrogate"),
        ('{"\\udfff": 1}', "lone surrogate"),
        ('"\ud800"', "lone surrogate"),
    ],
    ids=[
        "deep-array", "deep-object-large", "deep-by-one", "unclosed", "reversed", "too-large", "nan",
        "infinity", "huge-int", "empty", "two-values", "escaped-surrogate", "escaped-surrogate-key",
        "raw-surrogate",
    ],
)  # fmt: skip
def test_anything_else_is_unreadable_and_says_why(text: str, message: str) -> None:
    with pytest.raises(UnreadableJSON, match=message):
        loads(text)


@pytest.mark.parametrize("value", [None, 1, ["{}"]], ids=["none", "int", "list"])  # bytes are UTF-8 text
def test_a_value_that_is_not_text_is_unreadable(value: object) -> None:
    with pytest.raises(UnreadableJSON, match="not text"):
        loads(value)


def test_the_bounds_are_the_callers() -> None:
    assert loads("[[[1]]]", max_depth=3) == [[[1]]]
    with pytest.raises(UnreadableJSON, match="deeper than 2"):
        loads("[[[1]]]", max_depth=2)
    with pytest.raises(UnreadableJSON, match="more than 4"):
        loads("12345", max_chars=4)


def test_the_depth_check_does_not_recurse() -> None:
    # deeper than the interpreter's recursion limit: json.loads itself raises RecursionError here
    text = "[" * (sys.getrecursionlimit() * 20) + "]" * (sys.getrecursionlimit() * 20)
    assert not depth_within(text, 16)
    assert depth_within(text, sys.getrecursionlimit() * 20)
    with pytest.raises(RecursionError):
        json.loads(text)


def test_the_object_pairs_hook_is_passed_on() -> None:
    assert loads('{"a":1,"a":2}', object_pairs_hook=list) == [("a", 1), ("a", 2)]


@pytest.mark.parametrize(
    "text",
    [
        '"' + '\\"' * 30_000,  # one unterminated string of escaped quotes
        '"a' * 30_000,  # many quotes, the last one unterminated
        "[]" * 30_000,
        '"\\' * 30_000,
    ],
    ids=["escaped-quotes", "many-quotes", "many-pairs", "backslashes"],
)
def test_hostile_text_at_the_size_bound_is_refused_quickly(text: str) -> None:
    began = time.perf_counter()
    with pytest.raises(UnreadableJSON):
        loads(text)
    # linear work over 60 000 characters takes milliseconds, a quadratic scan minutes: the bound tells them
    # apart on any machine (the figures: benchmarks/)
    assert time.perf_counter() - began < 10.0


# -- bytes from the network (a Prometheus answer, a FleetLock body) ------------------------------------------


def test_bytes_within_the_bounds_decode() -> None:
    assert loads(b'{"a": [1, "x"]}', max_chars=100, max_depth=2) == {"a": [1, "x"]}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'"' + b"s" * 200 + b'"', "202 bytes, more than 100"),
        (b"[[[1]]]", "nested deeper than 2"),
        (b"[" * 45 + b"]" * 45, "nested deeper than 2"),
        (b"[NaN]", "NaN is not JSON"),
        (b"[-Infinity]", "-Infinity is not JSON"),
        (b'"\xff"', "not UTF-8"),
        (b'{"secret": ', "do not match"),  # a truncated document's brackets do not match
    ],
    ids=["large", "deep", "much-deeper", "nan", "infinity", "not-utf8", "truncated"],
)
def test_bad_bytes_are_one_short_error_that_echoes_nothing(data: bytes, message: str) -> None:
    with pytest.raises(UnreadableJSON, match=message) as info:
        loads(data, max_chars=100, max_depth=2)
    assert "secret" not in str(info.value)


def test_deep_bytes_are_refused_before_python_recurses() -> None:
    data = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(UnreadableJSON, match="nested deeper than 32"):
        loads(data, max_chars=len(data), max_depth=32)


@pytest.mark.parametrize(
    ("brackets", "depth"),
    [("{{[[[]]]}}", 5), ("[{[{}]}]", 4), ("{[{[{[]}]}]}", 6), ("[[[]]]", 3)],
    ids=["objects-around-lists", "alternating", "alternating-deeper", "lists"],
)
def test_mixed_nesting_counts_each_level(brackets: str, depth: int) -> None:
    assert depth_within(brackets, depth) and not depth_within(brackets, depth - 1)
