"""Noticing a reboot request at once, for no request while idle: a watch on the agent's own Node.

The agent watches its Node as the kubelet does (``fieldSelector=metadata.name=<node>``), from the
resourceVersion of one GET, and hands every new copy to :meth:`RequestKeeper.see`; a request that became
pending wakes the loop. An idle agent then costs the API server one long-running watch, renewed once a
day from the last version it saw (bookmarks keep it recent: one request, no GET), instead of a GET a
minute. The API server sends a bookmark every minute or two, so a connection silent for ``QUIET_SECONDS``
is dead: the agent starts again (a GET and a watch) without waiting for the watch's end. An API server that
sends no bookmarks (none seen when a watch fell quiet) gets half-hour watches, noticed dead at their end.
The watch needs ``watch`` on nodes, which kured's RBAC (``get``, ``patch``) does not grant: on 403 the
agent looks at its Node every ``--period`` instead (as kured checks its sentinel; a look the loop's own pass
made within that period stands in for a read), and tries the watch again after an hour (the RBAC may have
changed). Never raises; other failures back off up to a minute, and one that is not the API's (a bug, a
value no parser foresaw) is logged with its traceback (once while it repeats) before the watch starts again.

While the watch is live, the copies it sees also keep the agent's :class:`~pykured.cycle.nodecopy.NodeCopy`,
from which the loop's passes read the Node instead of GETting it; when it is not, they GET it.
"""

from __future__ import annotations

import datetime
import logging
import threading
from collections.abc import Callable, Iterator

from pykured.core import errors
from pykured.cycle.nodecopy import NodeCopy
from pykured.kube.api import KubeApi
from pykured.kube.client import Obj
from pykured.requests.keeper import RequestKeeper

logger = logging.getLogger(__name__)

WATCH_SECONDS = 24 * 3600
"""A watch's length when the API server sends bookmarks (the server ends it; one request renews it). A day:
an idle agent's only requests are two renewals a day; the API servers of an HA control plane still share
the watches again within a day of one's restart."""
SHORT_WATCH_SECONDS = 1800
"""A watch's length when it sends none (a dead connection is noticed at the watch's end)."""
QUIET_SECONDS = 330.0
"""No event nor bookmark for this long: the connection is dead (the API server sends a bookmark every minute
or two)."""
POLL_SECONDS = 3600.0
LOOP_LOOKS = 2.0
"""Periods within which a look of the loop's pass at the Node spares the poll its read."""
RETRY_WATCH_AFTER = 3600.0
MAX_BACKOFF = 60.0


