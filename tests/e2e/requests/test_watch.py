"""Noticing a reboot request at once, on the real API server: the own-Node watch, and kured's RBAC's poll."""

from __future__ import annotations

import datetime
import logging
import threading

import pytest

from pykured.kube.client import Kube
from pykured.kube.events import EventRecorder
from pykured.notify import Notifier
from pykured.requests import record as rebootrequest
from pykured.requests.keeper import RequestKeeper
from pykured.requests.watch import RequestWatch
from tests.testenv import TestEnv

pytestmark = pytest.mark.k8s


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def keeper(kube: Kube, node: str) -> RequestKeeper:
    return RequestKeeper(
        kube, node=node, events=EventRecorder(kube, node=node, enabled=False),
        notifier=Notifier.from_urls(),
    )  # fmt: skip


def request(k8s: TestEnv, node: str, reason: str) -> None:
    req = rebootrequest.make_request(
        boot_id=k8s.boot_id(node), reason=reason, requested_by="alice", now=now()
    )
    k8s.kube().patch_node(
        node,
        {"metadata": {"annotations": {rebootrequest.REQUEST_ANNOTATION: rebootrequest.format_request(req)}}},
    )


def follow(
    kube: Kube, node: str, *, poll_seconds: float = 60.0
) -> tuple[RequestWatch, threading.Event, threading.Event]:
    woken, stopping = threading.Event(), threading.Event()
    watch = RequestWatch(kube, keeper(kube, node), on_request=woken.set, clock=now, poll_seconds=poll_seconds)
    threading.Thread(target=watch.run, args=(stopping,), daemon=True).start()
    return watch, woken, stopping


def test_a_request_wakes_the_agent_at_once_through_the_node_watch(k8s: TestEnv) -> None:
    (node,) = k8s.add_nodes(k8s.unique("watch"))
    watch, woken, stopping = follow(k8s.kube(), node)
    try:
        for _ in range(100):
            if watch.watching:
                break
            stopping.wait(0.05)
        assert watch.watching and not woken.is_set()
        k8s.kube().patch_node(node, {"metadata": {"annotations": {"unrelated": "x"}}})  # no request: no wake
        assert not woken.wait(1.0)
        request(k8s, node, "kernel 6.12")
        assert woken.wait(5.0)  # the poll would take up to a minute
    finally:
        stopping.set()


def test_with_kureds_rbac_it_says_so_and_polls_the_node(
    k8s: TestEnv, caplog: pytest.LogCaptureFixture
) -> None:
    (node,) = k8s.add_nodes(k8s.unique("poll"))
    user = k8s.user_with_cluster_role(
        "kured-like", [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}]
    )
    kube = Kube.from_kubeconfig(k8s.kubeconfig_for(user))
    with caplog.at_level(logging.INFO, logger="pykured.requests.watch"):
        watch, woken, stopping = follow(kube, node, poll_seconds=0.5)
        try:
            for _ in range(100):
                if "Not allowed to watch node" in caplog.text:
                    break
                stopping.wait(0.05)
            assert (
                f"Not allowed to watch node {node}: looking for reboot requests every 0.5s instead"
                in caplog.text
            )
            assert not watch.watching
            request(k8s, node, "cve fix")
            assert woken.wait(5.0)
        finally:
            stopping.set()


def test_a_long_watch_falls_back_to_half_hour_watches_without_bookmarks(k8s: TestEnv) -> None:
    """The node watch lasts a day and is taken for dead after ``quiet_seconds`` without an event or a
    bookmark (the API server sends one about once a minute). A watch that falls quiet before any bookmark was
    seen means a server that sends none: the next watches last half an hour, noticed dead at their end."""
    (node,) = k8s.add_nodes(k8s.unique("quiet"))
    kube = k8s.kube()
    calls: list[tuple[int, float | None]] = []
    real = kube.watch_nodes

    def recording(**kwargs: object) -> object:
        calls.append((int(str(kwargs["timeout_seconds"])), kwargs.get("quiet_seconds")))  # type: ignore[arg-type]
        return real(**kwargs)  # type: ignore[arg-type]

    kube.watch_nodes = recording  # type: ignore[method-assign,assignment]
    woken, stopping = threading.Event(), threading.Event()
    watch = RequestWatch(kube, keeper(kube, node), on_request=woken.set, clock=now, quiet_seconds=1.0)
    threading.Thread(target=watch.run, args=(stopping,), daemon=True).start()
    try:
        for _ in range(200):
            if len(calls) >= 2:
                break
            stopping.wait(0.05)
        assert calls[:2] == [(24 * 3600, 1.0), (1800, None)]
        request(k8s, node, "kernel 6.12")  # the half-hour watch still sees a request at once
        assert woken.wait(5.0)
    finally:
        stopping.set()


def test_a_poll_right_after_the_pass_looked_at_the_node_reads_nothing(k8s: TestEnv) -> None:
    """Under kured's RBAC (no watch) the agent looks at its Node every ``--period``; its pass reads the Node
    every ``--period`` as well, so a poll within a period of the pass's look makes no second read."""
    from pykured.cycle.state import NodeState

    (node,) = k8s.add_nodes(k8s.unique("poll-once"))
    kube = k8s.kube()
    reads: list[str] = []
    real = kube.get_node

    def counting(name: str) -> dict[str, object]:
        reads.append(name)
        return real(name)

    kube.get_node = counting  # type: ignore[method-assign]
    watcher = keeper(kube, node)
    watcher.poll(now(), unless_within=60.0)
    assert reads == [node]  # nothing looked at it yet: a read
    watcher.observe(NodeState.from_obj(real(node)), now())  # the pass's look
    watcher.poll(now(), unless_within=60.0)
    assert reads == [node]
    watcher.poll(now())
    assert reads == [node, node]
