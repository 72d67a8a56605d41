"""What an agent publishes on its Node: ``agent`` (the ``pykured.dev/status`` record, built and decoded, pure)
and ``publisher`` (writing it, with the roll's record, when it changed); ``drainwatch`` (a running drain's
progress recorded in it, paced, with its metrics and the slow-drain Event). ``pykured status`` reads it in
:mod:`pykured.fleet.view`.
"""
