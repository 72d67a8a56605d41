"""kured's configuration: its flags, how they are read and checked, and the start-up summary.

* :mod:`~pykured.config.flags` — every kured flag (name, kind, default, help) and the ``--help`` text;
* :mod:`~pykured.config.reader` — reading the command line, the ``--config`` file and ``KURED_*`` env;
* :mod:`~pykured.config.checks` — kured's validations and warnings, as pure functions;
* :mod:`~pykured.config.settings` — :class:`Config`, the one frozen value the agent is built from;
* :mod:`~pykured.config.startup` — kured's start-up checks and lines, in its order; :func:`parse`.
"""

from __future__ import annotations

from pykured.config.settings import Config, usage
from pykured.config.startup import parse

__all__ = ["Config", "parse", "usage"]
