"""JSON from the network: size and depth refused before parsing, the parse total, no echo of the input."""

from __future__ import annotations

import pytest

from pykured.core import boundedjson


@pytest.mark.parametrize(
    ("data", "depth"),
    [
        (b"1", 0),
        (b"[]", 1),
        (b'{"a": [1, {"b": []}]}', 4),
        (b'["[[[[", "]]]]"]', 1),
        (b'["\\"[[[", "x"]', 1),
        (b"[" * 50, 50),
    ],
    ids=["scalar", "list", "nested", "brackets-in-strings", "escaped-quote", "unbalanced"],
)
def test_nesting_depth(data: bytes, depth: int) -> None:
    assert boundedjson.nesting_depth(data) == depth


def test_a_valid_document_decodes() -> None:
    assert boundedjson.loads(b'{"a": [1, "x"]}', max_bytes=100, max_depth=2) == {"a": [1, "x"]}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'"' + b"s" * 200 + b'"', "larger than 100 bytes"),
        (b"[[[1]]]", "nested deeper than 2 levels"),
        (b"[" * 45 + b"]" * 45, "nested deeper than 2 levels"),
        (b"[NaN]", "NaN is not JSON"),
        (b"[-Infinity]", "-Infinity is not JSON"),
        (b'"\xff"', "not UTF-8"),
        (b'{"secret": ', "not JSON"),
    ],
    ids=["large", "deep", "much-deeper", "nan", "infinity", "not-utf8", "truncated"],
)
def test_bad_documents_are_one_short_error(data: bytes, message: str) -> None:
    with pytest.raises(boundedjson.JsonError, match=message) as info:
        boundedjson.loads(data, max_bytes=100, max_depth=2)
    assert "secret" not in str(info.value)


def test_a_deep_document_is_refused_before_python_recurses() -> None:
    data = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(boundedjson.JsonError, match="nested deeper than 32"):
        boundedjson.loads(data, max_bytes=len(data), max_depth=32)
