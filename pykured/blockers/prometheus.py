"""``--prometheus-url`` (kured): no reboot while Prometheus reports an active alert.

An instant query ``ALERTS`` at ``now`` against ``<url>/api/v1/query``, sent the way client_golang sends it
(:func:`pykured.alerts.client.instant_query`: POST form, GET fallback on 405/501). Samples with an
``alertname`` and a non-zero value count, filtered by kured's filters (:func:`pykured.alerts.filters.
filter_alerts`: ``--alert-filter-regexp``, ``--alert-filter-match-only``, ``--alert-firing-only``). Message
``<n> active alerts: [a b …]`` (ten names, then ``...``); any query failure is ``prometheus query error:
<err>``. The blocker is the same for every node: built once.
"""

from __future__ import annotations

import datetime
from typing import Any

from pykured.alerts.client import PromQueryError, instant_query
from pykured.alerts.filters import alerts_message, compile_alert_filter, filter_alerts
from pykured.blockers.options import FleetInputs
from pykured.core.model import Reason


def _valid_sample(sample: Any) -> bool:
    """A vector sample as the filter reads it: a ``metric`` object whose labels are strings."""
    if not isinstance(sample, dict):
        return False
    metric = sample.get("metric", {})
    return isinstance(metric, dict) and all(isinstance(v, str) for v in metric.values())


class PrometheusAlertBlocker:
    """Blocks while Prometheus reports active alerts (see the module docstring)."""

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

    def active_alerts(self, *, now: datetime.datetime) -> list[str]:
        """The blocking alert names; raises :class:`PromQueryError` on any failure."""
        result_type, result = instant_query(self._url, "ALERTS", at=now.timestamp(), timeout=self._timeout)
        if result_type != "vector" or not isinstance(result, list):
            raise PromQueryError(f"Unexpected value type: {result_type}")
        if not all(_valid_sample(sample) for sample in result):
            raise PromQueryError("malformed vector sample")
        return filter_alerts(
            result, regexp=self._regexp, match_only=self._match_only, firing_only=self._firing_only
        )

    def check(self, *, now: datetime.datetime) -> Reason | None:
        try:
            names = self.active_alerts(now=now)
        except PromQueryError as exc:
            return Reason("prometheus", f"prometheus query error: {exc}")
        return Reason("prometheus", alerts_message(names)) if names else None


def build(inputs: FleetInputs) -> PrometheusAlertBlocker | None:
    """The blocker when ``--prometheus-url`` is set."""
    options = inputs.options
    if not options.prometheus_url:
        return None
    return PrometheusAlertBlocker(
        options.prometheus_url,
        filter_regexp=options.alert_filter_regexp,
        match_only=options.alert_filter_match_only,
        firing_only=options.alert_firing_only,
    )
