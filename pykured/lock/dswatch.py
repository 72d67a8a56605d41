"""The waiters' watch of kured's DaemonSet: one object, listed and watched by name.

A node that waits for kured's annotation lock (:mod:`pykured.lock.annotation`) follows the DaemonSet as the
agent follows its Node and the policy ConfigMap: a LIST of the one object (``fieldSelector=metadata.name=``
its name) gives the copy and the version to watch from; then one watch call after another (half an hour each,
renewed with one request from the last version seen; bookmarks keep it recent) keeps the copy. 410 Gone
re-lists; a call silent for :data:`QUIET_SECONDS` (no event nor bookmark) is taken for dead and renewed from
its version; other failures back off (jittered, doubled up to :data:`WATCH_BACKOFF_MAX`). The watch runs while
a wait runs and ends when a call ends and no wait ran since it began: an agent that does not wait keeps no
watch on the DaemonSet.

The copy is served (:meth:`DaemonSetWatch.current`) only while the watch is heard from (an event or a bookmark
within :data:`LIVE_FOR` seconds) and never goes back to an older version of the object. Each new copy is
handed to ``on_copy`` under :attr:`DaemonSetWatch.changed`, which it notifies.

It needs ``list`` and ``watch`` on daemonsets (by name), which kured's RBAC does not grant: a 403 on either is
noted (:meth:`DaemonSetWatch.refused`, :attr:`DaemonSetWatch.refusal`), the watch stops, and it is tried again
:data:`RETRY_AFTER` seconds later (the RBAC may have changed).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from pykured.core.errors import ForbiddenError, KubeError, PykuredError

if TYPE_CHECKING:
    from pykured.kube.api import KubeApi
    from pykured.kube.client import Obj

logger = logging.getLogger(__name__)

WATCH_SECONDS = 1800
"""A watch call's length (the API server ends it; one request renews it from the last version seen)."""
QUIET_SECONDS = 330.0
"""No event nor bookmark for this long: the watch's connection is dead (the API server sends a bookmark every
minute or two)."""
LIVE_FOR = 150.0
"""Seconds for which the copy is served after the watch's last event or bookmark."""
WATCH_BACKOFF_MAX = 60.0
"""The longest pause between two failed watch calls (seconds; doubled from ``retry_interval``)."""
RETRY_AFTER = 3600.0
"""Seconds after a 403 before the watch is tried again."""


def _version(rv: object) -> int | None:
    """A resourceVersion as a number (etcd's revision), or None when it is not one."""
    return int(rv) if isinstance(rv, str) and rv.isdigit() else None


def _older(obj: Obj, than: Obj | None) -> bool:
    """Whether ``obj`` is an older version than ``than`` (not comparable: not older)."""
    mine = _version((obj.get("metadata") or {}).get("resourceVersion"))
    theirs = _version(((than or {}).get("metadata") or {}).get("resourceVersion"))
    return mine is not None and theirs is not None and mine < theirs


