"""pykured: a drop-in Python replacement for kured, the Kubernetes reboot daemon."""

__version__ = "0.1.0"
