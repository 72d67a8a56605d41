"""kured's alert filters, the one filter every alert source goes through, and the message that names them.

An alert blocks when it has a name (Prometheus' ``alertname`` label) and passes kured's filters
(:func:`keep_alert`): ``--alert-filter-regexp`` (Go's RE2, :func:`compile_alert_filter`) searched in its name,
kept when the search's outcome equals ``--alert-filter-match-only``; and, with ``--alert-firing-only``, when
its state is ``firing``. :func:`blocking_names` gives the distinct sorted names that block; Prometheus'
``ALERTS`` samples (:func:`filter_alerts`) and Alertmanager's alerts
(:func:`pykured.blockers.alertmanager.blocking_names`) both reach it. :func:`alerts_message` is kured's
``<n> active alerts: [a b …]``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pykured.core.errors import ConfigError
from pykured.gocompat.goflags import GoValueError
from pykured.gocompat.gofmt import go_list
from pykured.gocompat.goregexp import GoRegexp, compile_re2

MAX_LISTED = 10
"""kured lists at most ten alert or pod names, then ``...``."""


def compile_alert_filter(expression: str) -> GoRegexp:
    """Compile ``--alert-filter-regexp`` as Go RE2 (:func:`pykured.gocompat.goregexp.compile_re2`).

    An expression Go rejects raises :class:`~pykured.core.errors.ConfigError` with Go's error, as kured's flag
    parser rejects it at startup.
    """
    try:
        return compile_re2(expression)
    except GoValueError as exc:
        raise ConfigError(f'invalid argument "{expression}" for "--alert-filter-regexp" flag: {exc}') from exc


def keep_alert(
    name: str, *, alertstate: str | None, regexp: GoRegexp | None, match_only: bool, firing_only: bool
) -> bool:
    """kured's filters on one alert: ``--alert-filter-regexp`` (with ``--alert-filter-match-only``) on its
    name, ``--alert-firing-only`` on its ``alertstate``. Every alert source (Prometheus' ``ALERTS``,
    Alertmanager's alerts) goes through this one function."""
    if regexp is not None and (regexp.search(name) is not None) != match_only:
        return False
    return not (firing_only and alertstate != "firing")


def blocking_names(
    alerts: Iterable[tuple[str | None, str | None]],
    *,
    regexp: GoRegexp | None,
    match_only: bool,
    firing_only: bool,
) -> list[str]:
    """Distinct sorted names of the alerts that block, from ``(name, alertstate)`` pairs: an alert without a
    name does not count; the others go through :func:`keep_alert`."""
    names: set[str] = set()
    for name, state in alerts:
        if name is None:
            continue
        if keep_alert(name, alertstate=state, regexp=regexp, match_only=match_only, firing_only=firing_only):
            names.add(name)
    return sorted(names)


def filter_alerts(
    samples: Iterable[Mapping[str, Any]],
    *,
    regexp: GoRegexp | None,
    match_only: bool,
    firing_only: bool,
) -> list[str]:
    """Distinct sorted names of the alerts that block, from Prometheus vector samples.

    A sample counts when it has an ``alertname`` label and a value ≠ 0; then, if ``regexp`` is set, when
    ``regexp.search(name)`` equals ``match_only``; and, with ``firing_only``, when ``alertstate == "firing"``.
    """
    return blocking_names(
        _named_samples(samples), regexp=regexp, match_only=match_only, firing_only=firing_only
    )


def _named_samples(samples: Iterable[Mapping[str, Any]]) -> Iterable[tuple[str | None, str | None]]:
    """``(alertname, alertstate)`` of each sample with a value ≠ 0."""
    for sample in samples:
        metric = sample.get("metric") or {}
        name = metric.get("alertname")
        if name is None or _sample_value(sample) == 0:
            continue
        yield str(name), metric.get("alertstate")


def _sample_value(sample: Mapping[str, Any]) -> float:
    value = sample.get("value")
    try:
        return float(value[1]) if isinstance(value, list | tuple) and len(value) == 2 else float("nan")
    except (TypeError, ValueError):
        return float("nan")


def alerts_message(names: Sequence[str]) -> str:
    """``<n> active alerts: [first ten ...]``."""
    shown = list(names[:MAX_LISTED]) + (["..."] if len(names) > MAX_LISTED else [])
    return f"{len(names)} active alerts: {go_list(shown)}"
