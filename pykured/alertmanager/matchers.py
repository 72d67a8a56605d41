"""``--silence-during-reboot``: Alertmanager matchers, templated with the node's name.

The text is Alertmanager's matcher list (``amtool``'s and the silence form's syntax): matchers separated by
commas, optionally inside ``{…}``; each is ``name op value`` with ``op`` one of ``=``, ``!=``, ``=~``, ``!~``
and the value double-quoted (``\\"``, ``\\\\`` and ``\\n`` escapes) or bare (without
``,"{}=!~`` or spaces). ``{{.Node}}`` (spaces allowed
inside the braces) stands for the node's name, put in as it is (a Node name has only ``a-z0-9.-``; in a
regular expression its dots also match themselves). Another ``{{…}}`` is an error.

Alertmanager itself checks a silence when it is made (a regular expression is RE2, a silence needs a matcher
that does not match the empty string): what it rejects is a silence not made, never a blocked reboot.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from pykured.core.errors import ConfigError

MAX_MATCHERS = 32
MAX_TEXT = 4096

_TEMPLATE = re.compile(r"\{\{\s*\.Node\s*\}\}")
_ANY_TEMPLATE = re.compile(r"\{\{.*?\}\}")
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
        return f'{self.name}{op[self.is_regex, self.is_equal]}"{escaped}"'


def render(template: str, *, node: str) -> str:
    """The template with ``{{.Node}}`` replaced by ``node``."""
    return _TEMPLATE.sub(lambda _: node, template)


def parse(text: str) -> tuple[Matcher, ...]:
    """Matchers from ``text``; a :class:`ConfigError` says what is wrong (``--silence-during-reboot``)."""
    if len(text) > MAX_TEXT:
        raise _bad(text, f"longer than {MAX_TEXT} characters")
    body = text.strip()
    if body.startswith("{") and body.endswith("}") and not body.startswith("{{"):
        body = body[1:-1]
    matchers: list[Matcher] = []
    pos = 0
    while True:
        pos = _skip_space(body, pos)
        if pos >= len(body):
            break
        matcher, pos = _one(text, body, pos)
        matchers.append(matcher)
        pos = _skip_space(body, pos)
        if pos < len(body):
            if body[pos] != ",":
                raise _bad(text, f"expected ',' at {body[pos : pos + 10]!r}")
            pos += 1
    if not matchers:
        raise _bad(text, "no matcher")
    if len(matchers) > MAX_MATCHERS:
        raise _bad(text, f"more than {MAX_MATCHERS} matchers")
    return tuple(matchers)


def validate(template: str) -> tuple[Matcher, ...]:
    """Check a template at startup: only ``{{.Node}}`` in it, and matchers once rendered."""
    for found in _ANY_TEMPLATE.findall(template):
        if not _TEMPLATE.fullmatch(found):
            raise _bad(template, f"unknown template {found!r} (only {{{{.Node}}}})")
    try:
        return parse(render(template, node="node-1.example"))
    except ConfigError as exc:  # say it of the text the operator wrote, not of the rendered one
        why = str(exc).rpartition("': ")[2]
        raise _bad(template, why) from None


def _skip_space(body: str, pos: int) -> int:
    while pos < len(body) and body[pos].isspace():
        pos += 1
    return pos


def _one(text: str, body: str, pos: int) -> tuple[Matcher, int]:
    found = _NAME.match(body, pos)
    if found is None:
        raise _bad(text, f"expected a label name at {body[pos : pos + 10]!r}")
    name = found.group()
    pos = _skip_space(body, found.end())
    op = next((o for o in _OPS if body.startswith(o, pos)), None)
    if op is None:
        raise _bad(text, f"expected one of = != =~ !~ after {name!r}")
    pos = _skip_space(body, pos + len(op))
    value, pos = _value(text, body, pos)
    return Matcher(name, value, is_regex=op in ("=~", "!~"), is_equal=op in ("=", "=~")), pos


def _value(text: str, body: str, pos: int) -> tuple[str, int]:
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
                    raise _bad(text, f"unknown escape \\{escaped}")
                out.append(_ESCAPES[escaped])
                pos += 2
                continue
            out.append(char)
            pos += 1
        raise _bad(text, "a quoted value is not closed")
    end = pos
    while end < len(body) and body[end] not in _NOT_BARE and not body[end].isspace():
        end += 1
    return body[pos:end], end


def _bad(text: str, why: str) -> ConfigError:
    shown = text if len(text) <= 200 else text[:199] + "…"
    return ConfigError(f"invalid --silence-during-reboot {shown!r}: {why}", exit_code=1)
