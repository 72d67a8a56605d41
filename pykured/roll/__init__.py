"""The order of a roll (``--resume-rolls``): ``order`` (which nodes the current roll rebooted and who goes
next, pure), ``record`` (the roll's own record on each Node, ``pykured.dev/roll``, pure), ``rule`` (whose
turn it is to take a free slot, pure), ``queue`` (one Lease per waiting node) and ``turns`` (an agent's place
in the roll, over the queue and the lock).
"""
