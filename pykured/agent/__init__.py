"""The node agent's assembly: ``wiring`` (the composition root, which builds an agent from a
:class:`~pykured.config.Config` and alone names concrete classes) and ``daemon`` (the reconcile loop it
builds: one node's agent, driving the reboot cycle for the sentinel, a reboot request and the Zincati
hand-off), which receives what it uses, down to its own ``parts`` (the reboot requests' keeper and watch,
the status publisher, the turns in a roll).
"""
