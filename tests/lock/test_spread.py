"""The waiters' spread (pure): fitted to the crowd from how soon a freed slot was taken, widened after a near
tie, always between the floor and the ceiling."""

from __future__ import annotations

import pytest

from pykured.lock.spread import GAP, STAGGER_MAX, fitted, widened


def test_a_take_much_sooner_than_the_gap_widens_at_most_twofold() -> None:
    assert fitted(1.0, 0.0, floor=1.0) == 2.0
    assert fitted(1.0, GAP / 4, floor=1.0) == pytest.approx(2.0)


def test_a_take_later_than_the_gap_narrows_down_to_the_floor() -> None:
    assert fitted(8.0, GAP * 4, floor=1.0) == pytest.approx(4.0)
    assert fitted(1.5, 100.0, floor=1.0) == 1.0


def test_a_take_at_the_gap_keeps_the_spread() -> None:
    assert fitted(3.0, GAP, floor=1.0) == pytest.approx(3.0)


def test_never_wider_than_the_ceiling_unless_the_floor_is() -> None:
    assert fitted(STAGGER_MAX, 0.0, floor=1.0) == STAGGER_MAX
    assert widened(STAGGER_MAX, floor=1.0) == STAGGER_MAX
    assert widened(20.0, floor=20.0) == 20.0
    assert widened(2.0, floor=1.0) == 4.0
