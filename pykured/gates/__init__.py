"""Gates in the reboot cycle: reboot hooks and settle gates, each phase bounded by a timeout.

``phase`` is the pure evaluation; ``hooks`` and ``settle`` are the gates; ``node``
(:class:`~pykured.gates.node.CycleGates`) is the observer of the cycle's moments that holds it (before the
drain, at the drain, before the release, at the end).
"""
