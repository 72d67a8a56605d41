"""The lock queue of ``--resume-rolls``: one Lease per waiting node, so the roll goes on where it stopped.

Each agent whose node needs a reboot keeps its entry in ``<prefix>-q-<node>`` (labelled
``pykured.dev/lock-queue=<prefix>``): ``spec.holderIdentity`` is the node, ``renewTime`` when the agent last
renewed it, and the ``pykured.dev/queue-entry`` annotation its place in the roll and its state
(:mod:`pykured.roll.rule`). Only the agent writes its own entry, so entries never conflict (under pykured's
admission policies an agent's token may write no other: the name is the node's, and so is the holder); it
rewrites it when its state or place changes and renews it every ``refresh`` seconds while it needs a reboot
(a waiting agent looks at least once a minute, one waiting for its window once a ``--period``). It clears it
(holder null, the object kept) when it takes the lock or stops needing a reboot. Entries under the names
of earlier versions (``<prefix>-q-<node slug>``) are no longer written: they go stale and count no more.

Before it takes a slot an agent renews its entry, then lists the entries and asks :func:`turns.may_go`
(write first, read after: of two nodes deciding at once, the later one sees the earlier). Ordering is a
preference on top of the lock: any API failure here lets the agent go ahead to the lock, which alone bounds
``--concurrency``. Lease backend only; RBAC as for the slots (``get``, ``list``, ``create``, ``update``
on leases in the namespace).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

from pykured.core.errors import ConflictError, KubeError, NotFoundError
from pykured.lock.groups import group_slug
from pykured.lock.lease import lease_body
from pykured.lock.record import parse_go_time
from pykured.roll import rule as turns
from pykured.roll.order import Member

if TYPE_CHECKING:
    from pykured.kube.api import KubeApi
    from pykured.kube.client import Obj

logger = logging.getLogger(__name__)
_NS = 1_000_000_000
MAX_NAME = 253
"""The longest name of a Lease (a DNS subdomain)."""
_DNS_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
REFRESH = 60.0
GRACE = 15.0


def queue_lease_name(prefix: str, node: str) -> str:
    """``<prefix>-q-<node>`` (a Node's name is a valid Lease name), which the admission policy compares with
    the node of the writer's token; the node's slug when the name would be longer than a Lease's may be."""
    name = f"{prefix}-q-{node}"
    return name if len(name) <= MAX_NAME and _DNS_NAME.fullmatch(node) else f"{prefix}-q-{group_slug(node)}"


def stale_after(period: float) -> float:
    """An entry not renewed for this long is gone: twice the agent's longest sleep, at least 3 minutes."""
    return max(2 * max(period, REFRESH) + 60.0, 180.0)


class RollQueue:
    """One node's entry in the lock queue, and its turn."""

    def __init__(
        self,
        kube: KubeApi,
        *,
        namespace: str,
        prefix: str,
        node: str,
        period: float,
        refresh: float = REFRESH,
        grace: float = GRACE,
        clock_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        self._kube = kube
        self._namespace = namespace
        self._prefix = prefix
        self.node = node
        self.name = queue_lease_name(prefix, node)
        self._refresh_ns = int(refresh * _NS)
        self._stale_ns = int(stale_after(period) * _NS)
        self.grace = grace
        self._grace_ns = int(grace * _NS)
        self._clock_ns = clock_ns
        self._selector = f"{turns.QUEUE_LABEL}={prefix}"
        self._written: tuple[str, int] | None = None
        """(annotation value, when) of our last write."""
        self._present: bool | None = None
        """Whether our entry is set (None: not known since the start)."""
        self._held_back: tuple[tuple[frozenset[str], frozenset[str]], int] | None = None
        self._lease: Obj | None = None
        """Our entry as we last wrote it (its resourceVersion makes the next write one PUT)."""
        self._failed: int | None = None
        """The HTTP status of the last failed write (its warning is not repeated)."""

    # -- our entry ------------------------------------------------------------------------------------------

    def note(self, state: str, member: Member, *, now_ns: int) -> None:
        """Keep our entry at ``state`` and ``member``'s place; written when it changed or is due a renewal."""
        value = turns.encode(turns.Entry(member, state))
        written = self._written
        if written is not None and written[0] == value and now_ns - written[1] < self._refresh_ns:
            return
        try:
            self._write(member, value, now_ns)
        except KubeError as exc:
            # once per kind of failure (a missing RBAC rule would otherwise repeat it at every pass)
            level = logging.DEBUG if self._failed == exc.status else logging.WARNING
            self._failed = exc.status
            where = f"{self._namespace}/{self.name}"
            logger.log(level, "Could not update the lock queue entry %s: %s", where, exc)
            return
        self._failed = None
        self._written = (value, now_ns)
        self._present = True

    def _write(self, member: Member, value: str, now_ns: int) -> None:
        """Write our entry on top of the copy we last wrote (one PUT); read it first only when that copy is
        unknown or stale (409, or the Lease is gone)."""
        since = member.waiting_since.timestamp() if member.waiting_since else now_ns / _NS
        base, known = self._lease, self._lease is not None
        for _ in range(3):
            if not known:
                try:
                    base = self._kube.get_lease(self._namespace, self.name)
                except NotFoundError:
                    base = None
            known = False
            body = self._body(base, self.node, now_ns, acquired_ns=int(since * _NS))
            body["metadata"]["annotations"][turns.ENTRY_ANNOTATION] = value
            try:
                if base is None:
                    self._lease = self._kube.create_lease(self._namespace, body)
                else:
                    self._lease = self._kube.replace_lease(self._namespace, self.name, body)
            except (ConflictError, NotFoundError):
                continue
            return

    def _body(self, base: Obj | None, holder: str | None, now_ns: int, acquired_ns: int | None = None) -> Obj:
        return lease_body(
            self._namespace,
            self.name,
            base,
            labels={turns.QUEUE_LABEL: self._prefix},
            holder=holder,
            now_ns=now_ns,
            acquired_ns=acquired_ns,
        )

    def leave(self) -> None:
        """Clear our entry (we took the lock, or need no reboot). Never raises."""
        self._held_back = None
        if self._present is False:
            return
        try:
            lease = self._kube.get_lease(self._namespace, self.name)
            if (lease.get("spec") or {}).get("holderIdentity") == self.node:
                body = self._body(lease, None, 0)
                body["metadata"]["annotations"].pop(turns.ENTRY_ANNOTATION, None)
                self._kube.replace_lease(self._namespace, self.name, body)
        except NotFoundError:
            pass
        except KubeError as exc:
            logger.debug("Could not clear the lock queue entry %s/%s: %s", self._namespace, self.name, exc)
            return
        self._present = False
        self._written = None
        self._lease = None

    # -- the turn -------------------------------------------------------------------------------------------

    def entries(self) -> list[turns.Entry]:
        """Every entry that is set."""
        answer = self._kube.list_leases(self._namespace, label_selector=self._selector)
        found = []
        for lease in answer.get("items") or []:
            spec = lease.get("spec") or {}
            annotations = (lease.get("metadata") or {}).get("annotations") or {}
            try:
                seen = parse_go_time(str(spec.get("renewTime") or ""))[0]
            except ValueError:
                seen = 0
            entry = turns.decode(
                str(spec.get("holderIdentity") or ""), annotations.get(turns.ENTRY_ANNOTATION), seen
            )
            if entry is not None:
                found.append(entry)
        return found

    def turn(self, member: Member, *, holders: Collection[str], concurrency: int) -> turns.Turn:
        """Renew our entry as ``waiting``, then: may we try to take a slot now?"""
        now = self._clock_ns()
        self.note(turns.WAITING, member, now_ns=now)
        try:
            entries = self.entries()
        except KubeError as exc:
            logger.warning("Cannot read the lock queue, taking a turn anyway: %s", exc)
            return turns.Turn(True)
        # the grace runs while the same slots stay free and the same contenders stay ahead
        ahead = turns.ahead_of(member, entries, holders=holders, now_ns=now, stale_ns=self._stale_ns)
        key = (frozenset(holders), frozenset(ahead))
        if self._held_back is None or self._held_back[0] != key:
            self._held_back = (key, now)
        turn = turns.may_go(
            member,
            entries,
            holders=holders,
            concurrency=concurrency,
            now_ns=now,
            stale_ns=self._stale_ns,
            held_back_since_ns=self._held_back[1],
            grace_ns=self._grace_ns,
        )
        if turn.go:
            self._held_back = None
        return turn
