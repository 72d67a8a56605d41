"""The reboot-request watch in process: it never dies of a surprise (the watch itself: tests/e2e/requests)."""

from __future__ import annotations

import datetime
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from pykured.core import errors
from pykured.requests.watch import RequestWatch
from pykured_dev.eventually import eventually

NODE = {"metadata": {"name": "n1", "resourceVersion": "7"}}


class Keeper:
    node = "n1"

    def __init__(self) -> None:
        self.seen = 0

    def see(self, node: Any, now: datetime.datetime) -> bool:
        self.seen += 1
        if self.seen <= 2:
            raise RecursionError("maximum recursion depth exceeded")
        return True


class Kube:
    def __init__(self, stopping: threading.Event) -> None:
        self.stopping = stopping

    def get_node(self, name: str) -> dict[str, Any]:
        return NODE

    def watch_nodes(self, **kw: Any) -> Iterator[dict[str, Any]]:
        self.stopping.set()
        yield {"type": "BOOKMARK", "object": NODE}


def test_a_surprise_restarts_the_watch_and_says_so_once(caplog: pytest.LogCaptureFixture) -> None:
    stopping = threading.Event()
    keeper, woken = Keeper(), threading.Event()
    watch = RequestWatch(
        Kube(stopping),  # type: ignore[arg-type]
        keeper,  # type: ignore[arg-type]
        on_request=woken.set,
        clock=lambda: datetime.datetime(2026, 11, 30, tzinfo=datetime.UTC),
    )
    thread = threading.Thread(target=watch.run, args=(stopping,), daemon=True)
    thread.start()
    assert eventually(lambda: not thread.is_alive(), timeout=20)
    assert watch.restarts == 2 and woken.is_set()  # the third look went through and woke the loop
    said = [r for r in caplog.records if "failed unexpectedly; starting it again" in r.getMessage()]
    assert len(said) == 2 and [r.exc_info is not None for r in said] == [True, False]


class PollingKeeper:
    """Records each poll's ``unless_within``; stops the watch after three."""

    node = "n1"

    def __init__(self, stopping: threading.Event) -> None:
        self.stopping = stopping
        self.unless: list[float | None] = []

    def see(self, node: Any, now: datetime.datetime) -> bool:
        return False

    def poll(self, now: datetime.datetime, *, unless_within: float | None = None) -> bool:
        self.unless.append(unless_within)
        if len(self.unless) >= 3:
            self.stopping.set()
        return False


class RefusingKube:
    """kured's RBAC: no watch on nodes (the first GET is refused too, as the watch's start)."""

    def get_node(self, name: str) -> dict[str, Any]:
        raise errors.ForbiddenError("nodes is forbidden", status=403)

    def watch_nodes(self, **kw: Any) -> Iterator[dict[str, Any]]:  # pragma: no cover - never reached
        raise AssertionError("no watch under kured's RBAC")


def test_refused_a_watch_it_polls_only_when_the_loop_has_not_looked_for_two_periods() -> None:
    """A pass's period stretches under load: a look within one period would make a loaded pass read its
    Node twice, so the poll reads only when the loop has not looked for two."""
    stopping = threading.Event()
    keeper = PollingKeeper(stopping)
    watch = RequestWatch(
        RefusingKube(),  # type: ignore[arg-type]
        keeper,  # type: ignore[arg-type]
        on_request=lambda: None,
        clock=lambda: datetime.datetime(2026, 11, 30, tzinfo=datetime.UTC),
        poll_seconds=0.01,
    )
    thread = threading.Thread(target=watch.run, args=(stopping,), daemon=True)
    thread.start()
    assert eventually(lambda: not thread.is_alive(), timeout=20)
    assert keeper.unless[:3] == [0.02, 0.02, 0.02] and not watch.watching
