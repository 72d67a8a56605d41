"""The soak in CI: 3 minutes of faults per lock backend against the real control plane; any violation fails.

``PYKURED_SOAK_MINUTES`` and ``PYKURED_SOAK_SEED`` change the length and replay a run; the seed is always
printed (pytest shows it with the report when the test fails).
"""

from __future__ import annotations

import os
import sys
import time

import pytest

from pykured_dev.soak.scenario import Options, closed_window, run


def test_the_closed_window_is_minute_aligned_inside_the_run() -> None:
    start = 1_700_000_000.0
    close, reopen = closed_window(start, 3)
    assert close % 60 == 0 and reopen % 60 == 0
    assert start + 45 <= close < start + 3 * 60
    assert reopen - close == 60
    close, reopen = closed_window(start, 30)
    assert reopen - close == 3 * 60 and close < start + 15 * 60


@pytest.mark.k8s
@pytest.mark.slow
@pytest.mark.timeout(900)  # the run's minutes, then up to a few minutes for the fleet to converge
@pytest.mark.parametrize("backend", ["lease", "daemonset"])
def test_soak_under_faults(backend: str) -> None:
    seed = int(os.environ.get("PYKURED_SOAK_SEED") or time.time_ns() % (1 << 32))
    minutes = float(os.environ.get("PYKURED_SOAK_MINUTES", "3"))
    print(f"soak seed {seed}", file=sys.stderr)
    report = run(Options(minutes=minutes, seed=seed, backend=backend, fault_every=5.0), out=sys.stderr)
    print(report.render(), file=sys.stderr)
    assert report.ok, report.render()
