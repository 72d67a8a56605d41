"""The lock backends' read retried until a deadline (pure: the read and the sleep are fakes)."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from pykured.core.errors import ForbiddenError, KubeError, LockError
from pykured.lock.retry import read_until_deadline

LOG = logging.getLogger("tests.lock.retry")


def reader(*answers: KubeError | str) -> Callable[[], str]:
    queue = list(answers)

    def read() -> str:
        answer = queue.pop(0)
        if isinstance(answer, KubeError):
            raise answer
        return answer

    return read


def read(read: Callable[[], str], sleeps: list[float], timeout: float = 60.0) -> str:
    return read_until_deadline(
        read,
        interval=5.0,
        timeout=timeout,
        sleep=sleeps.append,
        log=LOG,
        retrying="Error reading %s, retrying: %s",
        where="ns/obj",
        give_up=lambda exc, forbidden: LockError(f"gave up (forbidden={forbidden}): {exc}"),
    )


def test_failures_are_retried_every_interval_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    sleeps: list[float] = []
    with caplog.at_level(logging.WARNING, logger=LOG.name):
        answer = read(reader(KubeError("boom", status=500), KubeError("down"), "ok"), sleeps)
    assert answer == "ok"
    assert sleeps == [5.0, 5.0]
    assert [r.getMessage() for r in caplog.records] == [
        "Error reading ns/obj, retrying: boom",
        "Error reading ns/obj, retrying: down",
    ]


def test_403_is_not_retried() -> None:
    sleeps: list[float] = []
    with pytest.raises(LockError, match=r"forbidden=True\): no") as info:
        read(reader(ForbiddenError("no", status=403), "ok"), sleeps)
    assert isinstance(info.value.__cause__, ForbiddenError)
    assert sleeps == []


def test_no_try_starts_after_the_deadline() -> None:
    sleeps: list[float] = []
    with pytest.raises(LockError, match=r"forbidden=False\): boom"):
        read(reader(KubeError("boom", status=503), "ok"), sleeps, timeout=4.0)
    assert sleeps == []
