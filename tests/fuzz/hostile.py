"""Hostile values for the fuzz tier: what anyone who may write a Node, a ConfigMap or a Lease can put there.

* deep nesting (``[[[…``, ``{"a":{"a":…``), up to far past the interpreter's recursion limit;
* huge strings, up to the API server's 256 KiB for an object's annotations;
* valid JSON of the wrong shape (any JSON value), and records whose fields have the wrong types;
* lone surrogates (raw, and as ``\\uD800`` escapes), control characters, escape sequences, bidi controls;
* text near the grammars (brackets, quotes, backslashes, digits, ``T``, ``Z``, ``:``) so the parsers' inner
  branches are reached, not only their first check.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

NASTY = '[]{}"\\:,.-+0123456789TZtzeEu \x00\x07\x1b\x7f\x85\x9b\u202e\ud800\udfff\n\r\t\u00e9\U0001f600'
"""Characters the hostile texts are made of (beside any text at all)."""

nasty_text = st.text(alphabet=st.sampled_from(NASTY), max_size=200)
any_text = st.text(max_size=200)
"""Any text the strategies of Hypothesis draw (no surrogates: those are in :data:`nasty_text`)."""


@st.composite
def deep(draw: st.DrawFn) -> str:
    """Nesting from a few levels to far past the recursion limit, closed or not."""
    depth = draw(st.integers(min_value=1, max_value=20_000))
    opener, closer = draw(st.sampled_from([("[", "]"), ("{", "}"), ('{"a":', "}"), ('[{"x":', "}]")]))
    inner = draw(st.sampled_from(["", "1", '"x"', "null"]))
    closed = draw(st.booleans())
    return opener * depth + inner + (closer * depth if closed else "")


@st.composite
def huge(draw: st.DrawFn) -> str:
    """A string of up to 256 KiB: as a JSON string, a JSON array of them, or raw."""
    size = draw(st.integers(min_value=1, max_value=256 * 1024))
    char = draw(st.sampled_from(["x", "[", "\\", '"', "\x1b", "é"]))
    form = draw(st.sampled_from(["raw", "string", "array"]))
    body = char * size
    if form == "string":
        return json.dumps(body)
    if form == "array":
        return "[" + ",".join(json.dumps(body[: size // 8]) for _ in range(8)) + "]"
    return body


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | nasty_text | any_text,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(any_text | nasty_text, children, max_size=4)
    ),
    max_leaves=12,
)
"""Any JSON value (the wrong shape for a record, most of the time)."""


def mutated(record: dict[str, Any]) -> st.SearchStrategy[str]:
    """``record`` (a valid record's fields) with fields replaced by any JSON value, dropped, or added."""

    @st.composite
    def build(draw: st.DrawFn) -> str:
        data = dict(record)
        for key in draw(st.lists(st.sampled_from(sorted(record)), max_size=len(record), unique=True)):
            if draw(st.booleans()):
                data[key] = draw(json_values)
            else:
                del data[key]
        if draw(st.booleans()):
            data[draw(any_text)] = draw(json_values)
        return json.dumps(data, ensure_ascii=draw(st.booleans()))

    return build()


def hostile(record: dict[str, Any] | None = None) -> st.SearchStrategy[str]:
    """Every kind of hostile text, and the record (if given) with mutated fields."""
    kinds = [deep(), huge(), json_values.map(json.dumps), nasty_text, any_text]
    if record is not None:
        kinds.append(mutated(record))
    return st.one_of(*kinds)


FUZZ = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
    database=None,
)
"""The tier's settings: bounded examples, no deadline (a 256 KiB value on a busy machine), no database."""
