"""Boot-bound reboot requests, the agent's side: ``record`` (the request and its history on the Node, pure),
``keeper`` and ``watch`` (noticing a request at once, settling it after the reboot). The operator's side
(``request-reboot``, ``rollout``) is :mod:`pykured.fleet`, which reads the record.
"""
