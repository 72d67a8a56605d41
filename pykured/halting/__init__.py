"""Halting the fleet: the freeze set as a halt, by whatever halts it.

Modules:

* ``fleet`` — :class:`~pykured.halting.fleet.FleetHalt`, the one procedure every halt runs (the freeze set
  conditionally, then said once: the log line, ``RebootHalted``, a notification).
* ``deadline`` — ``--reboot-deadline``: the watch that halts the fleet when a lock holder has not come back.
* ``streak`` — ``--max-failed-drains``: the fleet-wide count of failed drains, an observer of the cycle's
  moments (:mod:`pykured.cycle.observers`), that halts the fleet at its limit.
"""
