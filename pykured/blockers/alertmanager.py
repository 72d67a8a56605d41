"""``--alertmanager-url`` (pykured): no reboot while Alertmanager has an active alert that is neither
silenced nor inhibited.

The alerts come from ``GET /api/v2/alerts?active=true&silenced=false&inhibited=false``
(:func:`pykured.alertmanager.api.active_alerts`), so an operator's silence or an inhibition rule lets a node
go. kured's filters apply exactly as to ``--prometheus-url``, through the one filter
(:func:`pykured.alerts.filters.blocking_names`): ``--alert-filter-regexp`` and ``--alert-filter-match-only``
on the ``alertname`` label (an alert without one does not count, as a Prometheus sample without one does
not).
``--alert-firing-only`` keeps only firing alerts, and every alert Alertmanager holds is firing: Prometheus
sends it only firing alerts (a pending one is never sent; a resolved one is not active), so the flag changes
nothing here.

Errors block, as the Prometheus blocker's do: an unreachable Alertmanager, an HTTP error, an answer too
large, too deep or of the wrong shape is ``alertmanager query error: <err>``. The blocker is the same for
every node: built once.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable

from pykured.alertmanager.api import Alert, AlertmanagerError, active_alerts
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

    def active_alerts(self) -> list[str]:
        """The blocking alert names; raises :class:`AlertmanagerError` on any failure."""
        alerts = active_alerts(self._url, timeout=self._timeout)
        return blocking_names(
            alerts, regexp=self._regexp, match_only=self._match_only, firing_only=self._firing_only
        )

    def check(self, *, now: datetime.datetime) -> Reason | None:
        try:
            names = self.active_alerts()
        except AlertmanagerError as exc:
            return Reason(KIND, f"alertmanager query error: {exc}")
        return Reason(KIND, f"{alerts_message(names)} in Alertmanager") if names else None


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
