"""Prometheus' Alertmanager: its API, and a silence while a node reboots (its alerts as a reboot blocker:
:mod:`pykured.blockers.alertmanager`).

* :mod:`~pykured.alertmanager.api`: the HTTP API v2 (``GET /api/v2/alerts``, ``POST /api/v2/silences``,
  ``DELETE /api/v2/silence/{id}``), every answer bounded and parsed whole;
* :mod:`~pykured.alertmanager.matchers`: ``--silence-during-reboot``'s matchers, Alertmanager's syntax
  templated with the node's name;
* :mod:`~pykured.alertmanager.silence`: the silence's record on the Node (``pykured.dev/silence``) and the
  keeper that makes and expires it.
"""
