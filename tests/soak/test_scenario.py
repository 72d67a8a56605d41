"""The soak's closed window, in process (the soak itself runs in ``tests/e2e/soak/``)."""

from __future__ import annotations

from pykured_dev.soak.scenario import closed_window


def test_the_closed_window_is_minute_aligned_inside_the_run() -> None:
    start = 1_700_000_000.0
    close, reopen = closed_window(start, 3)
    assert close % 60 == 0 and reopen % 60 == 0
    assert start + 45 <= close < start + 3 * 60
    assert reopen - close == 60
    close, reopen = closed_window(start, 30)
    assert reopen - close == 3 * 60 and close < start + 15 * 60
