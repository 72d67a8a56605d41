"""Tests for pykured.alertmanager.matchers: Alertmanager's matcher syntax, templated with the node."""

from __future__ import annotations

import re

import pytest

from pykured.alertmanager import matchers
from pykured.alertmanager.matchers import Matcher
from pykured.core.errors import ConfigError
from pykured.gocompat.goregexp import compile_re2


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
    rendered = matchers.render('node="{{.Node}}",instance=~"{{ .Node }}:.*"', node="w-1")
    assert [str(m) for m in rendered] == ['node="w-1"', 'instance=~"w-1:.*"']
    assert [str(m) for m in matchers.validate('node="{{.Node}}",x!~"a\\"b"')] == [
        'node="node-1.example"',
        'x!~"a\\"b"',
    ]
    with pytest.raises(ConfigError, match="unknown template"):
        matchers.validate('node="{{.Name}}"')


def test_the_node_is_escaped_in_a_regular_expression_only() -> None:
    """Node ``m.1``'s silence must not match ``mx1``: its dot is a literal in ``=~`` and ``!~``."""
    rendered = matchers.render('node=~"{{.Node}}",host="{{.Node}}",other!~"{{.Node}}|x"', node="m.1")
    assert [m.value for m in rendered] == ["m\\.1", "m.1", "m\\.1|x"]
    assert matchers.regex_escape("a.b+c*d?e(f)g|h[i]j{k}l^m$n\\o") == (
        "a\\.b\\+c\\*d\\?e\\(f\\)g\\|h\\[i\\]j\\{k\\}l\\^m\\$n\\\\o"
    )
    silence = compile_re2("^(?:" + rendered[0].value + ")$")  # as Alertmanager anchors a matcher
    assert silence.search("m.1") == "m.1" and silence.search("mx1") is None


@pytest.mark.parametrize(
    "template",
    ['node="{{.Node}}"', "node={{.Node}}", '{instance=~"{{.Node}}(:.*)?"}', 'instance=~"{{.Node}}:.*"',
     'instance=~"(.*\\\\.)?{{.Node}}"', 'instance="{{.Node}}:9100", severity!="page"',
     'node=~"{{.Node}}|{{.Node}}\\\\.example"'],
)  # fmt: skip
def test_templates_that_name_the_node(template: str) -> None:
    assert matchers.validate(template)


@pytest.mark.parametrize(
    ("template", "why"),
    [
        ('severity="critical"', "no matcher names the node"),
        ('node!="{{.Node}}"', "no matcher names the node"),
        ('node!~"{{.Node}}", severity="page"', "no matcher names the node"),
        ('instance=~"{{.Node}}.*"', "next to .* or .+"),
        ('instance=~"{{.Node}}.+"', "next to .* or .+"),
        ('instance=~".*{{.Node}}"', "next to .* or .+"),
        ('node="{{.Node}}", other!~"x|.+{{.Node}}"', "next to .* or .+"),
        ('node=~"({{.Node}}"', "missing closing )"),
        ('node="{{.Node}}\ue000"', "reserved for {{.Node}}"),
    ],
)
def test_templates_that_could_hide_other_nodes_are_refused(template: str, why: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(why)) as info:
        matchers.validate(template)
    assert str(info.value).startswith(f"invalid --silence-during-reboot {template!r}: ")
    assert "\ue000" not in str(info.value)


def test_api_form() -> None:
    (m,) = matchers.parse('a!~"b"')
    assert m.to_api() == {"name": "a", "value": "b", "isRegex": True, "isEqual": False}
