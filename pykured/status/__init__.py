"""What an agent publishes on its Node (``agent``: the ``pykured.dev/status`` record, built and decoded) and
how ``pykured status`` reads the fleet from it (``fleet``: one row per node, pure).
"""
