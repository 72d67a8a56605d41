"""pykured.core: the bounded JSON decoder, the RFC 3339 parser, the terminal-safe text."""

from __future__ import annotations

import datetime
import json

from hypothesis import given
from hypothesis import strategies as st

from pykured.core import boundedjson
from pykured.core.printable import one_line, terminal_safe
from pykured.core.times import parse_rfc3339
from tests.fuzz.hostile import FUZZ, NASTY, hostile

UNSAFE = {chr(c) for c in [*range(0x20), *range(0x7F, 0xA0)]} - {"\n", "\t"} | {"\u202e", "\ud800"}


@FUZZ
@given(hostile())
def test_boundedjson_decodes_or_says_unreadable(text: str) -> None:
    try:
        value = boundedjson.loads(text)
    except boundedjson.UnreadableJSON:
        return
    assert len(text) <= boundedjson.MAX_CHARS
    json.dumps(value, ensure_ascii=False).encode("utf-8")  # printable and writable back


@FUZZ
@given(st.one_of(hostile(), st.text(alphabet=st.sampled_from("0123456789-:T.Z+ tz"), max_size=40)))
def test_rfc3339_is_a_utc_time_or_none(text: str) -> None:
    moment = parse_rfc3339(text)
    assert moment is None or moment.tzinfo == datetime.UTC


@FUZZ
@given(st.one_of(hostile(), st.text(alphabet=st.sampled_from(NASTY))))
def test_printed_text_is_terminal_safe_and_writable(text: str) -> None:
    safe, line = terminal_safe(text), one_line(text)
    assert not UNSAFE & set(safe) and not (UNSAFE | {"\n", "\t"}) & set(line)
    safe.encode("utf-8")
    line.encode("utf-8")
