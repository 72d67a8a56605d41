"""Lock writes an admission policy refused: under pykured's policies a node's slot is its holder's alone.

With the shipped admission policies (Kubernetes 1.30+, SECURITY.md) an agent's token takes and frees only its
own node's slots: a Lease, a group slot or an entry of kured's annotation that another node holds is not
written, expired or not. A policy has no clock, so it cannot tell an expired slot (``--lock-ttl``) from a
live one, nor a holder whose Node is gone: an agent's take of another node's expired slot, and its freeing
of a deleted node's slot, are refused with HTTP 403 naming the policy. Without the policies those writes
succeed, as in kured.

The backends understand such a refusal through :class:`Refusals`: the slot counts as held for as long as
the same holding lasts (the same holder, since the same time: for the annotation, the same value), the
refusal is logged once, naming the policy and how the slot is freed, and the write is not tried again
until the slot changes (its holder frees or takes it anew, the garbage collector deletes a slot Lease with
its holder's Node, or an operator runs ``pykured lock release``). A 403 that no policy gave (RBAC) is not
a refusal here: each backend handles it as before.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Hashable

from pykured.core.errors import ForbiddenError

logger = logging.getLogger(__name__)

_POLICY = re.compile(r"ValidatingAdmissionPolicy '([^']+)'")


def refusing_policy(exc: BaseException | None) -> str | None:
    """The admission policy that refused ``exc`` (a 403, or a chain of causes holding one), else ``None``."""
    while exc is not None:
        if isinstance(exc, ForbiddenError):
            found = _POLICY.search(str(exc))
            return found.group(1) if found else None
        exc = exc.__cause__
    return None


class Refusals:
    """The slots whose write an admission policy refused, each with the holding it was refused over.

    Shared between threads (FleetLock serves requests concurrently): one mutex guards the map, which holds at
    most one holding per slot name.
    """

    def __init__(self, *, backend: str, where: str) -> None:
        self._backend = backend
        self._where = where
        self._refused: dict[str, Hashable] = {}
        self._mutex = threading.Lock()

    def refused(self, slot: str, holding: Hashable) -> bool:
        """Whether a write of ``slot`` was refused while it had this ``holding`` (then it counts as held)."""
        with self._mutex:
            return slot in self._refused and self._refused[slot] == holding

    def note(self, exc: BaseException, *, slot: str, holding: Hashable, holder: str, write: str) -> bool:
        """If ``exc`` is an admission policy's refusal: remember it, say it once per holding, and answer
        ``True`` (the caller counts the slot as held); else ``False``.

        ``write`` and ``slot`` say what was refused: ``take the expired slot`` ``kured-lock-0``.
        """
        policy = refusing_policy(exc)
        if policy is None:
            return False
        with self._mutex:
            new = self._refused.get(slot, _NOTHING) != holding
            self._refused[slot] = holding
        if new:
            logger.warning(
                "Not allowed to %s %s, held by node %s: the admission policy %s lets an agent take and "
                "free only its own node's slots (a policy has no clock), so it counts as held until node %s "
                "frees it or an operator runs `pykured lock release %s`: %s",
                write,
                slot,
                holder,
                policy,
                holder,
                holder,
                exc,
                extra={"holder": holder, "backend": self._backend, "where": self._where, "policy": policy},
            )
        return True


_NOTHING = object()
