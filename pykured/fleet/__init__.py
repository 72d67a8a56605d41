"""What an operator does to the fleet: the commands that read what the agents publish and act on it.

``view`` is ``pykured status`` (one row per node, pure), ``plan`` is ``pykured plan`` (what the roll will do,
pure), ``requester`` requests and cancels reboots and rollouts against the API server, ``rollout`` and
``canary`` are a rollout's progress and its canary rule (pure), ``canaryrun`` runs a canary rollout (and
sets the halt when a canary fails), ``freeze`` is ``pykured freeze``/``unfreeze`` (and which agents honour
the freeze), ``locks`` is ``pykured lock status|release``, ``quarantine`` is ``pykured unquarantine``. Every
lock backend is reached through its operator view, one per registered backend
(:func:`pykured.lock.registry.open_views`), which these commands loop over without naming a backend. The
command lines (:mod:`pykured.cli`) parse and print; the work is here.

The agents' side (:mod:`pykured.status`, :mod:`pykured.requests`, :mod:`pykured.roll`) publishes records on
each Node — the status, the reboot request, the roll's record — that this package reads; nothing on the
agents' side imports it.
"""
