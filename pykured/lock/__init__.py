"""The reboot lock: who may drain and reboot now.

``base`` holds the :class:`~pykured.lock.base.Lock` protocol the daemon depends on, ``record`` kured's lock
JSON, ``annotation`` and ``lease`` the two backends, ``switch`` the guard that keeps a backend change safe,
``paced`` the pacing per node group, ``registry`` the backends by ``--lock-backend`` name (the agent's lock
is built there, and the operator commands open every backend there; the ``pykured lock`` commands are
:mod:`pykured.fleet.locks`). This package file imports nothing, so that importing the pure
``record``/``base`` modules never pulls in an adapter.
"""
