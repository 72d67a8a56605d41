"""Prometheus' Alertmanager: its alerts as a reboot blocker, and a silence while a node reboots.

* :mod:`~pykured.alertmanager.api`: the HTTP API v2 (``GET /api/v2/alerts``, ``POST /api/v2/silences``,
  ``DELETE /api/v2/silence/{id}``), every answer bounded and parsed whole;
* :mod:`~pykured.alertmanager.matchers`: ``--silence-during-reboot``'s matchers, Alertmanager's syntax
  templated with the node's name;
* :mod:`~pykured.alertmanager.gate`: ``--alertmanager-url``'s blocker, with kured's alert filters;
* :mod:`~pykured.alertmanager.silence`: the silence's record on the Node (``pykured.dev/silence``) and the
  keeper that makes and expires it.
"""
