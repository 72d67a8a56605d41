"""The command lines: ``agent`` (kured's flags, the agent, and the dispatch to pykured's subcommands) and
``requests`` (``request-reboot``, ``rollout``, ``status``).
"""
