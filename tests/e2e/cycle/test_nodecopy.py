"""The pass reads the agent's Node from its watch, not by a GET, on the real API server (requests counted).

Every HTTP request the agent's client sends is counted (a client whose transport counts what it sends to the
real kube-apiserver); the Node is read through :class:`NodeBook` as the loop's pass reads it.
"""

from __future__ import annotations

import datetime
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from pykured.agent.wiring import node_copy
from pykured.cycle.book import NodeBook
from pykured.cycle.nodecopy import NodeCopy
from pykured.kube.client import Kube
from pykured.kube.events import EventRecorder
from pykured.notify import Notifier
from pykured.requests.keeper import RequestKeeper
from pykured.requests.watch import RequestWatch
from pykured_dev.eventually import eventually
from tests.testenv import TestEnv


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class CountingKube(Kube):
    """The agent's client, counting each request it sends (method and path, watches included)."""

    sent: Counter[tuple[str, str]]

    def _send(self, method: str, path: str, **kwargs: Any) -> Any:
        watch = (kwargs.get("query") or {}).get("watch") == "true"
        self.sent[("WATCH" if watch else method, path)] += 1
        return super()._send(method, path, **kwargs)


def counting(path: str) -> CountingKube:
    kube = CountingKube.from_kubeconfig(path)
    assert isinstance(kube, CountingKube)
    kube.sent = Counter()
    return kube


def follow(kube: Kube, node: str, copy: NodeCopy) -> tuple[RequestWatch, threading.Event]:
    keeper = RequestKeeper(
        kube, node=node, events=EventRecorder(kube, node=node, enabled=False),
        notifier=Notifier.from_urls(),
    )  # fmt: skip
    stopping = threading.Event()
    watch = RequestWatch(kube, keeper, on_request=lambda: None, clock=now, poll_seconds=0.5, copy=copy)
    threading.Thread(target=watch.run, args=(stopping,), daemon=True).start()
    return watch, stopping


@pytest.fixture
def stop_watches() -> Iterator[list[threading.Event]]:
    events: list[threading.Event] = []
    yield events
    for event in events:
        event.set()


@pytest.mark.k8s
def test_with_the_watch_live_a_pass_sends_no_get_of_its_node(
    k8s: TestEnv, stop_watches: list[threading.Event]
) -> None:
    (node,) = k8s.add_nodes(k8s.unique("copy"))
    kube = counting(k8s.admin_kubeconfig)
    copy = node_copy(kube, node)
    book = NodeBook(kube, node=node, copy=copy)
    _, stopping = follow(kube, node, copy)
    stop_watches.append(stopping)
    assert eventually(lambda: copy.live)
    own = ("GET", f"/api/v1/nodes/{node}")
    gets_at_start = kube.sent[own]
    assert gets_at_start == 1  # the watch's own GET, that it starts from

    for _ in range(5):
        assert book.view().name == node
    # The agent's own write: the next pass sees it at once, from the write's answer, whatever the watch's lag.
    book.update_state(reboot_attempts=2)
    assert book.view().reboot_attempts == 2
    # Someone else's write: it reaches the pass through the watch.
    k8s.kube().patch_node(node, {"metadata": {"annotations": {"example.com/seen": "yes"}}})
    assert eventually(lambda: book.view().annotations.get("example.com/seen") == "yes")
    assert kube.sent[own] == gets_at_start, kube.sent
    assert copy.served >= 7


@pytest.mark.k8s
def test_without_watch_on_nodes_each_pass_gets_its_node(
    k8s: TestEnv, stop_watches: list[threading.Event]
) -> None:
    (node,) = k8s.add_nodes(k8s.unique("copy"))
    user = k8s.user_with_cluster_role(
        "kured-like", [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}]
    )
    kube = counting(k8s.kubeconfig_for(user))
    copy = node_copy(kube, node)
    book = NodeBook(kube, node=node, copy=copy)
    watch, stopping = follow(kube, node, copy)
    stop_watches.append(stopping)
    assert eventually(lambda: kube.sent[("WATCH", "/api/v1/nodes")] >= 1 and not watch.watching)
    own = ("GET", f"/api/v1/nodes/{node}")
    before = kube.sent[own]
    for _ in range(3):
        book.view()
    book.update_state(reboot_attempts=1)
    assert book.view().reboot_attempts == 1
    assert not copy.live
    assert kube.sent[own] - before == 4, kube.sent
    assert copy.served == 0
