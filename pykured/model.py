"""Shared value types: node and holder identities, and the reasons decisions are made for."""

from __future__ import annotations

import dataclasses
from typing import NewType

NodeName = NewType("NodeName", str)
"""A Kubernetes Node name, as passed in ``--node-id``."""

HolderId = NewType("HolderId", str)
"""The identity that holds a lock slot: a node name, or ``manual`` for kured's documented manual lock."""


@dataclasses.dataclass(frozen=True, slots=True)
class Reason:
    """Why something is blocked or skipped; ``message`` is the operator-facing text kured would log."""

    kind: str
    message: str

    def __str__(self) -> str:
        return self.message
