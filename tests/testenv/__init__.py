"""The real control plane for pykured's tests (see ``pykured.testenv``); ``TestEnv`` is its pytest face."""

from pykured.testenv import Cluster as TestEnv

__all__ = ["TestEnv"]
