"""The command lines: ``agent`` (kured's flags and the agent; the dispatch to pykured's subcommands),
``commands`` (the subcommands' table: ``pykured --help``, the dispatch and ``kubectl`` (the plugin) are made
from it), one module per subcommand's handlers (``requests``: request-reboot, rollout, status, plan;
``freeze``; ``lock``; ``notify``) and ``options`` (the options they share with the agent's flag table).
"""
