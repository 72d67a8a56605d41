"""Tests for pykured.alertmanager.matchers: Alertmanager's matcher syntax, templated with the node."""

from __future__ import annotations

import pytest

from pykured.alertmanager import matchers
from pykured.alertmanager.matchers import Matcher
from pykured.core.errors import ConfigError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('node="n1"', [Matcher("node", "n1", is_regex=False, is_equal=True)]),
        ("node=n1", [Matcher("node", "n1", is_regex=False, is_equal=True)]),
        (
            '{node=~"n.*", severity!="page",team!~ "a|b" }',
            [
                Matcher("node", "n.*", is_regex=True, is_equal=True),
                Matcher("severity", "page", is_regex=False, is_equal=False),
                Matcher("team", "a|b", is_regex=True, is_equal=False),
            ],
        ),
        (r'msg="a \"b\" \\ c\n"', [Matcher("msg", 'a "b" \\ c\n', is_regex=False, is_equal=True)]),
        ('a="x,y"', [Matcher("a", "x,y", is_regex=False, is_equal=True)]),
    ],
)
def test_parse(text: str, expected: list[Matcher]) -> None:
    assert list(matchers.parse(text)) == expected


@pytest.mark.parametrize(
    "text",
    ["", "  ", "{}", "node", 'node=="x"x', "node==x", "a=b=c", '1node="x"', 'node="x', r'node="\q"',
     'a="1" b="2"', "a=1,,b=2", ",".join(f"l{i}=v" for i in range(33)), "a=" + "x" * 5000],
)  # fmt: skip
def test_bad_matchers_are_config_errors(text: str) -> None:
    with pytest.raises(ConfigError, match="--silence-during-reboot"):
        matchers.parse(text)


def test_template() -> None:
    assert matchers.render('node="{{.Node}}",instance=~"{{ .Node }}:.*"', node="w-1") == (
        'node="w-1",instance=~"w-1:.*"'
    )
    assert [str(m) for m in matchers.validate('node="{{.Node}}",x!~"a\\"b"')] == [
        'node="node-1.example"',
        'x!~"a\\"b"',
    ]
    with pytest.raises(ConfigError, match="unknown template"):
        matchers.validate('node="{{.Name}}"')


def test_api_form() -> None:
    (m,) = matchers.parse('a!~"b"')
    assert m.to_api() == {"name": "a", "value": "b", "isRegex": True, "isEqual": False}
