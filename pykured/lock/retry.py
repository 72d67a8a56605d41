"""A backend's read of its lock object, retried until a deadline.

Both backends read the same way (the annotation backend as kured's ``pkg/daemonsetlock`` polls its GET):
try at once; after a failed call wait ``interval`` and try again, unless the answer was 403 (retrying
cannot help) or the next try would start after ``timeout``. Each retry logs one warning on the backend's
own logger; giving up raises the backend's ``LockError``, chained to the last failure.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from pykured.core.errors import ForbiddenError, KubeError, LockError

T = TypeVar("T")


def read_until_deadline(
    read: Callable[[], T],
    *,
    interval: float,
    timeout: float,
    sleep: Callable[[float], None],
    log: logging.Logger,
    retrying: str,
    where: str,
    give_up: Callable[[KubeError, bool], LockError],
    monotonic: Callable[[], float] = time.monotonic,
) -> T:
    """``read()``'s answer, retried as above.

    ``retrying`` is the warning's %-format with two arguments, ``where`` and the failure; ``give_up`` makes
    the error from the last failure and whether it was a 403; ``monotonic`` is the clock ``sleep`` moves.
    """
    deadline = monotonic() + timeout
    while True:
        try:
            return read()
        except KubeError as exc:
            forbidden = isinstance(exc, ForbiddenError) or exc.status == 403
            if forbidden or monotonic() + interval > deadline:
                raise give_up(exc, forbidden) from exc
            log.warning(retrying, where, exc)
            sleep(interval)
