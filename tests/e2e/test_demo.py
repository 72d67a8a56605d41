"""``tools/dev demo`` (the README's main command) completes and never exceeds the concurrency limit."""

from __future__ import annotations

import io

import pytest

from pykured_dev.demo import main

pytestmark = [pytest.mark.k8s, pytest.mark.slow]


@pytest.mark.parametrize("concurrency", [1, 2])
def test_demo_rolls_five_nodes(concurrency: int) -> None:
    out = io.StringIO()
    assert main(["--nodes", "5", "--concurrency", str(concurrency)], out=out) == 0, out.getvalue()
    text = out.getvalue()
    assert f"most nodes down at once: {concurrency} (limit {concurrency})" in text or (
        concurrency == 2 and "most nodes down at once: 1 (limit 2)" in text
    )
    assert "left cordoned:           none" in text
    assert "'node-5': 1" in text
    assert "result:                  OK" in text


def test_demo_rollout_rolls_the_fleet_through_requests() -> None:
    out = io.StringIO()
    assert main(["--nodes", "4", "--concurrency", "2", "--rollout"], out=out) == 0, out.getvalue()
    text = out.getvalue()
    assert "Touching the reboot sentinel" not in text
    assert "(demo rollout): 4/4 rebooted" in text
    assert "left cordoned:           none" in text and "result:                  OK" in text
