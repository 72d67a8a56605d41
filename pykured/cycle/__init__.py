"""One node's reboot cycle, shared by the sentinel-driven daemon and FleetLock.

Modules:

* ``state`` — every annotation key of the cycle, :class:`~pykured.cycle.state.NodeState` (the one type for
  a node's state: the Node plus its lock entry) and the patches that write it. Pure.
* ``decide`` — :func:`~pykured.cycle.decide.decide` and the rules it and FleetLock use ("rebooted?", "was
  this our cordon?", which back-off, ``--force-reboot``). Pure, ``now`` passed in.
* ``book`` — the only writer of the cycle's annotations and labels on a Node.
* ``observers`` — the cycle's moments and the one protocol of the features that act at them (the metrics,
  the taint, hooks and settle gates, the failed-drain streak, the silence: registered in
  :mod:`pykured.agent.wiring`).
* ``steps`` — the steps both drivers run: begin, drain, reboot or hand-off, finish, uncordon, release,
  forget.
* ``run`` — :class:`~pykured.cycle.run.CycleRunner`: the decided step carried out, the same for every driver.
* ``nodecopy`` — the agent's watched copy of its own Node.

The daemon (:mod:`pykured.agent.daemon`) and FleetLock (:mod:`pykured.fleetlock`) drive the same steps.
"""
