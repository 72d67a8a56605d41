"""The version, a constant: read at start-up without scanning the installed packages' metadata.

pyproject.toml's ``version`` is the one the package is built with; this copy is held to it, and to the
installed package's metadata, by ``tests/test_version.py``.
"""

__version__ = "0.1.0"