class RequestWatch:
    """Follows one Node for reboot requests until ``stopping`` is set."""

    def __init__(
        self,
        kube: KubeApi,
        keeper: RequestKeeper,
        *,
        on_request: Callable[[], None],
        clock: Callable[[], datetime.datetime],
        watch_seconds: int = WATCH_SECONDS,
        poll_seconds: float = POLL_SECONDS,
        copy: NodeCopy | None = None,
        quiet_seconds: float = QUIET_SECONDS,
        also: Callable[[Obj], bool] | None = None,
    ) -> None:
        """``also``: asked about every fresh copy of the Node too; ``True`` wakes the loop as a new request
        does (the conditions of ``--reboot-condition`` changed)."""
        self._also = also
        self._quiet = quiet_seconds
        self._kube = kube
        self._copy = copy
        self._keeper = keeper
        self._on_request = on_request
        self._clock = clock
        self._watch_seconds = watch_seconds
        self._bookmarks = True
        """Whether the API server is taken to send bookmarks (a quiet watch with none seen: no longer)."""
        self._bookmarked = False
        """A bookmark was seen."""
        self._poll_seconds = poll_seconds
        self.watching = False
        """Whether the last attempt held a watch (False: polling, or backing off)."""
        self.restarts = 0
        """How many times the watch failed on something else than the API and was started again."""

    def run(self, stopping: threading.Event) -> None:
        pause = 0.0
        said = ""
        while not stopping.wait(pause):
            try:
                try:
                    self._follow(stopping)
                    pause = 0.0
                except errors.ForbiddenError as exc:
                    self.watching = False
                    logger.info(
                        "Not allowed to watch node %s: looking for reboot requests every %gs instead",
                        self._keeper.node,
                        self._poll_seconds,
                    )
                    logger.debug("node watch refused: %s", exc)
                    self._poll(stopping)
                said = ""
            except errors.KubeError as exc:  # a failed watch never ends the agent
                self.watching = False
                pause = min(max(pause * 2, 1.0), MAX_BACKOFF)
                logger.debug("watching node %s for reboot requests failed, retrying in %gs: %s",
                             self._keeper.node, pause, exc)  # fmt: skip
            except Exception as exc:  # nor does anything else: it says so, and starts again
                self.watching = False
                self.restarts += 1
                pause = min(max(pause * 2, 1.0), MAX_BACKOFF)
                text = f"{type(exc).__name__}: {exc}"[:300]
                logger.error("The watch of node %s for reboot requests failed unexpectedly; starting it "
                             "again in %gs: %s", self._keeper.node, pause, text,
                             exc_info=exc if text != said else None)  # fmt: skip
                said = text

    def _seen(self, node: Obj) -> None:
        new_request = self._keeper.see(node, self._clock())
        if new_request or (self._also is not None and self._also(node)):
            self._on_request()

    def _follow(self, stopping: threading.Event) -> None:
        """One GET, then watches from the last version seen, each until the server ends it, until one fails
        or gets 410 Gone (then the caller starts again from a GET).

        Bookmarks keep the version recent, so a watch the server ended is renewed with one request. While it
        follows, the watched copy (when given) serves the loop's passes instead of a GET."""
        try:
            node = self._kube.get_node(self._keeper.node)
            self._seen(node)
            if self._copy is not None:
                self._copy.offer(node)
            rv = str((node.get("metadata") or {}).get("resourceVersion") or "")
            while rv and not stopping.is_set():
                rv = self._watch(rv, stopping)
        finally:
            if self._copy is not None:
                self._copy.set_live(False)

    def _watch(self, rv: str, stopping: threading.Event) -> str:
        """One watch from ``rv``; returns the last version seen ("" after 410 Gone or a stop)."""
        long = self._bookmarks and self._watch_seconds > self._quiet
        events = self._kube.watch_nodes(
            resource_version=rv,
            field_selector=f"metadata.name={self._keeper.node}",
            timeout_seconds=self._watch_seconds if long else min(self._watch_seconds, SHORT_WATCH_SECONDS),
            quiet_seconds=self._quiet if long else None,
        )
        self.watching = True
        if self._copy is not None:
            self._copy.set_live(True)
        try:
            return self._follow_events(events, rv, stopping)
        except errors.KubeError:
            if long and not self._bookmarked:
                self._bookmarks = False  # a quiet watch, and never a bookmark: the server sends none
                logger.debug("no bookmarks on the node watch: renewing it every %ss", SHORT_WATCH_SECONDS)
            raise

    def _follow_events(self, events: Iterator[Obj], rv: str, stopping: threading.Event) -> str:
        for event in events:
            if stopping.is_set():
                return ""
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                return ""  # 410 Gone: start again from a GET
            if kind == "BOOKMARK":
                self._bookmarked = True
            rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
            if kind in ("ADDED", "MODIFIED"):
                if self._copy is not None:
                    self._copy.offer(obj)
                self._seen(obj)
            elif kind == "DELETED" and self._copy is not None:
                self._copy.deleted()
        return rv

    def _poll(self, stopping: threading.Event) -> None:
        """kured's RBAC: re-read the Node every ``poll_seconds`` (``--period``), for about an hour."""
        for _ in range(max(int(RETRY_WATCH_AFTER / self._poll_seconds), 1)):
            if stopping.wait(self._poll_seconds):
                return
            # the loop's pass reads the Node every --period too: no second read of it while the loop runs.
            # A pass's period stretches by its own work and the machine's load, so only a loop that has
            # not looked for two periods (a drain, a long hold) needs this read.
            if self._keeper.poll(self._clock(), unless_within=LOOP_LOOKS * self._poll_seconds):
                self._on_request()
