"""The soak's closed window, fault lengths and report, in process (the soak itself runs in
``tests/e2e/soak/``)."""

from __future__ import annotations

import dataclasses
import random
import time
from types import SimpleNamespace

from pykured_dev.soak.faults import Faults
from pykured_dev.soak.scenario import Options, Report, closed_window


def test_the_closed_window_is_minute_aligned_inside_the_run() -> None:
    start = 1_700_000_000.0
    close, reopen = closed_window(start, 3)
    assert close % 60 == 0 and reopen % 60 == 0
    assert start + 45 <= close < start + 3 * 60
    assert reopen - close == 60
    close, reopen = closed_window(start, 30)
    assert reopen - close == 3 * 60 and close < start + 15 * 60


def test_a_lasting_fault_ends_with_the_run_after_five_seconds_at_least() -> None:
    soak = SimpleNamespace(rng=random.Random(1))
    faults = Faults(soak, observer=None, fleet=None)  # type: ignore[arg-type]
    try:
        assert all(5 <= faults.lasting(5, 60) <= 60 for _ in range(50))  # no end known: as drawn
        faults.ends_at = time.monotonic() + 20
        assert all(5 <= faults.lasting(5, 60) <= 20 for _ in range(50))
        faults.ends_at = time.monotonic() - 1  # the run is over: the shortest fault there is
        assert faults.lasting(10, 60) == 5.0
    finally:
        faults.close()


def test_the_replay_line_names_a_fault_rate_that_is_not_the_default() -> None:
    report = Report(seed=7, backend="lease", minutes=3, faults={}, needs={}, reboots=0, violations=[],
                    longest_wait=0, mean_wait=0, converged_after=1.0, peak_holders=0, peak_cordoned=0,
                    relists=0, events=0, sigterm_exit_max=0, window="-", fault_every=5.0)  # fmt: skip
    assert report.render().endswith("(replay: --seed 7 --lock-backend lease --fault-every 5)")
    default = dataclasses.replace(report, fault_every=Options.fault_every)
    assert default.render().endswith("(replay: --seed 7 --lock-backend lease)")
