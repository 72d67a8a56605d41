"""Tests for pykured.blockers.base: kured's Test_rebootBlocked."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from pykured.blockers.base import Blocker, first_block
from pykured.blockers.prometheus import PrometheusAlertBlocker
from pykured.core.model import Reason

NOW = datetime.datetime(2026, 1, 1, 0, 0, 0, 500000, tzinfo=datetime.UTC)


# -- kured's Test_rebootBlocked -----------------------------------------------------------------------------


@dataclass
class FixedBlocker:
    blocked: bool
    name: str = "fixed"
    calls: list[datetime.datetime] = field(default_factory=list)

    def check(self, *, now: datetime.datetime) -> Reason | None:
        self.calls.append(now)
        return Reason(self.name, f"{self.name} blocks") if self.blocked else None


@pytest.mark.parametrize(
    ("make", "expected_kind"),
    [
        (list, None),
        (lambda: [FixedBlocker(True)], "fixed"),
        (lambda: [FixedBlocker(False)], None),
        (lambda: [FixedBlocker(False), FixedBlocker(True, "second")], "second"),
        (lambda: [PrometheusAlertBlocker("http://127.0.0.1:1/broken", timeout=5)], "prometheus"),
    ],
    ids=["no-blockers", "blocker", "non-blocker", "one-of-two", "prometheus-broken-url"],
)
def test_reboot_blocked(make: Callable[[], list[Blocker]], expected_kind: str | None) -> None:
    reason = first_block(make(), now=NOW)
    assert (reason.kind if reason else None) == expected_kind


def test_first_block_wins_and_stops() -> None:
    first, second = FixedBlocker(True, "first"), FixedBlocker(True, "second")
    assert first_block([first, second], now=NOW) == Reason("first", "first blocks")
    assert (len(first.calls), len(second.calls)) == (1, 0)
