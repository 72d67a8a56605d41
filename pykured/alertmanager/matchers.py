"""``--silence-during-reboot``: Alertmanager matchers, templated with the node's name.

The text is Alertmanager's matcher list (``amtool``'s and the silence form's syntax): matchers separated by
commas, optionally inside ``{…}``; each is ``name op value`` with ``op`` one of ``=``, ``!=``, ``=~``, ``!~``
and the value double-quoted (``\\"``, ``\\\\`` and ``\\n`` escapes) or bare (without
``,"{}=!~`` or spaces). ``{{.Node}}`` (spaces allowed inside the braces) stands for the node's name; another
``{{…}}`` is an error.

A silence must never hide another node's alerts, so the template is checked once, at start-up
(:func:`validate`, exit 1):

* it names the node: at least one ``=`` or ``=~`` matcher has ``{{.Node}}`` in its value (a silence that
  matches every node's alerts, e.g. ``severity="critical"`` alone, or the node only in a ``!=``, is refused);
* in a regular expression (``=~``, ``!~``) the name is put in escaped (:func:`regex_escape`: RE2's
  ``\\.+*?()|[]{}^$``, as Alertmanager's Go ``regexp`` reads them), so node ``m.1``'s silence does not match
  ``mx1``;
* in a regular expression ``{{.Node}}`` must not touch ``.*`` or ``.+`` (``{{.Node}}.*`` would silence
  ``node-10`` for ``node-1``, ``.*{{.Node}}`` ``worker-node-1``): a separator goes between them, e.g.
  ``instance=~"{{.Node}}(:.*)?"`` or ``instance=~"{{.Node}}:.*"``. Other spellings that let the name run on
  (``{{.Node}}[0-9]*``) are not recognised: an exact match (``node="{{.Node}}"``) is the safe form;
* every regular expression compiles as RE2 (Alertmanager would refuse the silence at each reboot).

Alertmanager still checks each silence when it is made (a silence needs a matcher that does not match the
empty string): what it rejects is a silence not made, never a blocked reboot.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from pykured.core.errors import ConfigError
from pykured.gocompat.goflags import GoValueError
from pykured.gocompat.goregexp import compile_re2

MAX_MATCHERS = 32
MAX_TEXT = 4096
PROBE_NODE = "node-1.example"
"""The name :func:`validate` renders the template with (dots included, so escaping is exercised)."""

NODE = "\ue000"
"""What ``{{.Node}}`` is in a parsed template's values: a private-use character no template may hold."""
RE2_SPECIAL = frozenset("\\.+*?()|[]{}^$")
"""The characters RE2 (and Go's ``regexp.QuoteMeta``) escape in a literal."""

_TEMPLATE = re.compile(r"\{\{\s*\.Node\s*\}\}")
_ANY_TEMPLATE = re.compile(r"\{\{.*?\}\}")
_RUNS_ON = re.compile(rf"{NODE}\.[*+]|(?<!\\)\.[*+]{NODE}")
"""``{{.Node}}`` touching an unescaped ``.*`` or ``.+`` in a regular expression."""
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OPS = ("=~", "!~", "!=", "=")
_ESCAPES = {'"': '"', "\\": "\\", "n": "\n"}
_NOT_BARE = frozenset(',"{}=!~')
"""Characters a bare (unquoted) value cannot hold: quote the value to use them."""


@dataclasses.dataclass(frozen=True, slots=True)
class Matcher:
    """One matcher as Alertmanager's API takes it."""

    name: str
    value: str
    is_regex: bool
    is_equal: bool

    def to_api(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "isRegex": self.is_regex, "isEqual": self.is_equal}

    def __str__(self) -> str:
        op = {(False, True): "=", (False, False): "!=", (True, True): "=~", (True, False): "!~"}
        escaped = self.value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'{self.name}{op[self.is_regex, self.is_equal]}"{escaped.replace(NODE, "{{.Node}}")}"'


def regex_escape(text: str) -> str:
    """``text`` as a literal inside an RE2 regular expression."""
    return "".join("\\" + char if char in RE2_SPECIAL else char for char in text)


def render(template: str, *, node: str) -> tuple[Matcher, ...]:
    """The matchers of ``template`` for ``node``: ``{{.Node}}`` replaced by its name, escaped in a regular
    expression."""
    return tuple(_for_node(matcher, node) for matcher in parse_template(template))


def _for_node(matcher: Matcher, node: str) -> Matcher:
    name = regex_escape(node) if matcher.is_regex else node
    return dataclasses.replace(matcher, value=matcher.value.replace(NODE, name))


