"""What the alert sources share: the HTTP client and kured's alert filters.

Prometheus (``--prometheus-url``: the blocker, the settle query) and Alertmanager (``--alertmanager-url``: the
blocker, the silence while a node reboots) are asked through one client and their alerts filtered by one
filter, so a fix to either reaches both:

* :mod:`~pykured.alerts.client`: Prometheus' instant query, and the targets (basic auth from the URL, never
  shown), proxies, redirects and bounded answers Alertmanager's API shares;
* :mod:`~pykured.alerts.filters`: kured's ``--alert-filter-regexp``, ``--alert-filter-match-only`` and
  ``--alert-firing-only``, and the ``<n> active alerts: […]`` message.
"""
