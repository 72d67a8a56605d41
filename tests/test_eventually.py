"""The tests' one way to wait: looks that start close together and spread out, and one last look."""

from __future__ import annotations

import pytest

from pykured_dev import eventually as module
from pykured_dev.eventually import MAX_EVERY, eventually


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(module, "time", fake)
    return fake


def test_the_looks_spread_out_up_to_half_a_second(clock: Clock) -> None:
    looks = []

    def condition() -> bool:
        looks.append(clock.now)
        return clock.now >= 10.0

    assert eventually(condition, timeout=30.0, every=0.05)
    assert clock.sleeps[:3] == pytest.approx([0.05, 0.075, 0.1125])
    assert max(clock.sleeps) == MAX_EVERY
    assert looks[-1] - 10.0 < MAX_EVERY  # seen within one look of its coming
    assert len(looks) < 40  # a 10-second wait: about 30 looks, not 200


def test_a_longer_every_is_kept_and_the_deadline_gets_one_last_look(clock: Clock) -> None:
    looks = []

    def never() -> bool:
        looks.append(clock.now)
        return False

    assert not eventually(never, timeout=5.0, every=2.0)
    assert clock.sleeps == [2.0, 2.0, 1.0]  # 2 s apart (longer than the cap), cut at the deadline
    assert looks == [0.0, 2.0, 4.0, 5.0]


def test_an_effect_already_there_costs_one_look(clock: Clock) -> None:
    assert eventually(lambda: True, timeout=1.0)
    assert clock.sleeps == []
