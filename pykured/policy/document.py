"""The policy ConfigMap: blackouts, the freeze and the halt, which agents watch (no restart to change them).

``--policy-configmap NAME`` (in ``--ds-namespace``) names it; its ``data`` keys:

* ``blackouts``: one blackout per line (:mod:`pykured.policy.blackout`), ``#`` comment lines allowed;
* ``freeze``: the freeze record JSON written by ``pykured freeze`` (:mod:`pykured.policy.freeze`);
* ``halt``: the halt, a freeze record an agent (or a failed canary) adds when the fleet must stop
  (:mod:`pykured.policy.halt`); agents only ever add it where there is none, and only ``pykured unfreeze``
  removes it, so an agent's token never changes what an operator wrote (the admission policy on the
  ConfigMap holds them to that);
* ``halts-lifted``: the halts ``pykured unfreeze`` lifted (:class:`~pykured.policy.halt.LiftedHalt`), written
  by operators only: the overdue reboot a lifted halt named does not halt the fleet again.

Any other key, or blackouts that do not parse (or exceed :data:`MAX_BLACKOUTS_CHARS`), make the whole
ConfigMap invalid: the agent logs the refusal and keeps the last good policy (never a crash, never a reboot
outside policy). A missing ConfigMap is an empty policy.

A freeze or halt record that does not parse is different: it reads as frozen (:meth:`FreezeRecord.garbled`,
fail safe), never as absent; a present halt holds whatever it says (it has no end). A refused ConfigMap still
says which freeze and halt it sets (:attr:`PolicyMapError.doc`), so an agent keeping its last good blackouts
still honours them. Lifted halts that do not parse read as none (the halt may then be set again: the safe
side).
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping

from pykured.core.errors import ConfigError
from pykured.policy.blackout import Blackout, BlackoutError, parse_blackouts
from pykured.policy.freeze import FreezeError, FreezeRecord
from pykured.policy.halt import LiftedHalt, parse_lifted

BLACKOUTS_KEY = "blackouts"
FREEZE_KEY = "freeze"
HALT_KEY = "halt"
LIFTED_KEY = "halts-lifted"
KEYS = (BLACKOUTS_KEY, FREEZE_KEY, HALT_KEY, LIFTED_KEY)
MAX_BLACKOUTS_CHARS = 64 * 1024
"""The longest ``blackouts`` value read (a year of daily blackouts is about 20 KiB)."""


class PolicyMapError(ConfigError, ValueError):
    """The ConfigMap does not parse (one line, names the key)."""

    def __init__(self, message: str, *, doc: PolicyDoc | None = None) -> None:
        super().__init__(message)
        self.doc = doc or PolicyDoc()
        """What the refused ConfigMap says besides its blackouts: the freeze and the halt it sets (a garbled
        one reads as frozen) and the halts it says were lifted."""


@dataclasses.dataclass(frozen=True, slots=True)
class PolicyDoc:
    """What the policy ConfigMap says."""

    blackouts: tuple[Blackout, ...] = ()
    freeze: FreezeRecord | None = None
    """The operator's freeze (``freeze``), which may have expired."""
    halt: FreezeRecord | None = None
    """The halt (``halt``): in force while present, whatever it says."""
    lifted: tuple[LiftedHalt, ...] = ()
    """The halts ``pykured unfreeze`` lifted (``halts-lifted``), oldest first."""

    def in_force(self, now: datetime.datetime) -> FreezeRecord | None:
        """What stops every new reboot now: the halt, else the freeze while it is active (None: nothing)."""
        if self.halt is not None:
            return self.halt
        if self.freeze is not None and self.freeze.active(now):
            return self.freeze
        return None

    def shown(self) -> FreezeRecord | None:
        """The record to show: the halt, else the freeze even when it has expired."""
        return self.halt if self.halt is not None else self.freeze


def parse_policy_map(data: Mapping[str, str] | None, *, zone: datetime.tzinfo) -> PolicyDoc:
    """Parse a ConfigMap's ``data`` (None = no ConfigMap); raises :class:`PolicyMapError` (only).

    A ``freeze`` or ``halt`` value that does not parse is a :meth:`FreezeRecord.garbled` freeze (frozen), not
    an error."""
    data = data or {}
    halt = read_record(data.get(HALT_KEY), key=HALT_KEY)
    if halt is None and HALT_KEY in data:  # present but empty: still a halt (only unfreeze removes the key)
        halt = FreezeRecord.garbled(f"key {HALT_KEY}: empty")
    lifted = data.get(LIFTED_KEY)
    rest = PolicyDoc(
        freeze=read_record(data.get(FREEZE_KEY), key=FREEZE_KEY),
        halt=halt,
        lifted=parse_lifted(lifted if isinstance(lifted, str) else None),
    )
    unknown = sorted(str(key)[:60] for key in set(data) - set(KEYS))
    if unknown:
        raise PolicyMapError(f"unknown key(s) {', '.join(unknown)} (known: {', '.join(KEYS)})", doc=rest)
    text = data.get(BLACKOUTS_KEY) or ""
    if not isinstance(text, str) or len(text) > MAX_BLACKOUTS_CHARS:
        size = len(text) if isinstance(text, str) else type(text).__name__
        raise PolicyMapError(f"key {BLACKOUTS_KEY}: {size} characters, more than {MAX_BLACKOUTS_CHARS}",
                             doc=rest)  # fmt: skip
    try:
        blackouts = parse_blackouts(text.splitlines(), zone=zone)
    except BlackoutError as exc:
        raise PolicyMapError(f"key {BLACKOUTS_KEY}: {exc}", doc=rest) from None
    return dataclasses.replace(rest, blackouts=blackouts)


def read_record(value: object, *, key: str) -> FreezeRecord | None:
    """The record under ``key`` (``freeze`` or ``halt``): None when empty, :meth:`FreezeRecord.garbled`
    when it does not parse (the garbled halt's reason names its key)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    where = "" if key == FREEZE_KEY else f"key {key}: "
    if not isinstance(value, str):
        return FreezeRecord.garbled(f"{where}not text but {type(value).__name__}")
    try:
        return FreezeRecord.from_json(value)
    except FreezeError as exc:
        return FreezeRecord.garbled(where + str(exc).removeprefix("freeze record "))
