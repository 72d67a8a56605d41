"""The reboot lock: who may drain and reboot now.

``base`` holds the :class:`~pykured.lock.base.Lock` protocol the daemon depends on, ``record`` kured's lock
JSON, ``annotation`` and ``lease`` the two backends, ``switch`` the guard that keeps a backend change safe,
``paced`` the pacing per node group, ``operator`` a backend as the operator commands see it (its holders, an
unreadable value, its release), ``registry`` the backends by ``--lock-backend`` name and printed word, the
one vocabulary of backend names (the agent's lock is built there, and the operator commands open every
backend's view there and loop over them; the ``pykured lock`` commands are :mod:`pykured.fleet.locks`). This
package file imports nothing, so that importing the pure ``record``/``base`` modules never pulls in an
adapter.
"""
