"""The command lines: ``agent`` (the dispatch: pykured's subcommands, else the agent with kured's flags, which
:mod:`pykured.agent.start` starts), ``commands`` (the subcommands' table: ``pykured --help``, the dispatch and
``kubectl`` (the plugin) are made from it), one module per subcommand (``status``, ``plan``,
``request_reboot``, ``rollout``, ``freeze`` with ``unfreeze``, ``quarantine`` (``unquarantine``), ``lock``,
``notify`` (``notify-test``)), ``options`` (the options they share with the agent's flag table) and
``output`` (terminal-safe printing, a command's streams and exit).

A command parses its line and prints; the work is the fleet's (:mod:`pykured.fleet`).
"""
