import datetime
from collections.abc import Mapping
from typing import Any

from pykured.core.model import Reason, Verdict
from pykured.gates.phase import GatePhase, evaluate

T0 = datetime.datetime(2026, 11, 30, 22, 0, tzinfo=datetime.UTC)
MIN = datetime.timedelta(minutes=1)


class Fixed:
    def __init__(self, name: str, reason: str | None = None, boom: bool = False) -> None:
        self.name, self.reason, self.boom = name, reason, boom
        self.calls = 0

    def check(self, node: Mapping[str, Any], now: datetime.datetime) -> Reason | None:
        self.calls += 1
        if self.boom:
            raise RuntimeError("no route")
        return None if self.reason is None else Reason(self.name, self.reason)


def test_all_open_passes() -> None:
    phase = GatePhase("settle", [Fixed("a"), Fixed("b")], 10 * MIN)
    assert evaluate(phase, {}, since=T0, now=T0).verdict is Verdict.OPEN


def test_first_closed_gate_waits_then_times_out() -> None:
    later = Fixed("later")
    phase = GatePhase("settle", [Fixed("a"), Fixed("pods", "2 pods not ready"), later], 10 * MIN)
    result = evaluate(phase, {}, since=T0, now=T0 + 9 * MIN)
    assert result.verdict is Verdict.WAIT and str(result.reason) == "2 pods not ready"
    assert result.deadline == T0 + 10 * MIN and later.calls == 0
    result = evaluate(phase, {}, since=T0, now=T0 + 10 * MIN)
    assert result.verdict is Verdict.TIMED_OUT and str(result.reason) == "2 pods not ready"


def test_no_timeout_waits_forever_and_errors_hold() -> None:
    phase = GatePhase("hooks", [Fixed("prom", boom=True)], datetime.timedelta(0))
    result = evaluate(phase, {}, since=T0, now=T0 + 1000 * MIN)
    assert result.verdict is Verdict.WAIT and "check failed: no route" in str(result.reason)


def test_an_empty_phase_is_falsy_and_passes() -> None:
    phase = GatePhase("none", [], MIN)
    assert not phase and evaluate(phase, {}, since=T0, now=T0).verdict is Verdict.OPEN
