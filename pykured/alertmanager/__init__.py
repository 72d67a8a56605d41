"""Prometheus' Alertmanager: its API, and a silence while a node reboots (its alerts as a reboot blocker:
:mod:`pykured.blockers.alertmanager`).

* :mod:`~pykured.alertmanager.api`: the HTTP API v2 (``GET /api/v2/alerts``, ``POST /api/v2/silences``,
  ``DELETE /api/v2/silence/{id}``), every answer bounded and parsed whole;
* :mod:`~pykured.alertmanager.matchers`: ``--silence-during-reboot``'s matchers, Alertmanager's syntax
  templated with the node's name (they must name it; escaped in a regular expression);
* :mod:`~pykured.alertmanager.record`: the silence's record on the Node (``pykured.dev/silence``);
* :mod:`~pykured.alertmanager.silence`: the keeper that makes it, expires it before the node's slot is
  freed and retries an expiry that failed, and the mark of pykured's reboot silences (which the gate does
  not trust).
"""