def parse_template(template: str) -> tuple[Matcher, ...]:
    """The matchers of ``template``, ``{{.Node}}`` left in their values as :data:`NODE`."""
    if NODE in template:
        raise _bad(template, "a character reserved for {{.Node}} (U+E000)")
    for found in _ANY_TEMPLATE.findall(template):
        if not _TEMPLATE.fullmatch(found):
            raise _bad(template, f"unknown template {found!r} (only {{{{.Node}}}})")
    return _parse(_TEMPLATE.sub(NODE, template), shown=template)


def parse(text: str) -> tuple[Matcher, ...]:
    """Matchers from ``text`` (no template); a :class:`ConfigError` says what is wrong
    (``--silence-during-reboot``)."""
    return _parse(text, shown=text)


def validate(template: str) -> tuple[Matcher, ...]:
    """Check a template at start-up (the module docstring's rules); the matchers rendered for
    :data:`PROBE_NODE`."""
    found = parse_template(template)
    if not any(m.is_equal and NODE in m.value for m in found):
        raise _bad(
            template,
            'no matcher names the node: an "=" or "=~" matcher needs {{.Node}} in its value '
            '(e.g. node="{{.Node}}"), or the silence hides other nodes\' alerts',
        )
    for matcher in found:
        if not matcher.is_regex:
            continue
        if _RUNS_ON.search(matcher.value):
            raise _bad(
                template,
                f"{matcher}: {{{{.Node}}}} next to .* or .+ also matches other nodes' names (node-1 would "
                "silence node-10): put a separator between them, e.g. {{.Node}}(:.*)? or {{.Node}}:.*",
            )
        try:
            compile_re2(_for_node(matcher, PROBE_NODE).value)
        except GoValueError as exc:
            raise _bad(template, f"{matcher}: {exc}") from None
    return render(template, node=PROBE_NODE)


def _parse(text: str, *, shown: str) -> tuple[Matcher, ...]:
    if len(text) > MAX_TEXT:
        raise _bad(shown, f"longer than {MAX_TEXT} characters")
    body = text.strip()
    if body.startswith("{") and body.endswith("}") and not body.startswith("{{"):
        body = body[1:-1]
    matchers: list[Matcher] = []
    pos = 0
    while True:
        pos = _skip_space(body, pos)
        if pos >= len(body):
            break
        matcher, pos = _one(shown, body, pos)
        matchers.append(matcher)
        pos = _skip_space(body, pos)
        if pos < len(body):
            if body[pos] != ",":
                raise _bad(shown, f"expected ',' at {body[pos : pos + 10]!r}")
            pos += 1
    if not matchers:
        raise _bad(shown, "no matcher")
    if len(matchers) > MAX_MATCHERS:
        raise _bad(shown, f"more than {MAX_MATCHERS} matchers")
    return tuple(matchers)


def _skip_space(body: str, pos: int) -> int:
    while pos < len(body) and body[pos].isspace():
        pos += 1
    return pos


def _one(shown: str, body: str, pos: int) -> tuple[Matcher, int]:
    found = _NAME.match(body, pos)
    if found is None:
        raise _bad(shown, f"expected a label name at {body[pos : pos + 10]!r}")
    name = found.group()
    pos = _skip_space(body, found.end())
    op = next((o for o in _OPS if body.startswith(o, pos)), None)
    if op is None:
        raise _bad(shown, f"expected one of = != =~ !~ after {name!r}")
    pos = _skip_space(body, pos + len(op))
    value, pos = _value(shown, body, pos)
    return Matcher(name, value, is_regex=op in ("=~", "!~"), is_equal=op in ("=", "=~")), pos


def _value(shown: str, body: str, pos: int) -> tuple[str, int]:
    if pos < len(body) and body[pos] == '"':
        out: list[str] = []
        pos += 1
        while pos < len(body):
            char = body[pos]
            if char == '"':
                return "".join(out), pos + 1
            if char == "\\":
                escaped = body[pos + 1] if pos + 1 < len(body) else ""
                if escaped not in _ESCAPES:
                    raise _bad(shown, f"unknown escape \\{escaped}")
                out.append(_ESCAPES[escaped])
                pos += 2
                continue
            out.append(char)
            pos += 1
        raise _bad(shown, "a quoted value is not closed")
    end = pos
    while end < len(body) and body[end] not in _NOT_BARE and not body[end].isspace():
        end += 1
    return body[pos:end], end


def _bad(text: str, why: str) -> ConfigError:
    shown = text if len(text) <= 200 else text[:199] + "…"
    why = why.replace(NODE, "{{.Node}}")
    return ConfigError(f"invalid --silence-during-reboot {shown!r}: {why}", exit_code=1)
