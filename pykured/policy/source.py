"""The policy ConfigMap, watched: blackouts and the freeze switch change without a restart.

:class:`PolicySource` lists the ConfigMap (``fieldSelector=metadata.name=<name>``, so a missing one is an
empty list with a resourceVersion to watch from) and then watches it: six-hour watch calls, each renewed with
one request from the last version seen, taken for dead after ``QUIET_SECONDS`` without an event or a
bookmark (half-hour calls against an API server that sends no bookmarks), so an idle agent asks about it
four times a day. Every version is parsed with
:func:`~pykured.policy.document.parse_policy_map`; one that does not parse is refused with a log line
and the last good policy stays in force, except that a freeze or halt the refused version sets is honoured
(a garbled record reads as frozen, :meth:`~pykured.policy.freeze.FreezeRecord.garbled`): the freeze never
goes blind. Until the first successful read the policy is unknown and no reboot may start (fail
closed). ``on_change`` is called after every accepted change, so the daemon re-evaluates at once. The watch
thread never dies of a bad value: anything a version raises is a refusal, and anything else that goes wrong
is logged with its traceback and the watch starts again.

Forbidden (403: kured's RBAC grants no access to ConfigMaps) is not an outage: the agent says once, in one
line, that blackouts and the freeze are unavailable and why, takes the empty policy (the static windows and
``--blackout`` still apply) and keeps working; it looks again every ``forbidden_interval`` seconds, quietly,
and says so when access is granted. :attr:`PolicySource.honours` is what the agent publishes in its status:
``on`` (the ConfigMap was read: the freeze is honoured), ``forbidden`` or ``pending`` (never read yet).

Two views for the daemon: :class:`PolicyWindow` (the static
:class:`~pykured.policy.maintenance.MaintenancePolicy` plus the ConfigMap's blackouts, with the same
``contains``/``next_open`` as kured's window) and the freeze's blocker
(:class:`pykured.blockers.freeze.FreezeBlocker`, which holds every new reboot while a freeze is active).
RBAC: ``get``, ``list``, ``watch`` on configmaps in ``--ds-namespace`` (``pykured freeze`` also needs
``create`` and ``patch``).
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import threading
import urllib.parse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pykured.core.errors import ForbiddenError, KubeError
from pykured.policy.document import PolicyDoc, PolicyMapError, parse_policy_map
from pykured.policy.maintenance import MaintenancePolicy

if TYPE_CHECKING:
    from pykured.kube.api import KubeApi

logger = logging.getLogger(__name__)


def configmaps_path(namespace: str, name: str | None = None) -> str:
    base = f"/api/v1/namespaces/{urllib.parse.quote(namespace, safe='')}/configmaps"
    return f"{base}/{urllib.parse.quote(name, safe='')}" if name else base


WATCH_SECONDS = 24 * 3600
"""A watch call's length when the API server sends bookmarks (one request renews it from its version)."""
SHORT_WATCH_SECONDS = 1800
"""A watch call's length when it sends none (a dead connection is noticed at the call's end)."""
QUIET_SECONDS = 330.0
"""No event nor bookmark for this long: the watch's connection is dead (the API server sends a bookmark every
minute or two)."""


