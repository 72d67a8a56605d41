"""Reading flag values the way kured does: pflag's command line, then ``KURED_*`` env vars (``LoadFromEnv``).

kured 1.17+ calls pflag's ``flag.Parse()`` and then ``LoadFromEnv()``. This module reproduces both, on top of
configargparse (which adds pykured's ``--config`` file):

1. **Command line, pflag grammar** (:func:`_scan`): ``--name=value``; ``--name value`` for non-bool flags (the
   next argument is taken even if it starts with ``-``); a bool never takes the next argument; ``--`` ends the
   flags; positional arguments are ignored; no abbreviations; no shorthands (``-x`` → ``unknown shorthand
   flag: 'x' in -x``); ``-h``/``--help`` → :class:`HelpRequested`; ``-test.*`` is ignored.
2. **configargparse** then receives the normalised ``--name=value`` arguments plus the ``--config`` file
   (whose keys are dropped when the flag is on the command line: defaults < config file < command line). Every
   flag has a Go-typed action (:class:`_GoAction`) that applies pflag's ``Set``: scalars replace, the first
   ``Set`` of a ``stringSlice``/``stringArray`` replaces the default and later ones append; a bad value raises
   ``invalid argument "v" for "--name" flag: <Go error>``. Flag errors are :class:`ConfigError` exit code 2.
3. **Environment** (:func:`_apply_env`), in pflag's ``VisitAll`` (sorted) order: a variable that is set, even
   to ``""``, overrides the command line for scalars and appends to slices already set. ``int`` uses Go
   ``Atoi``, ``bool`` ``ParseBool``, ``duration`` ``ParseDuration``; a bad value is an exit code 1 with
   kured's wording for the type (``Invalid value for env var named KURED_X`` for an int, ``Invalid value for
   KURED_X: v`` for a bool, ``Invalid duration for KURED_X: v``, ``cannot set flag x from env{KURED_X}: v``).
   ``KURED_BLOCKING_POD_SELECTOR`` is ignored; kured prints ``Unsupported flag type for
   blocking-pod-selector`` to stdout (:attr:`FlagValues.printed`). pykured improvement (kured #1108): a
   value shaped like a Kubernetes service link (``tcp://10.0.0.7:8080``) that is invalid for an
   int/bool/duration flag is ignored with a warning. pykured's own ``stringArray``
   (``KURED_EXTRA_NOTIFY_URL``) is split on whitespace.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import Any

import configargparse

from pykured.conditions.record import parse_spec
from pykured.config.flags import BY_NAME, FLAGS, FlagSpec, Kind, usage
from pykured.core.errors import ConfigError
from pykured.gocompat.gocsv import parse_string_slice
from pykured.gocompat.goflags import (
    Duration,
    GoValueError,
    atoi,
    format_bool,
    go_quote,
    parse_bool,
    parse_int,
)
from pykured.gocompat.goregexp import compile_re2
from pykured.lock.budget import Budget, BudgetError

_SERVICE_LINK = re.compile(r"^(tcp|udp|sctp)://")


class HelpRequested(ConfigError):
    """``-h``/``--help``: the message is the usage text; exit code 0."""

    def __init__(self) -> None:
        super().__init__(usage(), exit_code=0)


@dataclasses.dataclass(slots=True)
class FlagValues:
    """Typed values by flag name, which flags were set, the warnings to log and kured's plain stdout lines."""

    values: dict[str, Any]
    changed: set[str] = dataclasses.field(default_factory=set)
    warnings: list[str] = dataclasses.field(default_factory=list)
    printed: list[str] = dataclasses.field(default_factory=list)
    """Lines kured's ``LoadFromEnv`` prints with ``fmt.Printf`` to stdout before any log line."""

    @classmethod
    def defaults(cls) -> FlagValues:
        values: dict[str, Any] = {}
        for spec in FLAGS:
            values[spec.name] = [] if spec.kind is Kind.STRING_ARRAY else _convert(spec, spec.default)
        return cls(values)

    def set(self, spec: FlagSpec, text: str) -> None:
        """pflag ``Set``; raises :class:`GoValueError` with the value type's own error."""
        value = _convert(spec, text)
        if spec.kind in (Kind.STRING_SLICE, Kind.STRING_ARRAY) and spec.name in self.changed:
            value = [*self.values[spec.name], *value]
        self.values[spec.name] = value
        self.changed.add(spec.name)

    def set_flag(self, spec: FlagSpec, text: str) -> None:
        """:meth:`set` for a command-line (or config file) value: errors are pflag's, exit code 2."""
        _check(spec, text)
        self.set(spec, text)


