"""One node's reboot cycle, shared by the sentinel-driven daemon and FleetLock.

Modules:

* ``state`` — every annotation key of the cycle, :class:`~pykured.cycle.state.NodeState` (the one type for
  a node's state: the Node plus its lock entry) and the patches that write it. Pure.
* ``decide`` — :func:`~pykured.cycle.decide.decide` and the rules it and FleetLock use ("rebooted?", "was
  this our cordon?", which back-off, ``--force-reboot``). Pure, ``now`` passed in.
* ``book`` — the only writer of the cycle's annotations and labels on a Node.
* ``steps`` — the steps both drivers run: begin, drain, reboot or hand-off, finish, uncordon, release,
  forget.
* ``daemon`` — the sentinel-driven reconcile loop: observe, decide, one step per pass.

FleetLock (:mod:`pykured.fleetlock`) drives the same steps from Zincati's requests.
"""
