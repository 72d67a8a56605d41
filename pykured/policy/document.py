"""The policy ConfigMap: blackouts and the freeze record, which agents watch (no restart to change them).

``--policy-configmap NAME`` (in ``--ds-namespace``) names it; its ``data`` keys:

* ``blackouts``: one blackout per line (:mod:`pykured.policy.blackout`), ``#`` comment lines allowed;
* ``freeze``: the freeze record JSON written by ``pykured freeze`` (:mod:`pykured.policy.freeze`).

Any other key, or a value that does not parse, makes the whole ConfigMap invalid: the agent logs the
refusal and keeps the last good policy (never a crash, never a reboot outside policy). A missing ConfigMap is
an empty policy.
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


class PolicyMapError(ConfigError, ValueError):
    """The ConfigMap does not parse (one line, names the key)."""


@dataclasses.dataclass(frozen=True, slots=True)
class PolicyDoc:
    """What the policy ConfigMap says."""

    blackouts: tuple[Blackout, ...] = ()
    freeze: FreezeRecord | None = None


def parse_policy_map(data: Mapping[str, str] | None, *, zone: datetime.tzinfo) -> PolicyDoc:
    """Parse a ConfigMap's ``data`` (None = no ConfigMap); raises :class:`PolicyMapError`."""
    data = data or {}
    unknown = sorted(set(data) - set(KEYS))
    if unknown:
        raise PolicyMapError(f"unknown key(s) {', '.join(unknown)} (known: {', '.join(KEYS)})")
    try:
        blackouts = parse_blackouts((data.get(BLACKOUTS_KEY) or "").splitlines(), zone=zone)
    except BlackoutError as exc:
        raise PolicyMapError(f"key {BLACKOUTS_KEY}: {exc}") from None
    freeze = None
    if (data.get(FREEZE_KEY) or "").strip():
        try:
            freeze = FreezeRecord.from_json(data[FREEZE_KEY])
        except FreezeError as exc:
            raise PolicyMapError(f"key {FREEZE_KEY}: {exc}") from None
    return PolicyDoc(blackouts, freeze)
