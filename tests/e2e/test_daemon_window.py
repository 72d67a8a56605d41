"""The daemon and the maintenance window, driven by a fake clock across a daylight-saving change.

The Node, the lock and the drain are real (the test apiserver); only the clock is fake, so the window decision
and the wait until it opens are checked at exact instants.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pykured.agent.daemon import Daemon, Senses, Settings
from pykured.cycle.book import NodeBook
from pykured.cycle.decide import CyclePolicy
from pykured.cycle.steps import Hands
from pykured.drain import Drainer
from pykured.gocompat.goflags import Duration
from pykured.host.sentinel import FileSentinel
from pykured.kube.events import EventRecorder
from pykured.lock.annotation import AnnotationLock
from pykured.notify import Notifier
from pykured.policy.weekly import TimeWindow
from tests.fakes import FakeClock, RecordingRebooter
from tests.testenv import TestEnv

pytestmark = pytest.mark.k8s
LOCK = "weave.works/kured-node-lock"
UTC = datetime.UTC


MakeDaemon = Callable[[TimeWindow, FakeClock], tuple[Daemon, str, str, RecordingRebooter]]


@pytest.fixture
def daemon_for(k8s: TestEnv, tmp_path: Path) -> Iterator[MakeDaemon]:
    made: list[Daemon] = []

    def make(window: TimeWindow, clock: FakeClock) -> tuple[Daemon, str, str, RecordingRebooter]:
        ns = k8s.new_namespace("ds")
        k8s.create_daemonset(ns, "kured")
        node = k8s.add_nodes(k8s.unique("node"))[0]
        kube = k8s.kube()
        sentinel_path = tmp_path / node
        sentinel_path.touch()
        rebooter = RecordingRebooter()
        hands = Hands(
            book=NodeBook(kube, node=node),
            drainer=Drainer(kube, node=node),
            lock=AnnotationLock(
                kube,
                namespace=ns,
                ds_name="kured",
                annotation=LOCK,
                node_id=node,
                concurrency=1,
                ttl=Duration(0),
            ),
            rebooter=rebooter,
            notifier=Notifier(),
            events=EventRecorder(kube, node=node, enabled=False),
        )
        senses = Senses(kube=kube, sentinel=FileSentinel(str(sentinel_path)), window=window)
        settings = Settings(node=node, period=3600.0, policy=CyclePolicy())
        daemon = Daemon(hands, senses, settings=settings, clock=clock)
        made.append(daemon)
        return daemon, ns, node, rebooter

    yield make


# Europe/Berlin springs forward on 2026-03-29 at 02:00 CET (01:00 UTC) to 03:00 CEST.
BERLIN_WINDOW = TimeWindow.parse(["su"], "03:00", "05:00", "Europe/Berlin")


def test_outside_the_window_it_waits_exactly_until_it_opens_across_dst(
    daemon_for: MakeDaemon, k8s: TestEnv
) -> None:
    clock = FakeClock(datetime.datetime(2026, 3, 29, 0, 30, tzinfo=UTC))  # 01:30 CET, window opens 03:00 CEST
    daemon, ns, _node, rebooter = daemon_for(BERLIN_WINDOW, clock)
    pause = daemon.run_once()
    # 03:00 CEST is 01:00 UTC: 30 minutes after 00:30 UTC, although the wall clock jumps an hour.
    assert pause == pytest.approx(30 * 60, abs=1)
    assert k8s.kube().get_daemonset(ns, "kured")["metadata"]["annotations"].get(LOCK) is None
    clock.now = datetime.datetime(2026, 3, 29, 1, 0, tzinfo=UTC)  # 03:00 CEST: open
    for _ in range(5):
        daemon.run_once()
        if rebooter.calls:
            break
    assert rebooter.calls == 1
    assert k8s.kube().get_daemonset(ns, "kured")["metadata"]["annotations"].get(LOCK)


def test_window_closed_on_the_wrong_weekday(daemon_for: MakeDaemon, k8s: TestEnv) -> None:
    clock = FakeClock(datetime.datetime(2026, 3, 30, 2, 0, tzinfo=UTC))  # Monday 04:00 CEST
    daemon, ns, _node, rebooter = daemon_for(BERLIN_WINDOW, clock)
    pause = daemon.run_once()
    assert pause == 3600.0  # capped at --period; the next opening is six days away
    assert rebooter.calls == 0
    assert k8s.kube().get_daemonset(ns, "kured")["metadata"]["annotations"].get(LOCK) is None


def test_autumn_night_window_end_is_inclusive(daemon_for: MakeDaemon) -> None:
    # Europe/Berlin falls back on 2026-10-25 at 03:00 CEST to 02:00 CET; a 01:00-02:30 window ends at the
    # later 02:30 (CET), the occurrence kured's time.Date picks east of UTC.
    window = TimeWindow.parse(["su"], "01:00", "02:30", "Europe/Berlin")
    clock = FakeClock(datetime.datetime(2026, 10, 25, 1, 30, 0, 500_000, tzinfo=UTC))  # 02:30:00.5 CET
    assert window.contains(clock.now)
    assert not window.contains(clock.now + datetime.timedelta(seconds=1))
    daemon, _ns, _node, rebooter = daemon_for(window, clock)
    for _ in range(5):
        daemon.run_once()
        if rebooter.calls:
            break
    assert rebooter.calls == 1


class SlowPassClock(FakeClock):
    """The first reading (the start of the pass) is ``now``; every later one is ``later``."""

    def __init__(self, now: datetime.datetime, later: datetime.datetime) -> None:
        super().__init__(now)
        self.later = later
        self.reads = 0

    def __call__(self) -> datetime.datetime:
        self.reads += 1
        return self.now if self.reads == 1 else self.later


def test_no_lock_when_the_window_closes_while_the_pass_observes(daemon_for: MakeDaemon, k8s: TestEnv) -> None:
    # Found by the soak: an agent cut off from the API server saw the window open at 22:29:5x and took a slot
    # at 22:30:11, after the window had closed at 22:30.
    window = TimeWindow.parse(["su", "mo", "tu", "we", "th", "fr", "sa"], "01:00", "02:00", "UTC")
    clock = SlowPassClock(
        datetime.datetime(2026, 3, 30, 1, 59, 59, tzinfo=UTC),
        datetime.datetime(2026, 3, 30, 2, 0, 11, tzinfo=UTC),
    )
    daemon, ns, _node, rebooter = daemon_for(window, clock)
    assert daemon.run_once() == 0
    assert k8s.kube().get_daemonset(ns, "kured")["metadata"]["annotations"].get(LOCK) is None
    clock.reads = 1  # the next pass starts after the window closed
    daemon.run_once()
    assert rebooter.calls == 0
    assert k8s.kube().get_daemonset(ns, "kured")["metadata"]["annotations"].get(LOCK) is None