class DaemonSetWatch:
    """One DaemonSet followed by a single-object list/watch while a wait runs."""

    def __init__(
        self,
        kube: KubeApi,
        *,
        namespace: str,
        name: str,
        on_copy: Callable[[Obj | None], None],
        retry_interval: float = 5.0,
        watch_timeout: int = WATCH_SECONDS,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._kube = kube
        self._namespace = namespace
        self._name = name
        self._selector = f"metadata.name={name}"
        self._on_copy = on_copy
        self._retry_interval = retry_interval
        self._watch_timeout = watch_timeout
        self._sleep = sleep
        self._rng = random.Random()  # noqa: S311 - back-off jitter, not cryptography
        self.changed = threading.Condition()
        """Guards the copy and the watch's state; notified at each new copy and when the watch stops."""
        self._copy: Obj | None = None
        self._rv: str | None = None
        self._live = False
        self._heard = 0.0
        """When (monotonic) the watch last brought an event or a bookmark (or the LIST answered)."""
        self._follower: threading.Thread | None = None
        self._waits = 0
        self._wanted = False
        """A wait ran since the current watch call began (the watch is renewed when it ends)."""
        self._bookmarks = True
        self._bookmarked = False
        self._refused_at: float | None = None
        self.refusal: KubeError | None = None
        """The API server's last refusal (403) of the LIST or the watch."""

    @property
    def where(self) -> str:
        return f"{self._namespace}/{self._name}"

    def refused(self) -> bool:
        """Whether RBAC refused the list or the watch within the last :data:`RETRY_AFTER` seconds."""
        refused_at = self._refused_at
        return refused_at is not None and time.monotonic() - refused_at < RETRY_AFTER

    def current(self) -> Obj | None:
        """The copy while the watch is heard from (call with :attr:`changed` held, or accept a snapshot)."""
        with self.changed:
            if self._live and time.monotonic() - self._heard < LIVE_FOR:
                return self._copy
            return None

    # -- a wait's begin and end ------------------------------------------------------------------------------

    def begin(self) -> bool:
        """A wait begins: start the watch (a LIST first when there is no version to go on from) unless it
        runs. ``False`` when RBAC refuses it; raises ``KubeError`` on another failure of the LIST. Each
        ``True`` is paired with an :meth:`end`."""
        if self.refused():
            return False
        with self.changed:
            self._waits += 1
            self._wanted = True
        try:
            if self._rv is None:
                self._list()
            with self.changed:
                if self._follower is None:
                    self._live, self._heard = True, time.monotonic()
                    self._follower = threading.Thread(
                        target=self._follow, name="daemonset-watch", daemon=True
                    )
                    self._follower.start()
        except ForbiddenError as exc:
            self.end()
            self._refuse(exc)
            return False
        except KubeError:
            self.end()
            raise
        return True

    def end(self) -> None:
        with self.changed:
            self._waits -= 1

    # -- the watch -------------------------------------------------------------------------------------------

    def _list(self) -> None:
        answer = self._kube.list_daemonsets(self._namespace, field_selector=self._selector)
        items = [i for i in answer.get("items") or [] if isinstance(i, dict)]
        found = items[0] if items else None
        if found is not None:  # a list's items carry no kind: the copy is the object as a GET answers it
            found.setdefault("apiVersion", "apps/v1")
            found.setdefault("kind", "DaemonSet")
        with self.changed:
            self._rv = (answer.get("metadata") or {}).get("resourceVersion") or None
            self._live, self._heard = True, time.monotonic()
            if found is None or not _older(found, self._copy):
                self._set(found)

    def _set(self, found: Obj | None) -> None:
        """A new copy (``changed`` held)."""
        self._copy = found
        self._on_copy(found)
        self.changed.notify_all()

    def _refuse(self, exc: KubeError) -> None:
        logger.debug("Watching daemonset %s refused: %s", self.where, exc)
        with self.changed:
            self._refused_at, self.refusal = time.monotonic(), exc
            self._live, self._rv = False, None
            self.changed.notify_all()

    def _follow(self) -> None:
        """Watch calls from the last version seen until one ends and no wait ran since it began."""
        pause = 0.0
        try:
            while True:
                with self.changed:
                    rv = self._rv
                    self._wanted = False
                long = False
                try:
                    if rv is None:
                        self._list()
                        continue
                    long = self._bookmarks and self._watch_timeout > QUIET_SECONDS
                    events = self._kube.watch_daemonsets(
                        self._namespace,
                        resource_version=rv,
                        field_selector=self._selector,
                        timeout_seconds=self._watch_timeout,
                        quiet_seconds=QUIET_SECONDS if long else None,
                    )
                    for event in events:
                        if not self._apply(event):
                            break
                except ForbiddenError as exc:
                    self._refuse(exc)
                    return
                except PykuredError as exc:
                    pause = self._failed(exc, quiet=rv is not None and long, pause=pause)
                    if pause < 0:
                        return
                    continue
                except Exception as exc:  # the watch never dies of a surprise: it says so and goes on
                    logger.error("The watch of daemonset %s failed unexpectedly; starting it again",
                                 self.where, exc_info=exc)  # fmt: skip
                    pause = self._failed(exc, quiet=False, pause=pause)
                    if pause < 0:
                        return
                    continue
                pause = 0.0
                if self._stopped():
                    return
        finally:
            with self.changed:
                self._live = False
                if self._follower is threading.current_thread():
                    self._follower = None
                self.changed.notify_all()

    def _failed(self, exc: Exception, *, quiet: bool, pause: float) -> float:
        """After a failed watch call or LIST: the pause slept before the next, or -1 when the watch stops."""
        logger.debug("Watching daemonset %s failed: %s", self.where, exc)
        gone = isinstance(exc, KubeError) and exc.status == 410
        with self.changed:
            if quiet and not self._bookmarked:
                self._bookmarks = False  # quiet, and never a bookmark: the server sends none
            self._live = False
            if gone:
                self._rv = None
            self.changed.notify_all()
        if self._stopped():
            return -1.0
        if gone:
            return 0.0  # 410 Gone: list again at once
        pause = min(max(pause * 2, self._retry_interval), WATCH_BACKOFF_MAX)
        self._sleep(pause * self._rng.uniform(0.5, 1.0))
        return pause

    def _stopped(self) -> bool:
        """Whether the watch stops: no wait ran since the last call began, and none runs."""
        with self.changed:
            if self._wanted or self._waits > 0:
                return False
            self._follower, self._live = None, False
            return True

    def _apply(self, event: Obj) -> bool:
        """One watch event into the copy; ``False`` for an ``ERROR`` (410 Gone: the next call re-lists)."""
        kind, obj = event.get("type"), event.get("object") or {}
        with self.changed:
            self._heard, self._live = time.monotonic(), True
            if kind == "ERROR":
                logger.debug("DaemonSet watch ended: %s", obj.get("message"))
                self._rv = None
                return False
            rv = (obj.get("metadata") or {}).get("resourceVersion")
            self._rv = rv or self._rv
            if kind == "BOOKMARK":
                self._bookmarked = True
            elif kind in ("ADDED", "MODIFIED") and not _older(obj, self._copy):
                self._set(obj)
            elif kind == "DELETED":
                self._set(None)
            return True