class PolicySource:
    """The last good :class:`PolicyDoc` of one ConfigMap, kept current by a watch thread."""

    def __init__(
        self,
        kube: KubeApi,
        *,
        namespace: str,
        name: str,
        zone: datetime.tzinfo,
        on_change: Callable[[], None] | None = None,
        retry_interval: float = 5.0,
        watch_timeout: int = WATCH_SECONDS,
        forbidden_interval: float = 3600.0,
    ) -> None:
        self._kube = kube
        self._namespace = namespace
        self._name = name
        self._zone = zone
        self._on_change = on_change
        self._retry_interval = retry_interval
        self._watch_timeout = watch_timeout
        self._forbidden_interval = forbidden_interval
        self._forbidden: str | None = None
        self.denials = 0
        """How many reads were forbidden (403)."""
        self.restarts = 0
        """How many times the watch failed on something else than the API and was started again."""
        self._lock = threading.Lock()
        self._doc: PolicyDoc | None = None
        self._refused: str | None = None
        self._rv: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._bookmarks = True
        """Whether the API server is taken to send bookmarks (a quiet watch with none seen: no longer)."""
        self._bookmarked = False

    @property
    def where(self) -> str:
        return f"{self._namespace}/{self._name}"

    @property
    def doc(self) -> PolicyDoc | None:
        """The policy in force (None until the first successful read)."""
        with self._lock:
            return self._doc

    @property
    def forbidden(self) -> str | None:
        """Why the ConfigMap may not be read (403), or None."""
        with self._lock:
            return self._forbidden

    @property
    def honours(self) -> str:
        """``on`` (read: the freeze is honoured), ``forbidden`` (RBAC) or ``pending`` (not read yet)."""
        with self._lock:
            if self._forbidden is not None:
                return "forbidden"
            return "pending" if self._doc is None else "on"

    def _deny(self, exc: ForbiddenError) -> None:
        """A 403: log one line (the first time), run on the empty policy."""
        with self._lock:
            self.denials += 1
            first = self._forbidden is None
            self._forbidden = str(exc)
            changed = self._doc is None or self._doc != PolicyDoc()
            self._doc = PolicyDoc()
        if first:
            logger.warning(
                "Policy ConfigMap %s cannot be read (forbidden: the agent's RBAC grants no get/list/watch on "
                "configmaps in %s): blackouts from it and the freeze (pykured freeze) are unavailable; "
                "continuing without them",
                self.where,
                self._namespace,
            )
        if changed and self._on_change is not None:
            self._on_change()

    @property
    def refused(self) -> str | None:
        """Why the latest version was refused (None when it was accepted)."""
        with self._lock:
            return self._refused

    # -- reading ------------------------------------------------------------------------------------------

    def apply(self, data: dict[str, Any] | None) -> bool:
        """Take one version of the ConfigMap's ``data`` (None: deleted/absent); False when refused."""
        try:
            doc = parse_policy_map(data, zone=self._zone)
        except PolicyMapError as exc:
            self._refuse(str(exc), exc.doc)
            return False
        except Exception as exc:  # a parser's bug must not blind the freeze: refuse, keep the last good
            logger.exception("Reading policy ConfigMap %s failed unexpectedly", self.where)
            self._refuse(f"unreadable ({type(exc).__name__})", PolicyDoc())
            return False
        with self._lock:
            changed = doc != self._doc
            first = self._doc is None
            granted = self._forbidden is not None
            self._doc, self._refused, self._forbidden = doc, None, None
        if granted:
            logger.info("Policy ConfigMap %s can be read now: blackouts and the freeze apply", self.where)
        if changed and doc.freeze is not None and doc.freeze.unreadable:
            logger.error(
                "Policy ConfigMap %s: the freeze record cannot be read (%s); treating the fleet as frozen "
                "until it is rewritten (pykured freeze or pykured unfreeze)",
                self.where,
                doc.freeze.unreadable,
            )
        if changed and doc.halt is not None and doc.halt.unreadable:
            logger.error(
                "Policy ConfigMap %s: the halt record cannot be read (%s); treating the fleet as halted "
                "until pykured unfreeze",
                self.where,
                doc.halt.unreadable.removeprefix("key halt: "),
            )
        if changed:
            freeze = doc.freeze.describe() if doc.freeze else "none"
            halt = f", halt: {doc.halt.describe()}" if doc.halt else ""
            logger.info(
                "Policy ConfigMap %s %s: %d blackout(s), freeze: %s%s",
                self.where,
                "read" if first else "changed",
                len(doc.blackouts),
                freeze,
                halt,
            )
            if self._on_change is not None:
                self._on_change()
        return True

    def _refuse(self, why: str, refused: PolicyDoc) -> None:
        """Refuse a version: the last good policy stays, with the freeze and halt the version sets (if any;
        one it does not set is not lifted by it) and the halts it says were lifted."""
        with self._lock:
            said = self._refused == why
            current = self._doc
        if not said:  # said before it shows in ``refused``
            pairs = (("halt", refused.halt), ("freeze", refused.freeze))
            sets = [f"the {what} it sets ({record.describe()})" for what, record in pairs if record]
            honoured = f"; honouring {' and '.join(sets)}" if sets else ""
            logger.error(
                "Refusing policy ConfigMap %s: %s; keeping the last good policy%s", self.where, why, honoured
            )
        updated = current
        if current is not None:
            updated = dataclasses.replace(
                current,
                freeze=refused.freeze or current.freeze,
                halt=refused.halt or current.halt,
                lifted=refused.lifted or current.lifted,
            )
        changed = updated != current
        with self._lock:
            self._refused = why
            if changed and self._doc is not None:
                self._doc = updated
        if changed and self._on_change is not None:
            self._on_change()

    def refresh(self) -> None:
        """List the ConfigMap once (raises :class:`KubeError`)."""
        answer = self._kube.request(
            "GET",
            configmaps_path(self._namespace),
            query={"fieldSelector": f"metadata.name={self._name}"},
        )
        items = answer.get("items") or []
        self._rv = (answer.get("metadata") or {}).get("resourceVersion")
        self.apply((items[0].get("data") or {}) if items else None)

    def _watch_once(self) -> None:
        assert self._rv is not None
        long = self._bookmarks and self._watch_timeout > QUIET_SECONDS
        events = self._kube.watch(
            configmaps_path(self._namespace),
            query={"fieldSelector": f"metadata.name={self._name}", "resourceVersion": self._rv},
            timeout_seconds=self._watch_timeout if long else min(self._watch_timeout, SHORT_WATCH_SECONDS),
            quiet_seconds=QUIET_SECONDS if long else None,
        )
        try:
            for event in events:
                if self._stop.is_set():
                    return
                kind, obj = event.get("type"), event.get("object") or {}
                self._bookmarked = self._bookmarked or kind == "BOOKMARK"
                if kind == "ERROR":
                    self._rv = None  # 410 Gone: list again
                    return
                self._rv = (obj.get("metadata") or {}).get("resourceVersion") or self._rv
                if kind in ("ADDED", "MODIFIED"):
                    self.apply(obj.get("data") or {})
                elif kind == "DELETED":
                    self.apply(None)
        except KubeError:
            if long and not self._bookmarked:
                self._bookmarks = False  # quiet, and never a bookmark: the server sends none
            raise
        finally:
            close = getattr(events, "close", None)
            if close is not None:
                close()

    def run(self) -> None:
        """List, then watch, until :meth:`stop`; errors are logged and retried."""
        while not self._stop.is_set():
            try:
                if self._rv is None:
                    self.refresh()
                self._watch_once()
            except ForbiddenError as exc:
                self._rv = None
                self._deny(exc)
                self._stop.wait(self._forbidden_interval)
            except KubeError as exc:
                self._rv = None
                logger.warning("Reading policy ConfigMap %s failed, retrying: %s", self.where, exc)
                self._stop.wait(self._retry_interval)
            except Exception:  # the watch never dies: say so (once per failure), start it again
                self._rv = None
                self.restarts += 1
                logger.exception(
                    "The watch of policy ConfigMap %s failed; starting it again in %gs (the last good "
                    "policy stays in force)",
                    self.where,
                    self._retry_interval,
                )
                self._stop.wait(self._retry_interval)

    def start(self) -> None:
        """Read once now (best effort), then keep watching in a daemon thread."""
        try:
            self.refresh()
        except ForbiddenError as exc:
            self._deny(exc)
        except KubeError as exc:
            logger.warning("Reading policy ConfigMap %s failed, retrying: %s", self.where, exc)
        except Exception:  # the watch thread reads it again
            logger.exception("Reading policy ConfigMap %s failed unexpectedly, retrying", self.where)
        self._thread = threading.Thread(target=self.run, name="policy-configmap", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()


class PolicyWindow:
    """The maintenance policy in force: the static one plus the ConfigMap's blackouts."""

    def __init__(self, base: MaintenancePolicy, source: PolicySource | None = None) -> None:
        self.base = base
        self.source = source

    def current(self) -> MaintenancePolicy | None:
        """None while the ConfigMap was never read (no reboot may start)."""
        if self.source is None:
            return self.base
        doc = self.source.doc
        return None if doc is None else self.base.with_blackouts(doc.blackouts)

    def contains(self, now: datetime.datetime) -> bool:
        policy = self.current()
        return policy is not None and policy.contains(now)

    def next_open(self, now: datetime.datetime) -> datetime.datetime | None:
        policy = self.current()
        return None if policy is None else policy.next_open(now)

    def why_closed(self, now: datetime.datetime) -> str:
        """For logs: ``in blackout …``, ``policy ConfigMap … not read yet`` or ``outside …``."""
        policy = self.current()
        if policy is None:
            return f"policy ConfigMap {self.source.where if self.source else ''} not read yet"
        blackout = policy.blackout(now)
        if blackout is not None:
            return f"in blackout {blackout}"
        return "outside the maintenance window"

    def __str__(self) -> str:
        return "; ".join(self.base.describe())
