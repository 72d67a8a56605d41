"""The Lock protocol's small helpers, and that both backends and the guard satisfy it."""

from __future__ import annotations

import itertools

import pytest

from pykured.core.errors import ForbiddenError, KubeError, LockError
from pykured.lock.base import AcquireResult, Lock, LockView, forbidden
from pykured.lock.record import LockEntry


def chained(*errors: BaseException) -> BaseException:
    """``errors[0]`` raised from ``errors[1]`` raised from ..."""
    for outer, inner in itertools.pairwise(errors):
        outer.__cause__ = inner
    return errors[0]


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (None, False),
        (LockError("x"), False),
        (chained(LockError("x"), ForbiddenError("no", status=403)), True),
        (chained(LockError("x"), LockError("y"), ForbiddenError("no", status=403)), True),
        (chained(LockError("x"), KubeError("boom", status=500)), False),
    ],
    ids=["none", "plain", "direct-cause", "deep-cause", "other-cause"],
)
def test_forbidden(exc: BaseException | None, expected: bool) -> None:
    assert forbidden(exc) is expected


@pytest.mark.parametrize(
    ("holders", "text"),
    [((), ""), ((LockEntry("a"),), "a"), ((LockEntry("a"), LockEntry("b")), "a, b")],
    ids=["none", "one", "two"],
)
def test_holder_names(holders: tuple[LockEntry, ...], text: str) -> None:
    assert AcquireResult(False, holders).holder_names == text


PROTOCOL = (
    "backend",
    "node_id",
    "concurrency",
    "acquire",
    "holding",
    "release",
    "holders",
    "watched",
    "wait_for_change",
)
VIEW = (*PROTOCOL, "where", "entries")


def test_implementations_satisfy_the_protocol() -> None:
    from pykured.lock.annotation import AnnotationLock
    from pykured.lock.lease import LeaseLock
    from pykured.lock.paced import GroupPacedLock
    from pykured.lock.switch import GuardedLock

    for cls in (AnnotationLock, LeaseLock, GuardedLock, GroupPacedLock):
        missing = [name for name in PROTOCOL if not hasattr(cls, name)]
        assert missing == [], cls
    for cls in (AnnotationLock, LeaseLock):
        missing = [name for name in VIEW if not hasattr(cls, name)]
        assert missing == [], cls
    assert all(hasattr(Lock, name) for name in PROTOCOL)
    assert all(hasattr(LockView, name) for name in VIEW)
