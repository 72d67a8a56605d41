"""Shared value types: the reasons decisions are made for."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True, slots=True)
class Reason:
    """Why something is blocked or skipped; ``message`` is the operator-facing text kured would log."""

    kind: str
    message: str

    def __str__(self) -> str:
        return self.message
