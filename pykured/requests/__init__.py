"""Boot-bound reboot requests, every side of them: ``record`` (the request and its history on the Node,
pure), ``keeper`` and ``watch`` (the agent's side: noticing a request at once, settling it after the
reboot), ``requester`` (the operator's side: ``request-reboot``, ``rollout``, ``status`` against the API
server) and ``rollout`` (a rollout's progress, pure).
"""
