"""The reboot lock: who may drain and reboot now.

``base`` holds the :class:`~pykured.lock.base.Lock` protocol the daemon depends on, ``record`` kured's lock
JSON, ``annotation`` and ``lease`` the two backends, ``switch`` the guard that keeps a backend change safe
(the ``pykured lock`` commands are :mod:`pykured.fleet.locks`). This package file imports nothing, so that
importing the pure ``record``/``base`` modules never pulls in an adapter.
"""
