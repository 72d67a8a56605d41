"""``--alertmanager-url`` (pykured): no reboot while Alertmanager has an active alert that is neither
silenced nor inhibited — pykured's own reboot silences not counting as silences.

The alerts come from ``GET /api/v2/alerts?active=true&silenced=true&inhibited=false``
(:func:`pykured.alertmanager.api.active_alerts`), each with the silences that cover it. An operator's silence
or an inhibition rule lets a node go. kured's filters apply exactly as to ``--prometheus-url``, through the
one filter (:func:`pykured.alerts.filters.blocking_names`): ``--alert-filter-regexp`` and
``--alert-filter-match-only`` on the ``alertname`` label (an alert without one does not count, as a
Prometheus sample without one does not). ``--alert-firing-only`` keeps only firing alerts, and every alert
Alertmanager holds is firing: Prometheus sends it only firing alerts (a pending one is never sent; a
resolved one is not active), so the flag changes nothing here.

Decision: the gate does not trust pykured's own silences. A silence made by ``--silence-during-reboot``
(``createdBy: pykured``, a comment starting ``pykured: node ``: :func:`~pykured.alertmanager.silence.
is_reboot_silence`) exists to keep a rebooting node's alerts from paging anyone, never to let another node
go: an alert covered only by such silences holds the node as if it were not silenced at all. This holds for
every one of them, whichever node (or cluster sharing the Alertmanager) it was made for, the deciding node's
own included: the gate is asked only for a node that holds no slot and runs no cycle
(:func:`pykured.cycle.decide.needs_blockers`), so a silence of its own is one whose cycle ended and whose
expiry failed (:mod:`pykured.alertmanager.silence` retries it) — the node's alerts under it must hold its
next reboot too. So a silence that outlives its reboot (Alertmanager unreachable at the cycle's end, an
agent that died) never lets the next node take the lock while the previous node's alert fires. Any silence
that is not pykured's (an operator's) is trusted as before: one of them is enough to let the alert go.

The silences are read (``GET /api/v2/silences``) only when a counted alert is silenced, after the alerts,
so every silence an alert names is in the list; an id the list does not have is not trusted (fail safe).

Errors block, as the Prometheus blocker's do: an unreachable Alertmanager, an HTTP error, an answer too
large, too deep or of the wrong shape is ``alertmanager query error: <err>``. The blocker is the same for
every node: built once.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Collection, Iterable

from pykured.alertmanager.api import Alert, AlertmanagerError, active_alerts, list_silences
from pykured.alertmanager.silence import is_reboot_silence
from pykured.alerts import filters
from pykured.alerts.filters import alerts_message, compile_alert_filter
from pykured.blockers.options import FleetInputs
from pykured.core.model import Reason
from pykured.gocompat.goregexp import GoRegexp

KIND = "alertmanager"


def blocking_names(
    alerts: Iterable[Alert], *, regexp: GoRegexp | None, match_only: bool, firing_only: bool
) -> list[str]:
    """Distinct sorted names of the alerts that block, after kured's filters (every alert Alertmanager holds
    is firing: the module docstring)."""
    named = ((alert.name, "firing") for alert in alerts)
    return filters.blocking_names(named, regexp=regexp, match_only=match_only, firing_only=firing_only)


def holds(alert: Alert, *, trusted: Collection[str]) -> bool:
    """Does ``alert`` hold the node? Yes unless a ``trusted`` silence (one that is not pykured's reboot
    silence) covers it."""
    return not any(ident in trusted for ident in alert.silenced_by)


@dataclasses.dataclass(frozen=True, slots=True)
class Holding:
    """The alert names that hold the node, and those of them covered only by pykured's reboot silences."""

    names: list[str]
    untrusted: list[str]

    def message(self) -> str:
        text = f"{alerts_message(self.names)} in Alertmanager"
        if self.untrusted:
            shown = " ".join(self.untrusted)
            text += f" ([{shown}] silenced only by pykured's reboot silences, which the gate does not trust)"
        return text


class AlertmanagerAlertBlocker:
    """Blocks while Alertmanager reports active alerts (see the module docstring)."""

    def __init__(
        self,
        url: str,
        *,
        filter_regexp: str | None = None,
        match_only: bool = False,
        firing_only: bool = False,
        timeout: float = 10,
    ) -> None:
        self._url = url
        self._regexp = compile_alert_filter(filter_regexp) if filter_regexp is not None else None
        self._match_only = match_only
        self._firing_only = firing_only
        self._timeout = timeout

    def _names(self, alerts: Iterable[Alert]) -> list[str]:
        return blocking_names(
            alerts, regexp=self._regexp, match_only=self._match_only, firing_only=self._firing_only
        )

    def holding(self) -> Holding:
        """The alerts that hold the node; raises :class:`AlertmanagerError` on any failure."""
        alerts = active_alerts(self._url, silenced=True, timeout=self._timeout)
        counted = [alert for alert in alerts if self._names([alert])]  # kured's filters first
        trusted: set[str] = set()
        if any(alert.silenced_by for alert in counted):
            silences = list_silences(self._url, timeout=self._timeout)
            trusted = {s.ident for s in silences if not is_reboot_silence(s)}
        held = [alert for alert in counted if holds(alert, trusted=trusted)]
        return Holding(self._names(held), self._names(a for a in held if a.silenced_by))

    def active_alerts(self) -> list[str]:
        """The blocking alert names; raises :class:`AlertmanagerError` on any failure."""
        return self.holding().names

    def check(self, *, now: datetime.datetime) -> Reason | None:
        try:
            found = self.holding()
        except AlertmanagerError as exc:
            return Reason(KIND, f"alertmanager query error: {exc}")
        return Reason(KIND, found.message()) if found.names else None


def build(inputs: FleetInputs) -> AlertmanagerAlertBlocker | None:
    """The blocker when ``--alertmanager-url`` is set (kured's alert filters, as for ``--prometheus-url``)."""
    options = inputs.options
    if not options.alertmanager_url:
        return None
    return AlertmanagerAlertBlocker(
        options.alertmanager_url,
        filter_regexp=options.alert_filter_regexp,
        match_only=options.alert_filter_match_only,
        firing_only=options.alert_firing_only,
    )
