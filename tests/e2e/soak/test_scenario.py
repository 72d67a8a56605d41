"""The soak in CI: 3 minutes of faults per lock backend against the real control plane; any violation fails.

``PYKURED_SOAK_MINUTES`` and ``PYKURED_SOAK_SEED`` change the length and replay a run; the seed is always
printed (pytest shows it with the report when the test fails).
"""

from __future__ import annotations

import os
import sys
import time

import pytest

from pykured_dev.soak.scenario import Options, run


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
