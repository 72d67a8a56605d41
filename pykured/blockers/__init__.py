"""Reboot blockers: may this node take a slot now? Reasons not to reboot, evaluated in order, first one wins.

Mirrors kured's ``pkg/blockers``:

* :mod:`~pykured.blockers.base`: the one protocol (:class:`~pykured.blockers.base.Blocker`,
  ``check(now=...) -> Reason | None``) and :func:`~pykured.blockers.base.first_block`, which the drivers
  import from here;
* :mod:`~pykured.blockers.registry`: their order, declared once, and the builder the composition root uses;
* :mod:`~pykured.blockers.options`: what a blocker is built from (the flags, the node);
* one module per blocker: :mod:`~pykured.blockers.freeze` (the policy ConfigMap's freeze),
  :mod:`~pykured.blockers.pause` (a paused node), :mod:`~pykured.blockers.quarantine` (a quarantined node),
  :mod:`~pykured.blockers.nodemarks` (``--blocking-node-label``, ``--blocking-node-annotation``),
  :mod:`~pykured.blockers.prometheus` (``--prometheus-url``), :mod:`~pykured.blockers.alertmanager`
  (``--alertmanager-url``), :mod:`~pykured.blockers.pods` (``--blocking-pod-selector``).

The records the blockers read (the freeze, the pause, the quarantine) and their writers are
:mod:`pykured.policy`'s; the alert sources' HTTP client and kured's alert filters are :mod:`pykured.alerts`.
"""

from pykured.blockers.base import Blocker, first_block

__all__ = ["Blocker", "first_block"]
