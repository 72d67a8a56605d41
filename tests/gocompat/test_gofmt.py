"""Go fmt.Sprintf semantics for kured's message templates (expected values are what Go 1.22 prints)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pykured.gocompat import gofmt
from pykured.gocompat.gofmt import sprintf

CASES = [
    ("plain", "Rebooting node %s", ("node-1",), "Rebooting node node-1"),
    ("value-verb", "Node %v done", ("n1",), "Node n1 done"),
    (
        "kured-uncordon",
        "Node %s rebooted & uncordoned successfully!",
        ("n1",),
        "Node n1 rebooted & uncordoned successfully!",
    ),
    ("percent-literal", "100%% of %s", ("n1",), "100% of n1"),
    ("no-verb-extra", "Rebooting", ("node-1",), "Rebooting%!(EXTRA string=node-1)"),
    ("two-extras", "x", ("a", "b"), "x%!(EXTRA string=a, string=b)"),
    ("missing", "%s and %s", ("n1",), "n1 and %!s(MISSING)"),
    ("bad-verb", "node %d", ("node-1",), "node %!d(string=node-1)"),
    ("bad-verb-missing", "%s %d", ("n1",), "n1 %!d(MISSING)"),
    ("quoted", "%q", ('a"b',), '"a\\"b"'),
    ("width", "[%6s]", ("n1",), "[    n1]"),
    ("left-width", "[%-6s]", ("n1",), "[n1    ]"),
    ("precision", "%.2s", ("node",), "no"),
    ("hex", "%x", ("n1",), "6e31"),
    ("trailing-percent", "abc%", ("n1",), "abc%!(NOVERB)%!(EXTRA string=n1)"),
    ("empty-template", "", ("n1",), "%!(EXTRA string=n1)"),
    ("unicode", "Nœud %s ✓", ("n1",), "Nœud n1 ✓"),
]


@pytest.mark.parametrize(("template", "args", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_sprintf_matches_go(template: str, args: tuple[str, ...], expected: str) -> None:
    assert sprintf(template, *args) == expected


@given(template=st.text().filter(lambda t: "%" not in t), node=st.text())
def test_template_without_verbs_appends_extra(template: str, node: str) -> None:
    assert sprintf(template, node) == f"{template}%!(EXTRA string={node})"


@given(prefix=st.text().filter(lambda t: "%" not in t), node=st.text())
def test_single_s_verb_substitutes(prefix: str, node: str) -> None:
    assert sprintf(prefix + "%s", node) == prefix + node


@pytest.mark.parametrize(
    ("items", "text"),
    [((), "[]"), (("a",), "[a]"), (("a b", "c"), "[a b c]")],
    ids=["empty", "one", "two"],
)
def test_go_list_is_go_s_v_of_a_string_slice(items: tuple[str, ...], text: str) -> None:
    assert gofmt.go_list(items) == text
