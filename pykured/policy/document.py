"""The policy ConfigMap: blackouts and the freeze record, which agents watch (no restart to change them).

``--policy-configmap NAME`` (in ``--ds-namespace``) names it; its ``data`` keys:

* ``blackouts``: one blackout per line (:mod:`pykured.policy.blackout`), ``#`` comment lines allowed;
* ``freeze``: the freeze record JSON written by ``pykured freeze`` (:mod:`pykured.policy.freeze`).

Any other key, or blackouts that do not parse (or exceed :data:`MAX_BLACKOUTS_CHARS`), make the whole
ConfigMap invalid: the agent logs the refusal and keeps the last good policy (never a crash, never a reboot
outside policy). A missing ConfigMap is an empty policy.

A freeze record that does not parse is different: it reads as frozen (:meth:`FreezeRecord.garbled`, fail
safe), never as absent. A refused ConfigMap still says which freeze it sets (:attr:`PolicyMapError.freeze`),
so an agent keeping its last good blackouts still honours it.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping

from pykured.core.errors import ConfigError
from pykured.policy.blackout import Blackout, BlackoutError, parse_blackouts
from pykured.policy.freeze import FreezeError, FreezeRecord

BLACKOUTS_KEY = "blackouts"
FREEZE_KEY = "freeze"
KEYS = (BLACKOUTS_KEY, FREEZE_KEY)
MAX_BLACKOUTS_CHARS = 64 * 1024
"""The longest ``blackouts`` value read (a year of daily blackouts is about 20 KiB)."""


class PolicyMapError(ConfigError, ValueError):
    """The ConfigMap does not parse (one line, names the key)."""

    def __init__(self, message: str, *, freeze: FreezeRecord | None = None) -> None:
        super().__init__(message)
        self.freeze = freeze
        """The freeze the refused ConfigMap sets (a garbled one reads as frozen), None when it sets none."""


@dataclasses.dataclass(frozen=True, slots=True)
class PolicyDoc:
    """What the policy ConfigMap says."""

    blackouts: tuple[Blackout, ...] = ()
    freeze: FreezeRecord | None = None


def parse_policy_map(data: Mapping[str, str] | None, *, zone: datetime.tzinfo) -> PolicyDoc:
    """Parse a ConfigMap's ``data`` (None = no ConfigMap); raises :class:`PolicyMapError` (only).

    A ``freeze`` value that does not parse is a :meth:`FreezeRecord.garbled` freeze (frozen), not an error."""
    data = data or {}
    freeze = _freeze(data.get(FREEZE_KEY))
    unknown = sorted(str(key)[:60] for key in set(data) - set(KEYS))
    if unknown:
        raise PolicyMapError(f"unknown key(s) {', '.join(unknown)} (known: {', '.join(KEYS)})", freeze=freeze)
    text = data.get(BLACKOUTS_KEY) or ""
    if not isinstance(text, str) or len(text) > MAX_BLACKOUTS_CHARS:
        size = len(text) if isinstance(text, str) else type(text).__name__
        raise PolicyMapError(f"key {BLACKOUTS_KEY}: {size} characters, more than {MAX_BLACKOUTS_CHARS}",
                             freeze=freeze)  # fmt: skip
    try:
        blackouts = parse_blackouts(text.splitlines(), zone=zone)
    except BlackoutError as exc:
        raise PolicyMapError(f"key {BLACKOUTS_KEY}: {exc}", freeze=freeze) from None
    return PolicyDoc(blackouts, freeze)


def _freeze(value: object) -> FreezeRecord | None:
    """The ``freeze`` key's record: None when empty, :meth:`FreezeRecord.garbled` when it does not parse."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        return FreezeRecord.garbled(f"not text but {type(value).__name__}")
    try:
        return FreezeRecord.from_json(value)
    except FreezeError as exc:
        return FreezeRecord.garbled(str(exc).removeprefix("freeze record "))
