"""The drain's watch: the record written paced and cleared at the end, the metric, one slow-drain Event
(clocks passed in; the API server is the in-memory one). On the real API server:
tests/e2e/test_drain_watch.py."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from pykured.drain import progress as p
from pykured.kube.events import EventRecorder
from pykured.metrics import Metrics
from pykured.status import agent as agentstatus
from pykured.status.drainwatch import DRAIN_SLOW, DrainWatch, slow_drain_after
from pykured.status.publisher import StatusPublisher, StatusPublishers
from tests.fakes import FakeKube

T0 = datetime.datetime(2026, 3, 1, 12, 0, tzinfo=datetime.UTC)


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def progress(*holds: tuple[str, str, str]) -> p.DrainProgress:
    return p.progress([p.PodHold("apps", n, r, T0, d) for n, r, d in holds], started=T0)


@pytest.fixture
def kube() -> FakeKube:
    kube = FakeKube()
    kube.add_node("n1")
    return kube


def record(kube: FakeKube) -> agentstatus.AgentStatus | None:
    return agentstatus.decode(kube.annotations("n1").get(agentstatus.STATUS_ANNOTATION))


def samples(metrics: Metrics, name: str) -> dict[tuple[str, ...], float]:
    return {
        tuple(s.labels.values()): s.value
        for family in metrics.registry.collect()
        for s in family.samples
        if s.name == name
    }


def watch(kube: FakeKube, clock: Clock, metrics: Metrics, **kw: Any) -> DrainWatch:
    publisher = StatusPublisher(kube, node="n1", version="9.9")
    events = EventRecorder(kube, node="n1")
    return DrainWatch(publisher, metrics=metrics, events=events, clock=clock,
                      wall_clock=lambda: T0 + datetime.timedelta(seconds=clock.t), **kw)  # fmt: skip


def test_the_threshold() -> None:
    assert slow_drain_after(0) == 300 and slow_drain_after(3600) == 300 and slow_drain_after(20) == 10


def test_a_quick_drain_writes_nothing(kube: FakeKube) -> None:
    clock, metrics = Clock(), Metrics(process_collectors=False)
    w = watch(kube, clock, metrics)
    w(progress(("web", p.EVICTING, "")))
    clock.t = 2
    w(None)
    assert kube.calls("PATCH") == 0 and kube.event_reasons() == []
    assert samples(metrics, "pykured_drain_pods_waiting") == {}


def test_the_record_is_paced_then_cleared_and_the_slow_event_told_once(kube: FakeKube) -> None:
    clock, metrics = Clock(), Metrics(process_collectors=False)
    w = watch(kube, clock, metrics, slow_after=60)
    held = progress(("web", p.PDB, "web-pdb"))
    for t in range(0, 5):  # every quarter second would be the same: an unchanged progress is not written
        clock.t = t
        w(held)
    assert kube.calls("PATCH") == 0
    assert samples(metrics, "pykured_drain_pods_waiting")[("n1", "pdb")] == 1
    clock.t = 5
    w(held)
    status = record(kube)
    assert status is not None and status.drain == held and not status.from_agent  # no agent status: alone
    clock.t = 6
    changed = progress(("web", p.PDB, "web-pdb"), ("db", p.WEBHOOK, "denied"))
    w(changed)
    assert kube.calls("PATCH") == 1  # changed a second after the last write: not yet
    clock.t = 10
    w(changed)
    assert kube.calls("PATCH") == 2 and (s := record(kube)) is not None and s.drain == changed
    for t in range(10, 200):
        clock.t = t
        w(changed)
    assert kube.calls("PATCH") == 2
    assert kube.event_reasons() == [DRAIN_SLOW]  # once: what it waits on did not change
    assert samples(metrics, "pykured_drain_slow_total") == {("n1",): 1.0}
    message = kube.events[0]["message"]
    assert "apps/web: PodDisruptionBudget web-pdb" in message and "apps/db: denied" in message
    w(None)
    assert pykured_status_gone(kube)
    assert samples(metrics, "pykured_drain_pods_waiting") == {}


def pykured_status_gone(kube: FakeKube) -> bool:
    return agentstatus.STATUS_ANNOTATION not in kube.annotations("n1")


def test_an_agents_status_keeps_its_fields_around_the_drain(kube: FakeKube) -> None:
    theirs = agentstatus.AgentStatus(version="1.0", boot_id="b", step="drain-and-reboot", sentinel=True)
    kube.patch_node(
        "n1", {"metadata": {"annotations": {agentstatus.STATUS_ANNOTATION: agentstatus.encode(theirs)}}}
    )
    publishers = StatusPublishers(kube, version="9.9")
    assert publishers.for_node("n1") is publishers.for_node("n1")
    publisher = publishers.for_node("n1")
    held = progress(("web", p.OVERDUE, ""))
    assert publisher.drain_progress(held)
    assert record(kube) == agentstatus.AgentStatus(version="1.0", boot_id="b", step="drain-and-reboot",
                                                   sentinel=True, drain=held)  # fmt: skip
    assert publisher.drain_progress(None)
    assert record(kube) == theirs


def test_an_unreadable_node_is_not_written_over(kube: FakeKube) -> None:
    from pykured.core.errors import KubeError

    kube.fail_next(lambda method, path, body: KubeError("down") if method == "GET" else None)
    publisher = StatusPublisher(kube, node="n1", version="9.9")
    assert not publisher.drain_progress(progress(("web", p.PDB, "")))
    assert kube.calls("PATCH") == 0
