"""The options the commands share with the agent: names, ``KURED_*`` variables, defaults from its flag table.

A command that talks to the cluster reads what the agents were started with: their namespace, DaemonSet,
lock annotation, Lease prefix and policy ConfigMap. Each such option is the agent's flag
(:data:`pykured.config.flags.BY_NAME`): the same name, the same variable (``KURED_`` + the name) and the same
default, so a shell or a pod that sets ``KURED_DS_NAMESPACE`` for the agent points the commands there too.
The block (:data:`SHARED`) is one table; a command takes the groups it reads (:data:`CLUSTER`, :data:`LOCK`,
:data:`POLICY`) with :func:`add`, and a single agent flag (``--time-zone``, ``--concurrency``) with
:func:`add_agent_flag`.

As the agent reads ``KURED_*`` (kured's ``LoadFromEnv``), a variable that is set wins over the table's
default, even when empty; except where an empty value has no meaning for a command (:attr:`Option.
empty_is_unset`): the agent's ``--policy-configmap=""`` turns its policy off, while a command needs the
ConfigMap's name.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pykured.config.flags import BY_NAME
from pykured.lock.budget import Budget, BudgetError

if TYPE_CHECKING:
    from pykured.kube.client import Kube as Kube  # noqa: PLC0414 (re-exported: the client :func:`kube` gives)


@dataclasses.dataclass(frozen=True, slots=True)
class Option:
    """One shared option: an agent flag (``agent``) or a command-only one, and its help for the commands."""

    name: str
    help: str
    agent: bool = True
    """The agent's flag of the same name: its ``KURED_*`` variable and default (else no variable, ``""``)."""
    empty_is_unset: bool = False
    """An empty ``KURED_*`` value gives the default (the value names an object a command must find)."""


SHARED: tuple[Option, ...] = (
    Option("kubeconfig", "the kubeconfig file; without it $KUBECONFIG, else in-cluster"),
    Option("context", "the kubeconfig context; without it, its current one", agent=False),
    Option("ds-namespace", "the agents' namespace: their DaemonSet, lock and policy ConfigMap"),
    Option("ds-name", "the agents' DaemonSet, which holds the lock annotation"),
    Option("lock-annotation", "the DaemonSet annotation holding the lock"),
    Option("lease-prefix", "the lock's Lease name prefix; empty: <ds-name>-lock"),
    Option(
        "policy-configmap", "the ConfigMap the agents watch (their --policy-configmap)", empty_is_unset=True
    ),
)
"""Every option shared with the agent, in the order a command's ``--help`` lists them."""

BY_OPTION: dict[str, Option] = {option.name: option for option in SHARED}

CLUSTER = ("kubeconfig", "context")
"""How to reach the API server: every command that talks to the cluster takes these."""
LOCK = ("ds-namespace", "ds-name", "lock-annotation", "lease-prefix")
"""Where the agents' lock lives (both backends)."""
POLICY = ("ds-namespace", "policy-configmap")
"""Where the agents' policy ConfigMap (freeze, blackouts) lives."""


def env_var(name: str) -> str:
    """The agent flag ``name``'s ``KURED_*`` variable."""
    return BY_NAME[name].env_var


def agent_value(name: str, *, env: Mapping[str, str] = os.environ, empty_is_unset: bool = False) -> str:
    """The agent flag ``name``'s value from the environment: its ``KURED_*`` variable when set (and, with
    ``empty_is_unset``, not empty), else the flag table's default."""
    spec = BY_NAME[name]
    value = env.get(spec.env_var)
    if value is None or (empty_is_unset and not value):
        return spec.default or ""
    return value


def default(option: Option, env: Mapping[str, str]) -> str:
    """A shared option's default: the agent's value (:func:`agent_value`); ``""`` for a command-only one."""
    if not option.agent:
        return ""
    return agent_value(option.name, env=env, empty_is_unset=option.empty_is_unset)


def _help(text: str, env_var: str | None, table_default: str) -> str:
    """The help line: the text, the variable and the agent's default (never a value read from the
    environment, which may be a secret)."""
    shown = [f"env {env_var}"] if env_var else []
    if table_default:
        shown.append(f"default {table_default!r}")
    text = f"{text} ({', '.join(shown)})" if shown else text
    return text.replace("%", "%%")  # argparse formats help with %


def add(parser: argparse.ArgumentParser, *groups: Sequence[str], env: Mapping[str, str] = os.environ) -> None:
    """Add the shared options of ``groups`` (each once, in the order given) to ``parser``."""
    seen: list[str] = []
    for group in groups:
        seen.extend(name for name in group if name not in seen)
    for name in seen:
        option = BY_OPTION[name]
        spec = BY_NAME[name] if option.agent else None
        shown = _help(option.help, spec.env_var if spec else None, (spec.default or "") if spec else "")
        parser.add_argument(f"--{name}", default=default(option, env), help=shown)


def add_agent_flag(
    parser: argparse.ArgumentParser,
    name: str,
    *,
    text: str,
    convert: Callable[[str], Any] = str,
    env: Mapping[str, str] = os.environ,
) -> None:
    """Add one agent flag (its name, ``KURED_*`` variable and default) a command reads, with help ``text``.
    ``convert`` is argparse's ``type``: it converts the default too (argparse converts a default given as
    text); for a converted flag an empty variable is unset."""
    spec = BY_NAME[name]
    value = agent_value(name, env=env, empty_is_unset=convert is not str)
    shown = _help(text, spec.env_var, spec.default or "")
    parser.add_argument(f"--{name}", type=convert, default=value, help=shown)


def _budget(text: str) -> Budget | None:
    """``--max-unavailable`` of ``status`` and ``plan``: ``""`` is off."""
    try:
        return Budget.parse(text) if text else None
    except BudgetError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_limit_flags(parser: argparse.ArgumentParser) -> None:
    """The agents' ``--concurrency`` and ``--max-unavailable``, which the lock's limit comes from."""
    add_agent_flag(parser, "concurrency", convert=int, text="the agents' --concurrency")
    add_agent_flag(
        parser,
        "max-unavailable",
        convert=_budget,
        text="the agents' --max-unavailable: N or P% (default: off)",
    )


def lock_place(opts: argparse.Namespace) -> dict[str, str]:
    """Where the agents' lock is, as the :data:`LOCK` options say (both backends): the namespace, the
    DaemonSet, its annotation and the Lease name prefix."""
    return {
        "namespace": opts.ds_namespace,
        "ds_name": opts.ds_name,
        "annotation": opts.lock_annotation,
        "lease_prefix": lease_prefix(opts),
    }


def lease_prefix(opts: argparse.Namespace) -> str:
    """The Lease name prefix the agents use: ``--lease-prefix``, else ``<ds-name>-lock`` (as the agent)."""
    return str(opts.lease_prefix or f"{opts.ds_name}-lock")


def kube(opts: argparse.Namespace) -> Kube:
    """The API client :data:`CLUSTER` names: ``--kubeconfig`` (else ``$KUBECONFIG``, else in-cluster) at
    ``--context``."""
    from pykured.kube.client import Kube

    return Kube.auto(kubeconfig=opts.kubeconfig or None, context=opts.context or None)
