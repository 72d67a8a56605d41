"""The options the commands share with the agent: the agent's names, ``KURED_*`` variables and defaults."""

from __future__ import annotations

import argparse
import importlib
import re
from pathlib import Path

import pytest

from pykured.cli import options
from pykured.cli.commands import COMMANDS
from pykured.config.flags import BY_NAME
from pykured.config.reader import read_flags

AGENT = [option for option in options.SHARED if option.agent]
IDS = [option.name for option in AGENT]


def _parsed(env: dict[str, str], *groups: tuple[str, ...]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    options.add(parser, *groups, env=env)
    return parser.parse_args([])


def _value(option: options.Option, env: dict[str, str]) -> str:
    return str(getattr(_parsed(env, (option.name,)), option.name.replace("-", "_")))


@pytest.mark.parametrize("option", AGENT, ids=IDS)
def test_an_option_s_default_is_the_agent_flag_s(option: options.Option) -> None:
    spec = BY_NAME[option.name]
    assert not spec.name.startswith("-") and spec.kind.value == "string"
    assert _value(option, {}) == spec.default == read_flags([], {}).values[option.name]


@pytest.mark.parametrize("option", AGENT, ids=IDS)
def test_an_option_reads_the_agent_flag_s_variable(option: options.Option) -> None:
    env_var = BY_NAME[option.name].env_var
    assert env_var == "KURED_" + option.name.upper().replace("-", "_")
    env = {env_var: "from-env"}
    assert _value(option, env) == "from-env" == read_flags([], env).values[option.name]
    assert _value(option, {"KURED_OTHER": "x"}) == BY_NAME[option.name].default


@pytest.mark.parametrize("option", AGENT, ids=IDS)
def test_an_empty_variable_is_the_agent_s_value_unless_it_would_name_nothing(option: options.Option) -> None:
    env = {BY_NAME[option.name].env_var: ""}
    expected = (
        BY_NAME[option.name].default if option.empty_is_unset else read_flags([], env).values[option.name]
    )
    assert _value(option, env) == expected
    assert [o.name for o in AGENT if o.empty_is_unset] == ["policy-configmap"]


def test_the_groups_take_each_option_once_in_the_order_given() -> None:
    parser = argparse.ArgumentParser()
    options.add(parser, options.LOCK, options.POLICY, options.CLUSTER, env={})
    names = [a.option_strings[0] for a in parser._actions if a.option_strings and a.dest != "help"]
    assert names == [f"--{n}" for n in (*options.LOCK, "policy-configmap", *options.CLUSTER)]
    assert {*options.CLUSTER, *options.LOCK, *options.POLICY} == {o.name for o in options.SHARED}


def test_context_is_kubectl_s_not_an_agent_flag() -> None:
    (context,) = [o for o in options.SHARED if not o.agent]
    assert context.name == "context" and context.name not in BY_NAME
    assert _value(context, {"KURED_CONTEXT": "x"}) == ""


@pytest.mark.parametrize(
    ("name", "convert", "env", "expected"),
    [
        ("concurrency", int, {}, 1),
        ("concurrency", int, {"KURED_CONCURRENCY": "3"}, 3),
        ("concurrency", int, {"KURED_CONCURRENCY": ""}, 1),
        ("time-zone", str, {}, "UTC"),
        ("time-zone", str, {"KURED_TIME_ZONE": "Europe/Paris"}, "Europe/Paris"),
        ("notify-url", str, {}, ""),
    ],
    ids=["int-default", "int-env", "int-empty", "str-default", "str-env", "empty-default"],
)
def test_one_agent_flag(name: str, convert: type, env: dict[str, str], expected: object) -> None:
    parser = argparse.ArgumentParser()
    options.add_agent_flag(parser, name, text="t", convert=convert, env=env)
    assert getattr(parser.parse_args([]), name.replace("-", "_")) == expected
    assert getattr(parser.parse_args([f"--{name}=7"]), name.replace("-", "_")) == convert("7")


def test_help_names_the_variable_and_the_agent_s_default_never_the_environment_s_value() -> None:
    parser = argparse.ArgumentParser()
    env = {"KURED_NOTIFY_URL": "slack://token-SECRET@channel", "KURED_DS_NAMESPACE": "ops-SECRET"}
    options.add(parser, options.LOCK, env=env)
    options.add_agent_flag(parser, "notify-url", text="where", env=env)
    shown = parser.format_help()
    assert "SECRET" not in shown
    assert "KURED_NOTIFY_URL" in shown and "KURED_DS_NAMESPACE" in shown and "'kube-system'" in shown
    assert parser.parse_args([]).notify_url == env["KURED_NOTIFY_URL"]


def test_lease_prefix_defaults_to_the_ds_name_s() -> None:
    assert options.lease_prefix(argparse.Namespace(lease_prefix="", ds_name="kured")) == "kured-lock"
    assert options.lease_prefix(argparse.Namespace(lease_prefix="p", ds_name="kured")) == "p"


def test_no_command_reads_a_kured_variable_itself() -> None:
    """Every ``KURED_*`` value a command reads comes through this module, from the flag table."""
    modules = {command.handler.partition(":")[0] for command in COMMANDS}
    assert modules
    for module in sorted(modules):
        source = Path(importlib.import_module(module).__file__ or "").read_text()
        assert not re.search(r"environ|KURED_[A-Z]", source.replace("KURED_*", "")), module
