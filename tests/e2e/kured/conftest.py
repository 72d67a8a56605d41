"""The campaign of real-kured scenarios (see :mod:`tests.e2e.kured.support`).

A test names the scenarios it checks with ``@pytest.mark.kured_scenario(name, ...)``; the first test of the
package to run starts every scenario the selected tests name, all at once, so the whole package costs about
one kured roll of wall time instead of one per scenario.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.kured.support import SCENARIOS, Campaign, campaign
from tests.testenv import TestEnv


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "kured_scenario(*names): scenarios of tests/kured the test waits for (started together)"
    )


@pytest.fixture(scope="package")
def kured(k8s: TestEnv, request: pytest.FixtureRequest) -> Iterator[Campaign]:
    """The running campaign, with every scenario the selected tests name already launched."""
    wanted: list[str] = []
    for item in request.session.items:
        for mark in item.iter_markers("kured_scenario"):
            wanted += [name for name in mark.args if name not in wanted]
    with campaign(k8s) as running:
        for name in wanted:
            running.launch(name, SCENARIOS[name])
        yield running
