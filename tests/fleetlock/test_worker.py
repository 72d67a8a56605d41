"""Drain workers: one per node, cancellation, unexpected failures become drain failures."""

from __future__ import annotations

import threading

import pytest

from pykured.fleetlock.worker import Worker, Workers


def test_one_live_worker_per_node() -> None:
    gate = threading.Event()
    finished: list[str | None] = []
    workers = Workers()

    def drain(w: Worker) -> str | None:
        gate.wait(5)
        return None

    first = workers.start("n", drain, lambda w: finished.append(w.error))
    assert workers.start("n", drain, lambda w: finished.append("second")) is first
    assert workers.live("n") is first and workers.live("other") is None
    gate.set()
    assert first.done.wait(5)
    assert finished == [None]
    assert workers.live("n") is None


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [("ok", None), ("error", "boom"), ("raise", "internal error while draining: KeyError: 'x'")],
    ids=["ok", "error-text", "unexpected-exception"],
)
def test_finish_sees_the_drain_outcome(outcome: str, expected: str | None) -> None:
    seen: list[str | None] = []

    def drain(w: Worker) -> str | None:
        if outcome == "raise":
            raise KeyError("x")
        return None if outcome == "ok" else "boom"

    worker = Workers().start("n", drain, lambda w: seen.append(w.error))
    assert worker.done.wait(5)
    assert seen == [expected]


def test_cancelled_worker_skips_its_final_step() -> None:
    seen: list[str] = []

    def drain(w: Worker) -> str | None:
        assert w.cancel.wait(5)
        return "drain of node n cancelled"

    workers = Workers()
    worker = workers.start("n", drain, lambda w: seen.append("finished"))
    workers.stop(timeout=5)
    assert worker.done.is_set() and seen == []


def test_failing_final_step_still_ends_the_worker() -> None:
    def finish(w: Worker) -> None:
        raise RuntimeError("api down")

    worker = Workers().start("n", lambda w: None, finish)
    assert worker.done.wait(5)
    assert not worker.live
