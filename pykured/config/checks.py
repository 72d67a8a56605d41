"""Startup checks and derived values of the configuration, as kured's ``main()`` computes them.

Pure helpers on plain values (``pykured.config`` applies them to a ``Config``):

* :func:`strip_quotes` and :func:`resolve_notify_url` mirror kured's ``stripQuotes`` and
  ``validateNotificationURL``: ``--notify-url`` wins over ``--slack-hook-url``; one pair of surrounding quotes
  is removed; a Slack hook ``https://hooks.slack.com/services/A/B/C`` becomes ``slack://A/B/C``.
* :func:`parse_labels` mirrors kured's label handling (value = text between the first and second ``=``), but a
  label without ``=`` is a :class:`ConfigError` where kured panics.
* :func:`split_command` wraps google/shlex splitting with kured's fatal errors.
* :func:`local_zone` resolves Go's ``Local`` zone from ``TZ`` (given, not read) or ``/etc/localtime``, and
  :func:`local_zone_name` the name Go prints for it.
"""

from __future__ import annotations

import datetime
import re
import string
import urllib.parse
import zoneinfo
from collections.abc import Iterable, Mapping

from pykured.blockers.options import NodeMark
from pykured.conditions.record import ConditionSpec, parse_specs
from pykured.core.errors import ConfigError
from pykured.gocompat import goshlex, gourl
from pykured.gocompat.goflags import GoValueError, go_quote
from pykured.lock.budget import Budget, BudgetError
from pykured.notify.redact import redact_url

_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")
_HOST_CHARS = frozenset(string.ascii_letters + string.digits + "-_.~!$&'()*+,;=:[]<>\"%")
"""ASCII characters Go's ``url.Parse`` accepts in a host (``shouldEscape`` in host mode, plus escapes)."""


def strip_quotes(value: str) -> str:
    """kured ``stripQuotes``: drop one matching pair of surrounding ``"`` or ``'`` when longer than 2."""
    if len(value) > 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _go_url_error(text: str) -> str | None:
    """The error Go's ``url.Parse`` gives for ``text`` (its common cases), or None if Go accepts it."""
    message = None
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in text):
        message = "net/url: invalid control character in URL"
    else:
        rest = _SCHEME.sub("", text, count=1).partition("#")[0].partition("?")[0]
        if rest.startswith("//"):
            host = rest[2:].partition("/")[0].rpartition("@")[2]
            bad = next((ch for ch in host if ord(ch) < 0x80 and ch not in _HOST_CHARS), None)
            if bad is not None:
                message = f"invalid character {go_quote(bad)} in host name"
            else:
                try:
                    gourl.split_host(host)
                except GoValueError as exc:
                    message = str(exc)
        escape = _BAD_ESCAPE.search(text)
        if message is None and escape is not None:
            message = f"invalid URL escape {go_quote(text[escape.start() : escape.start() + 3])}"
    return None if message is None else f"parse {go_quote(text)}: {message}"


def _slack_url(hook: str) -> tuple[str, str | None]:
    """``slack://A/B/C`` from a Slack webhook URL, or ``("", error)`` (kured's text, newline included)."""
    text = strip_quotes(hook)
    bad = "slack-hook-url is not properly formatted... no notification will be sent: "
    error = _go_url_error(text)
    if error:
        return "", f"{bad}{error}\n"
    path = urllib.parse.unquote(urllib.parse.urlsplit(text).path).replace("/services/", "")
    if len(path.split("/")) != 3:
        return "", bad + "unexpected number of / in URL\n"
    return f"slack://{path}", None


def resolve_notify_url(notify_url: str, slack_hook_url: str) -> tuple[str, list[str]]:
    """kured ``validateNotificationURL``: the URL to notify ("" = none) and the warnings to log."""
    warnings: list[str] = []
    if notify_url and slack_hook_url:
        warnings.append(
            f"Cannot use both --notify-url (given: {redact_url(strip_quotes(notify_url))}) and "
            f"--slack-hook-url (given: {redact_url(strip_quotes(slack_hook_url))}) flags. "
            "Kured will only use --notify-url flag"
        )
        return strip_quotes(notify_url), warnings
    if notify_url:
        return strip_quotes(notify_url), warnings
    if slack_hook_url:
        warnings.append("Deprecated flag(s). Please use --notify-url flag instead.")
        url, error = _slack_url(slack_hook_url)
        if error:
            warnings.append(error)
        return url, warnings
    return "", warnings


def parse_labels(labels: Iterable[str], *, flag: str) -> dict[str, str]:
    """``k=v`` strings to a dict; the value is the text between the first and second ``=`` (as kured)."""
    result: dict[str, str] = {}
    for label in labels:
        parts = label.split("=")
        if len(parts) < 2:
            raise ConfigError(f"invalid label {label!r} in --{flag}: expected key=value", exit_code=1)
        result[parts[0]] = parts[1]
    return result


def parse_node_marks(items: Iterable[str], *, flag: str) -> tuple[NodeMark, ...]:
    """``--blocking-node-label`` / ``--blocking-node-annotation`` values (``key`` or ``key=value``); an empty
    or malformed key is fatal at start-up."""
    return tuple(NodeMark.parse(item, flag=flag) for item in items)


def split_command(command: str, *, flag: str) -> tuple[str, ...]:
    """google/shlex split of a command flag; a syntax error is fatal, as in kured."""
    try:
        return tuple(goshlex.split(command))
    except GoValueError as exc:
        raise ConfigError(f"Error parsing provided --{flag} command: {exc}", exit_code=1) from exc