_CHECKS: dict[str, Callable[[str], object]] = {"reboot-condition": parse_spec}
"""Flags whose every value is checked by its own grammar as it is set (a bad one: pflag's error)."""


def _convert(spec: FlagSpec, text: str | None) -> Any:
    kind = spec.kind
    if text is None:
        return None
    if (check := _CHECKS.get(spec.name)) is not None:
        check(text)
    if kind is Kind.BOOL:
        return parse_bool(text)
    if kind is Kind.INT:
        return parse_int(text)
    if kind is Kind.DURATION:
        return Duration.parse(text)
    if kind is Kind.REGEXP:
        compile_re2(text)
        return text
    if kind is Kind.STRING_SLICE:
        return parse_string_slice(text)
    if kind is Kind.STRING_ARRAY:
        return [text]
    if kind is Kind.INT_OR_PERCENT:
        return _int_or_percent(text)
    return text


def _int_or_percent(text: str) -> int | str:
    """Kubernetes' int-or-percent: an ``int`` (Go's ``strconv``, as pflag's int; its range is checked at
    start-up), ``"P%"`` (P from 1 to 100), or ``""`` (unset)."""
    if not text:
        return ""
    if text.endswith("%"):
        try:
            return str(Budget.parse(text))
        except BudgetError as exc:
            raise GoValueError(str(exc)) from exc
    try:
        return parse_int(text)
    except GoValueError as exc:
        raise GoValueError(
            f"{exc}; want a number of nodes (e.g. 3) or a percentage of them (e.g. 25%)"
        ) from exc


def _go_char(byte: int) -> str:
    """Go ``%q`` of a byte (a rune literal)."""
    char = chr(byte)
    if char in "'\\":
        return f"'\\{char}'"
    return f"'{char}'" if char.isprintable() else f"'\\x{byte:02x}'"


def _scan(argv: list[str]) -> tuple[list[tuple[FlagSpec, str]], list[str]]:
    """pflag ``parseArgs``: the (flag, value) occurrences in order, and the positional arguments."""
    found: list[tuple[FlagSpec, str]] = []
    positional: list[str] = []
    args = list(argv)
    while args:
        arg = args.pop(0)
        if len(arg) < 2 or arg[0] != "-":
            positional.append(arg)
            continue
        if arg == "--":
            positional.extend(args)
            break
        if arg[1] != "-":
            shorthands = arg[1:]
            if shorthands.startswith("test."):
                continue
            if shorthands[0] == "h":
                raise HelpRequested
            first = shorthands.encode("utf-8", "surrogateescape")[0]
            raise ConfigError(f"unknown shorthand flag: {_go_char(first)} in {arg}", exit_code=2)
        body = arg[2:]
        if body[0] in "-=":
            raise ConfigError(f"bad flag syntax: {arg}", exit_code=2)
        name, eq, value = body.partition("=")
        spec = BY_NAME.get(name)
        if spec is None:
            if name == "help":
                raise HelpRequested
            raise ConfigError(f"unknown flag: --{name}", exit_code=2)
        if not eq:
            if spec.kind is Kind.BOOL:
                value = "true"
            elif args:
                value = args.pop(0)
            else:
                raise ConfigError(f"flag needs an argument: {arg}", exit_code=2)
        _check(spec, value)
        found.append((spec, value))
    return found, positional


def _check(spec: FlagSpec, text: str) -> None:
    """Reject a bad value at its place on the command line, so errors come in pflag's order."""
    try:
        _convert(spec, text)
    except GoValueError as exc:
        message = f"invalid argument {go_quote(text)} for {go_quote('--' + spec.name)} flag: {exc}"
        raise ConfigError(message, exit_code=2) from exc


class _GoAction(argparse.Action):
    """Applies pflag's ``Set`` for one Go-typed flag to the shared :class:`FlagValues`."""

    def __init__(self, option_strings: list[str], dest: str, *, spec: FlagSpec, state: FlagValues) -> None:
        super().__init__(option_strings, dest, default=argparse.SUPPRESS)
        self.spec = spec
        self.state = state

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: Any = None
    ) -> None:
        self.state.set_flag(self.spec, str(values))


class _GoListAction(_GoAction, argparse._AppendAction):
    """A slice/array flag: configargparse turns a config-file list ``[a, b]`` into one ``Set`` per element."""


