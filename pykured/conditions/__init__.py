"""Reboots from Node conditions (``--reboot-condition``): which conditions are needs and their breakers
(``record``, pure), the fleet breaker (``fleet``: how many nodes show one, the halt) and the agent's keeper
(``keeper``: the need each pass, the count, the quarantine)."""