def check_choice(value: str, choices: tuple[str, ...], *, flag: str) -> None:
    """Refuse a value outside ``choices`` (pykured's enumerated extension flags)."""
    if value not in choices:
        expected = ", ".join(choices[:-1]) + f" or {choices[-1]}"
        raise ConfigError(f"invalid {flag} configured {value}, expected {expected}", exit_code=1)


def check_budget(value: int | str, *, flag: str) -> None:
    """``--max-unavailable`` / ``--concurrency-per-label`` (int-or-percent, its syntax checked by the flag
    reader): a number of nodes below 1, or one beyond :data:`~pykured.lock.budget.MAX_NUMBER`, is fatal.
    ``""`` is unset."""
    if value == "":
        return
    if isinstance(value, int) and value < 1:
        raise ConfigError(
            f"invalid --{flag} {value}: must be >= 1, or a percentage (1% to 100%)", exit_code=1
        )
    try:
        Budget.of(value)
    except BudgetError as exc:
        raise ConfigError(f"invalid --{flag} {value}: {exc}", exit_code=1) from None


def parse_conditions(items: tuple[str, ...]) -> tuple[ConditionSpec, ...]:
    """``--reboot-condition``: each ``TYPE[=STATUS][:FOR]`` (its syntax checked by the flag reader as it is
    set), no type named twice; a bad value is a flag error (exit code 2)."""
    try:
        return parse_specs(items)
    except GoValueError as exc:
        raise ConfigError(f"invalid --reboot-condition: {exc}", exit_code=2) from None


def check_conditions(
    items: tuple[str, ...], *, max_reboots: int, period_ns: int, fleet_max: int | str
) -> tuple[ConditionSpec, ...]:
    """``--reboot-condition`` and its breakers: the conditions parse, the per-node breaker allows at least
    one reboot in a period longer than 0, and the fleet's is a number of nodes (>= 1) or a percentage. Their
    breakers are checked even without a condition (a bad value is a mistake either way); exit code 2."""
    specs = parse_conditions(items)
    if max_reboots < 1:
        raise ConfigError(
            f"invalid --reboot-condition-max {max_reboots}: must be >= 1 (no condition configured turns "
            "reboots from conditions off)",
            exit_code=2,
        )
    if period_ns <= 0:
        raise ConfigError("invalid --reboot-condition-period: must be > 0", exit_code=2)
    try:
        if isinstance(fleet_max, int) and fleet_max < 1:
            raise BudgetError("must be >= 1, or a percentage (1% to 100%)")
        Budget.of(fleet_max)
    except BudgetError as exc:
        raise ConfigError(f"invalid --reboot-condition-fleet-max {fleet_max}: {exc}", exit_code=2) from None
    return specs


ESCALATION_STEPS = ("delete", "force", "quarantine")
"""``--drain-escalation``'s steps; ``force`` and ``quarantine`` end the list (at most one of them)."""


def check_escalation(steps: tuple[str, ...]) -> tuple[str, ...]:
    """``--drain-escalation`` in order, each step once: ``delete`` first if at all, then at most one of
    ``force`` and ``quarantine``; anything else is a :class:`ConfigError`."""
    cleaned = tuple(step.strip() for step in steps if step.strip())
    for step in cleaned:
        if step not in ESCALATION_STEPS:
            raise ConfigError(
                f"invalid --drain-escalation step {step!r}: expected delete, force or quarantine", exit_code=1
            )
    if len(set(cleaned)) != len(cleaned):
        raise ConfigError(f"--drain-escalation={','.join(cleaned)}: a step named twice", exit_code=1)
    ends = [step for step in cleaned if step != "delete"]
    if len(ends) > 1 or (ends and cleaned[-1] != ends[0]) or ("delete" in cleaned and cleaned[0] != "delete"):
        raise ConfigError(
            f"--drain-escalation={','.join(cleaned)}: delete comes first, then at most one of force or "
            "quarantine, which ends the list",
            exit_code=1,
        )
    return cleaned


def local_zone(env: Mapping[str, str]) -> datetime.tzinfo:
    """Go's ``Local``: ``TZ`` unset → ``/etc/localtime``; ``TZ=""`` → UTC; else that zone; fallback UTC."""
    name = env.get("TZ")
    try:
        if name is None:
            with open("/etc/localtime", "rb") as stream:
                return zoneinfo.ZoneInfo.from_file(stream, key="Local")
        name = name.removeprefix(":")
        if not name or name == "UTC":
            return datetime.UTC
        if name.startswith("/"):
            with open(name, "rb") as stream:
                return zoneinfo.ZoneInfo.from_file(stream, key="Local")
        return zoneinfo.ZoneInfo(name)
    except (OSError, ValueError, zoneinfo.ZoneInfoNotFoundError):
        return datetime.UTC


def local_zone_name(env: Mapping[str, str]) -> str:
    """The name Go gives its ``Local`` zone: ``Local`` (``/etc/localtime``), else ``TZ``'s value, else UTC."""
    name = env.get("TZ")
    if name is None:
        return "Local" if isinstance(local_zone(env), zoneinfo.ZoneInfo) else "UTC"
    name = name.removeprefix(":")
    if not name or name == "UTC" or local_zone(env) is datetime.UTC:
        return "UTC"
    return "Local" if name == "/etc/localtime" else name