class _Parser(configargparse.ArgParser):  # type: ignore[misc]
    def error(self, message: str) -> Any:
        raise ConfigError(message, exit_code=2)


def _parser(state: FlagValues) -> _Parser:
    parser = _Parser(
        prog="kured",
        allow_abbrev=False,
        add_help=False,
        add_config_file_help=False,
        add_env_var_help=False,
        ignore_unknown_config_file_keys=False,
        default_config_files=[],
    )
    for spec in FLAGS:
        option = "--" + spec.name
        if spec.name == "config":
            parser.add_argument(option, is_config_file=True, dest="config_file", default=argparse.SUPPRESS)
            continue
        kind = _GoListAction if spec.kind in (Kind.STRING_SLICE, Kind.STRING_ARRAY) else _GoAction
        parser.add_argument(option, action=kind, dest=spec.field, spec=spec, state=state)
    return parser


def _env_text(spec: FlagSpec, raw: str) -> list[str]:
    """The ``Set`` arguments kured's ``LoadFromEnv`` derives from an env value (raises GoValueError)."""
    if spec.kind is Kind.INT or (spec.kind is Kind.INT_OR_PERCENT and raw and not raw.endswith("%")):
        return [str(atoi(raw))]
    if spec.kind is Kind.BOOL:
        return [format_bool(parse_bool(raw))]
    if spec.kind is Kind.DURATION:
        Duration.parse(raw)
        return [raw]
    if spec.kind is Kind.STRING_ARRAY:
        return raw.split()
    return [raw]


def _apply_env(state: FlagValues, env: Mapping[str, str]) -> None:
    for spec in sorted(FLAGS, key=lambda s: s.name):
        var = spec.env_var
        if var not in env:
            continue
        raw = env[var]
        if spec.name == "blocking-pod-selector":
            state.printed.append("Unsupported flag type for blocking-pod-selector")
            continue
        try:
            for text in _env_text(spec, raw):
                state.set(spec, text)
        except GoValueError as exc:
            scalar = spec.kind in (Kind.INT, Kind.BOOL, Kind.DURATION, Kind.INT_OR_PERCENT)
            if scalar and _SERVICE_LINK.match(raw):
                state.warnings.append(
                    f"Ignoring {var}={raw}: it looks like a Kubernetes service link variable "
                    "(set enableServiceLinks: false), not a pykured setting"
                )
                continue
            raise ConfigError(_env_error(spec, var, raw), exit_code=1) from exc


def _env_error(spec: FlagSpec, var: str, raw: str) -> str:
    """kured ``LoadFromEnv``'s message for a value its flag type rejects (the wording differs by type)."""
    if spec.kind is Kind.INT:
        return f"Invalid value for env var named {var}"
    if spec.kind is Kind.INT_OR_PERCENT:
        return f"Invalid value for env var named {var}: want a number of nodes or a percentage (1% to 100%)"
    if spec.kind is Kind.BOOL:
        return f"Invalid value for {var}: {raw}"
    if spec.kind is Kind.DURATION:
        return f"Invalid duration for {var}: {raw}"
    return f"cannot set flag {spec.name} from env{{{var}}}: {raw}"


def log_format_hint(argv: list[str], env: Mapping[str, str]) -> str:
    """The ``--log-format`` in force, read without validating anything: for a failure while reading flags."""
    if "KURED_LOG_FORMAT" in env:
        return env["KURED_LOG_FORMAT"]
    found = "text"
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        if arg.startswith("--log-format="):
            found = arg.partition("=")[2]
        elif arg == "--log-format" and i + 1 < len(argv):
            found = argv[i + 1]
    return found


def read_flags(argv: list[str], env: Mapping[str, str]) -> FlagValues:
    """Apply ``argv`` (pflag grammar), the ``--config`` file and then ``env`` to kured's defaults."""
    occurrences, positional = _scan(argv)
    state = FlagValues.defaults()
    args = [f"--{spec.name}={value}" for spec, value in occurrences]
    config_path = env.get("KURED_CONFIG")
    if config_path:
        args.append(f"--config={config_path}")
    _parser(state).parse_args(args=args, env_vars={})
    config_spec = BY_NAME["config"]
    for spec, value in occurrences:
        if spec is config_spec:
            state.set(spec, value)
    _apply_env(state, env)
    if positional:
        state.warnings.append(f"Ignoring positional arguments: [{' '.join(positional)}]")
    return state
