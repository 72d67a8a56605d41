"""The real control plane for pykured's tests (``pykured_dev.testenv``); ``TestEnv`` is its pytest face."""

from pykured_dev.testenv import Cluster as TestEnv

__all__ = ["TestEnv"]
