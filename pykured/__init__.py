"""pykured: a drop-in Python replacement for kured, the Kubernetes reboot daemon."""

from importlib import metadata as _metadata

try:
    # pyproject.toml's version, the one place it is set: the package's metadata, read where it is installed
    # (the image, the kubectl plugin's file, a virtualenv). The image's tag, the chart's version and
    # appVersion and the plugin's krew manifest carry the same (tests/test_version.py).
    __version__ = _metadata.version("pykured")
except _metadata.PackageNotFoundError:  # a source tree run without installing it
    __version__ = "0+unknown"
