"""What an agent publishes on its Node: ``agent`` (the ``pykured.dev/status`` record, built and decoded, pure)
and ``publisher`` (writing it, with the roll's record, when it changed). ``pykured status`` reads it in
:mod:`pykured.fleet.view`.
"""
