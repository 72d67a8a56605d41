"""What a blocker is built from: the flags the blockers read, and the node (or the fleet) one is for.

:class:`BlockerOptions` names the flags (``--prometheus-url``, ``--alertmanager-url``, kured's alert filters,
``--blocking-pod-selector``, ``--blocking-node-label``, ``--blocking-node-annotation``);
:class:`pykured.config.Config` has them all. A blocker the same for every node is built once from
:class:`FleetInputs` (the flags, the policy ConfigMap's source); one that looks at a node is built for each
node from :class:`NodeInputs` (the flags, the API, the node's name, how to read its Node).

:class:`NodeMark` is one ``--blocking-node-label`` or ``--blocking-node-annotation`` (pykured), parsed from
``key`` or ``key=value``; a key that is not a Kubernetes label key, or a label value that is not one, is a
:class:`~pykured.core.errors.ConfigError` at startup.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from pykured.core.errors import ConfigError

if TYPE_CHECKING:
    from pykured.kube.api import KubeApi
    from pykured.policy.source import PolicySource


class BlockerOptions(Protocol):
    """The flags the blockers read."""

    @property
    def prometheus_url(self) -> str: ...
    @property
    def alertmanager_url(self) -> str: ...
    @property
    def alert_filter_regexp(self) -> str | None: ...
    @property
    def alert_filter_match_only(self) -> bool: ...
    @property
    def alert_firing_only(self) -> bool: ...
    @property
    def blocking_pod_selector(self) -> Sequence[str]: ...
    @property
    def blocking_node_labels(self) -> Sequence[NodeMark]: ...
    @property
    def blocking_node_annotations(self) -> Sequence[NodeMark]: ...


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class FleetInputs:
    """What a blocker the same for every node is built from (once, when the agent is built)."""

    options: BlockerOptions
    policy: PolicySource | None = None
    """The policy ConfigMap's source (None: ``--policy-configmap=""``)."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class NodeInputs:
    """What one node's blocker is built from (each time a driver asks for that node's blockers)."""

    options: BlockerOptions
    kube: KubeApi
    node: str
    read: Callable[[], dict[str, Any]] | None = None
    """Reads the Node (for the agent's own, the view its pass already has); None: a GET of ``node``."""


# -- The values of --blocking-node-label and --blocking-node-annotation --------------------------------------

MAX_KEY_NAME = 63
MAX_KEY_PREFIX = 253
_NAME_RE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_PREFIX_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def key_error(key: str) -> str | None:
    """Why ``key`` is not a Kubernetes label or annotation key (a qualified name: an optional DNS-subdomain
    prefix and ``/``, then a name of at most 63 characters; Kubernetes' "Labels and Selectors" syntax), or
    None."""
    prefix, slash, name = key.rpartition("/")
    if slash and not prefix:
        return "empty prefix"
    if slash and (len(prefix) > MAX_KEY_PREFIX or _PREFIX_RE.fullmatch(prefix) is None):
        return f"prefix {prefix!r} is not a DNS subdomain"
    if not name:
        return "empty key"
    if len(name) > MAX_KEY_NAME or _NAME_RE.fullmatch(name) is None:
        return (
            f"name {name!r} must be at most {MAX_KEY_NAME} alphanumeric characters, '-', '_' or '.', "
            "starting and ending with an alphanumeric character"
        )
    return None


@dataclasses.dataclass(frozen=True, slots=True)
class NodeMark:
    """One ``--blocking-node-label`` or ``--blocking-node-annotation``: ``key`` (any value) or
    ``key=value``."""

    key: str
    value: str | None = None

    @classmethod
    def parse(cls, text: str, *, flag: str) -> NodeMark:
        """``key`` or ``key=value``; a bad key (or, for a label, a bad value) is a :class:`ConfigError`."""
        key, eq, value = text.partition("=")
        error = key_error(key)
        if error is None and eq and flag == "blocking-node-label" and value:
            valid = "/" not in value and key_error(value) is None
            error = None if valid else f"label value {value!r} is not a valid label value"
        if error is not None:
            raise ConfigError(f"invalid --{flag} {text!r}: {error}", exit_code=1)
        return cls(key, value if eq else None)

    def matches(self, found: Mapping[str, str]) -> bool:
        return self.key in found and (self.value is None or found[self.key] == self.value)

    def __str__(self) -> str:
        return self.key if self.value is None else f"{self.key}={self.value}"
