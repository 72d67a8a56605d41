import json

import pytest

from pykured.core.printable import one_line, terminal_safe


@pytest.mark.parametrize(
    ("text", "safe"),
    [
        ("plain text, é, 日本, 🙂", "plain text, é, 日本, 🙂"),
        ("two\nlines\twith a tab", "two\nlines\twith a tab"),
        ("\x1b[31mred\x1b[0m", "\\u001b[31mred\\u001b[0m"),
        ("title\x1b]0;owned\x07", "title\\u001b]0;owned\\u0007"),
        ("nul\x00 cr\r bs\x08 del\x7f", "nul\\u0000 cr\\u000d bs\\u0008 del\\u007f"),
        ("csi\x9b2J nel\x85", "csi\\u009b2J nel\\u0085"),
        ("abc\u202edcba\u2066x\u2069", "abc\\u202edcba\\u2066x\\u2069"),
        ("lone \ud800 surrogate", "lone \\ud800 surrogate"),
    ],
    ids=["printable", "newline-tab", "sgr", "osc-title", "c0-del", "c1", "bidi", "surrogate"],
)
def test_terminal_safe_escapes_what_drives_a_terminal(text: str, safe: str) -> None:
    assert terminal_safe(text) == safe
    terminal_safe(text).encode("utf-8")  # always writable


def test_one_line_escapes_newlines_and_tabs_too() -> None:
    assert one_line("a\nb\tc\x1b") == "a\\u000ab\\u0009c\\u001b"
    assert one_line("fine") == "fine"


def test_escaped_json_stays_json() -> None:
    document = json.dumps({"reason": "a\x7fb\x1b"}, sort_keys=True)  # json.dumps leaves DEL raw
    assert json.loads(terminal_safe(document)) == {"reason": "a\x7fb\x1b"}


def test_bounded_names_stay_short_whatever_their_number() -> None:
    from pykured.core.printable import bounded_names, cut

    names = [f"ns/pod-{i:03d}" for i in range(500)]
    text = bounded_names(names)
    assert text == ", ".join(names[:10]) + " and 490 more"
    assert bounded_names(["ns/" + "x" * 10_000], each=20) == "ns/" + "x" * 16 + "…"
    assert bounded_names([]) == "none" and bounded_names(["a"], uncounted=3) == "a and 3 more"
    assert bounded_names(["ns/a\nforged line"]) == "ns/a\\u000aforged line"
    assert len(bounded_names(["ns/" + "y" * 300] * 500)) < 1000
    assert cut("abc", 3) == "abc" and cut("abcd", 3) == "ab…"
