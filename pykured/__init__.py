"""pykured: a drop-in Python replacement for kured, the Kubernetes reboot daemon."""

from pykured._version import __version__

__all__ = ["__version__"]
