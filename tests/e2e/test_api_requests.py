"""What a real agent asks of the API server while it waits for kured's lock (or, paced per node group, for
the Leases) and while it is idle.

Counted by the API server itself: a control plane of this module's own whose audit log (Metadata level, one
line per request) names the user of every request, and each agent runs under a user of its own (a client
certificate), so every request counted is the agent's. The agents are the product (``python -m pykured``,
:class:`~pykured_dev.testenv.fleet.Fleet`), with a short ``--period`` so that many passes fit a few seconds.
"""

from __future__ import annotations

import collections
import datetime
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pykured.agent.daemon import LOCK_WAIT_MAX
from pykured.config import Config
from pykured.lock import registry
from pykured.status.agent import STATUS_ANNOTATION
from pykured_dev.eventually import eventually
from pykured_dev.testenv import Cluster
from pykured_dev.testenv.fleet import Fleet

pytestmark = [pytest.mark.k8s, pytest.mark.slow]

LOCK = "weave.works/kured-node-lock"
POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
"""
PERIOD = 2.0
WINDOW = 16.0


class Audited:
    """A control plane whose audit log is read back, request by request."""

    def __init__(self, cluster: Cluster, log: Path) -> None:
        self.cluster = cluster
        self.log = log

    def events(self, user: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if not self.log.exists():
            return out
        for line in self.log.read_text().splitlines():
            event = json.loads(line)
            if event.get("user", {}).get("username") == user:
                out.append(event)
        return out

    def requests(self, user: str, window: tuple[float, float]) -> collections.Counter[tuple[str, str, str]]:
        """(verb, resource, name) → requests of ``user`` received within ``window`` (wall clock)."""
        seen: dict[str, tuple[str, str, str]] = {}
        for event in self.events(user):
            at = datetime.datetime.fromisoformat(event["requestReceivedTimestamp"]).timestamp()
            if window[0] <= at <= window[1]:
                ref = event.get("objectRef") or {}
                seen[event["auditID"]] = (event["verb"], ref.get("resource", ""), ref.get("name", ""))
        return collections.Counter(seen.values())

    def watching_nodes(self, user: str) -> bool:
        """The API server has started answering a watch on nodes of ``user`` (its node watch is live)."""
        return any(
            e["verb"] == "watch" and (e.get("objectRef") or {}).get("resource") == "nodes"
            and e.get("stage") == "ResponseStarted"
            and (e.get("responseStatus") or {}).get("code", 200) == 200
            for e in self.events(user)
        )  # fmt: skip


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Audited]:
    work = tmp_path_factory.mktemp("audited")
    policy = work / "audit-policy.yaml"
    policy.write_text(POLICY)
    log = work / "audit.log"
    cluster = Cluster(
        apiserver_args=[
            f"--audit-policy-file={policy}",
            f"--audit-log-path={log}",
            "--audit-log-mode=blocking",
        ]
    ).start()
    try:
        yield Audited(cluster, log)
    finally:
        cluster.stop()


def agent(
    audited: Audited, tmp_path: Path, *, user: str, kured_rbac: bool, held: bool
) -> tuple[Fleet, str, str, str]:
    """One agent on a node of its own, kured's annotation lock in a namespace of its own (held by another
    node when ``held``), ``--period=2s``; returns the fleet, the node, the user and the namespace."""
    cluster = audited.cluster
    ns = cluster.new_namespace("req")
    cluster.create_daemonset(ns, "kured")
    if kured_rbac:
        cluster.apply_rbac_kured(ns, "kured")
        user = f"system:serviceaccount:{ns}:kured"
        kubeconfig = cluster.kubeconfig_for(user)
    else:
        kubeconfig = cluster.kubeconfig_for(user, ["system:masters"])
    (node,) = cluster.add_nodes(cluster.unique("req"))
    if held:
        (holder,) = cluster.add_nodes(cluster.unique("holder"))
        kube = cluster.kube()
        ds = kube.get_daemonset(ns, "kured")
        value = {
            "nodeID": holder,
            "metadata": {"unschedulable": False},
            "created": "2026-01-01T00:00:00Z",
            "TTL": 0,
        }
        ds["metadata"].setdefault("annotations", {})[LOCK] = json.dumps(value, separators=(",", ":"))
        kube.replace_daemonset(ns, "kured", ds)
    fleet = Fleet(
        cluster,
        workdir=tmp_path / "fleet",
        args=[f"--ds-namespace={ns}", f"--period={PERIOD:g}s"],
        kubeconfig=lambda _node: kubeconfig,
    )
    fleet.__enter__()
    fleet.add(node)
    if held:
        fleet.touch(node)
    return fleet, node, user, ns


def measure(
    audited: Audited, user: str
) -> tuple[collections.Counter[tuple[str, str, str]], tuple[float, float]]:
    """The user's requests over :data:`WINDOW` seconds from now, and the window."""
    start = time.time()
    time.sleep(WINDOW)  # the measuring window itself
    window = (start, time.time())
    return audited.requests(user, window), window


def published_status(cluster: Cluster, node: str) -> dict[str, Any]:
    """The agent's status on its Node: the last write of a pass (published after its log lines), so a
    window measured once it shows a pass's outcome holds only the later passes' requests, however late a
    loaded machine runs that write."""
    text = cluster.kube().get_node(node)["metadata"].get("annotations", {}).get(STATUS_ANNOTATION, "")
    try:
        status = json.loads(text) if text else {}
    except json.JSONDecodeError:
        return {}
    return status if isinstance(status, dict) else {}


def published_lock_wait(cluster: Cluster, node: str) -> bool:
    """The status says the node waits for the lock (the pass that found it held has published)."""
    return published_status(cluster, node).get("lockWait") is True


def passes_logged(log: str, window: tuple[float, float]) -> int:
    """The passes that found the lock held within ``window``: one ``Lock already held`` line each (kured's
    log line, timestamped to the second)."""
    count = 0
    for line in log.splitlines():
        if "Lock already held" not in line or not line.startswith('time="'):
            continue
        at = datetime.datetime.fromisoformat(line[6:26].replace("Z", "+00:00")).timestamp()
        if int(window[0]) + 1 <= at <= int(window[1]) - 1:
            count += 1
    return count


def test_an_annotation_waiter_with_the_watches_gets_neither_its_node_nor_the_daemonset(
    audited: Audited, tmp_path: Path
) -> None:
    """Waiting for kured's lock with ``list``/``watch`` on the DaemonSet and on nodes: every pass reads the
    DaemonSet from the watched copy and its Node from the node watch's (no GET of either, its pause check
    included), one pass per wait (not two). When the holder's entry goes, the waiter takes the lock from the
    copy: no GET of the DaemonSet before its take's write."""
    fleet, node, user, ns = agent(audited, tmp_path, user="waiter-full-rbac", kured_rbac=False, held=True)
    try:
        assert eventually(lambda: audited.watching_nodes(user), timeout=60), fleet.log_text(node)
        assert eventually(lambda: watching(audited, user, "daemonsets"), timeout=60), fleet.log_text(node)
        assert eventually(lambda: "Lock already held" in fleet.log_text(node), timeout=60), fleet.log_text(
            node
        )
        published = eventually(lambda: published_lock_wait(audited.cluster, node), timeout=60)
        assert published, fleet.log_text(node)
        sent, window = measure(audited, user)
        logged = passes_logged(fleet.log_text(node), window)
        freed = time.time()
        release_all(audited.cluster, ns)
        acquired = f"Acquired reboot lock for node {node}"
        assert eventually(lambda: acquired in fleet.log_text(node), timeout=LOCK_WAIT_MAX), fleet.log_text(
            node
        )
        took = first_write(audited.events(user), "daemonsets", freed)
    finally:
        fleet.close()
    assert sent[("get", "daemonsets", "kured")] == 0, sent
    assert 2 <= logged <= WINDOW / PERIOD, logged  # it was waiting, about one pass per wait
    assert sent[("get", "nodes", node)] == 0, sent
    writes = {k: v for k, v in sent.items() if k[0] not in ("get", "list", "watch")}
    assert writes == {}, sent
    assert took is not None
    before_take = audited.requests(user, (freed, took))
    assert before_take[("get", "daemonsets", "kured")] == 0, before_take


def release_all(cluster: Cluster, namespace: str) -> None:
    """The holder's entry goes (as an operator's ``pykured lock release`` of a gone holder)."""
    kube = cluster.kube()
    ds = kube.get_daemonset(namespace, "kured")
    (ds["metadata"].get("annotations") or {}).pop(LOCK, None)
    kube.replace_daemonset(namespace, "kured", ds)


def first_write(events: list[dict[str, Any]], resource: str, after: float) -> float | None:
    """When the first write (update, patch) of ``resource`` received after ``after`` was received."""
    times = [
        datetime.datetime.fromisoformat(e["requestReceivedTimestamp"]).timestamp()
        for e in events
        if (e.get("objectRef") or {}).get("resource") == resource and e["verb"] in ("update", "patch")
    ]
    return min((t for t in times if t > after), default=None)


def test_under_kureds_rbac_an_annotation_waiter_gets_its_node_once_per_pass(
    audited: Audited, tmp_path: Path
) -> None:
    """kured's RBAC grants no ``watch`` on nodes: a pass GETs its Node, once (its pause check reads the
    same answer), and the DaemonSet once."""
    fleet, node, user, _ = agent(audited, tmp_path, user="", kured_rbac=True, held=True)
    try:
        assert eventually(lambda: "Not allowed to watch node" in fleet.log_text(node), timeout=60)
        assert eventually(lambda: "Lock already held" in fleet.log_text(node), timeout=60), fleet.log_text(
            node
        )
        sent, _ = measure(audited, user)
    finally:
        fleet.close()
    passes = sent[("get", "daemonsets", "kured")]
    assert 2 <= passes <= WINDOW / PERIOD + 2, sent
    assert sent[("get", "nodes", node)] <= passes + 1, sent
    refused = [line for line in fleet.log_text(node).splitlines() if "Not allowed to watch daemonset" in line]
    assert len(refused) == 1, refused  # the DaemonSet's watch refused, said once: kured's polling


def test_an_idle_agent_sends_nothing_but_its_watches(audited: Audited, tmp_path: Path) -> None:
    """Nothing to do: no GET of its Node (the watch serves it), no write, and no read of the lock after the
    start-up pass's (kured's annotation: a GET of the DaemonSet), however many ``--period`` passes run; the
    watches run on. As kured, which looks at its lock at start-up and then only once its sentinel is there."""
    fleet, node, user, _ = agent(audited, tmp_path, user="idle-full-rbac", kured_rbac=False, held=False)
    try:
        assert eventually(lambda: audited.watching_nodes(user), timeout=60), fleet.log_text(node)
        assert eventually(lambda: "Reboot not required" in fleet.log_text(node), timeout=60)
        idle = eventually(lambda: published_status(audited.cluster, node).get("step") == "wait", timeout=60)
        assert idle, fleet.log_text(node)
        sent, _ = measure(audited, user)
        fleet.touch(node)  # the agent is alive: its sentinel makes the next pass read the lock at once
        later = time.time()
        assert eventually(
            lambda: audited.requests(user, (later, time.time()))[("get", "daemonsets", "kured")] >= 1,
            timeout=90,
        ), fleet.log_text(node)
    finally:
        fleet.close()
    assert {k: v for k, v in sent.items() if k[0] != "watch"} == {}, sent


ZONE = "topology.kubernetes.io/zone"
SLOW_PERIOD = "1h"
"""The paced waiter's ``--period``: a wait on a polled lock would end after a minute (``LOCK_WAIT_MAX``)."""


def lease_writes(events: list[dict[str, Any]], after: float) -> list[tuple[float, str, str]]:
    """(when, verb, Lease) of each write to a Lease received after ``after`` (wall clock)."""
    out = []
    for event in events:
        ref = event.get("objectRef") or {}
        if ref.get("resource") != "leases" or event["verb"] not in ("create", "update", "patch"):
            continue
        at = datetime.datetime.fromisoformat(event["requestReceivedTimestamp"]).timestamp()
        if at > after:
            out.append((at, event["verb"], ref.get("name", "")))
    return sorted(set(out))


def test_a_concurrency_label_waiter_waits_on_the_lease_watch(audited: Audited, tmp_path: Path) -> None:
    """``--concurrency-label``: a node whose group's one slot another node holds (a cluster slot is free)
    waits on the Lease watch. While the holder keeps its slots, the waiter sends nothing but its watches for
    longer than a minute (a polled wait would end after one, and its pass list the Leases); once the holder
    frees them, the watch wakes the waiter and it takes the group's slot in about a second."""
    cluster = audited.cluster
    ns = cluster.new_namespace("paced")
    cluster.create_daemonset(ns, "kured")
    user = "paced-waiter"
    kubeconfig = cluster.kubeconfig_for(user, ["system:masters"])
    holder, node = cluster.add_nodes(
        cluster.unique("holder"), cluster.unique("paced"), labels={ZONE: "zone-a"}
    )
    flags = Config(
        node_id=holder, ds_namespace=ns, lock_backend="lease", concurrency=2, concurrency_label=ZONE,
        concurrency_per_label=1,
    )  # fmt: skip
    holding = registry.build_lock(flags, cluster.kube())  # the agent's lock, as the holder's agent builds it
    assert holding.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    fleet = Fleet(
        cluster,
        workdir=tmp_path / "fleet",
        args=[
            f"--ds-namespace={ns}", f"--period={SLOW_PERIOD}", "--lock-backend=lease", "--concurrency=2",
            f"--concurrency-label={ZONE}", "--concurrency-per-label=1",
        ],
        kubeconfig=lambda _node: kubeconfig,
    )  # fmt: skip
    fleet.__enter__()
    try:
        fleet.add(node)
        fleet.touch(node)
        refused = f"Lock for {ZONE}=zone-a already held by {holder}"
        assert eventually(lambda: refused in fleet.log_text(node), timeout=60), fleet.log_text(node)
        assert eventually(lambda: watching(audited, user, "leases"), timeout=90), fleet.log_text(node)
        # the waiting status is the refusing pass's last write; a second pass right after the start (the
        # sentinel's own event) publishes the same, so the count is taken once the log has settled on it
        published = eventually(lambda: published_lock_wait(cluster, node), timeout=60)
        assert published, fleet.log_text(node)
        assert eventually(lambda: settled(lambda: fleet.log_text(node).count(refused)), timeout=60)
        start, passes = time.time(), fleet.log_text(node).count(refused)
        time.sleep(LOCK_WAIT_MAX + 5)  # past the end of a polled wait
        window = (start, time.time())
        sent = audited.requests(user, window)
        assert fleet.log_text(node).count(refused) == passes, fleet.log_text(node)  # no pass while it waits

        freed = time.time()
        assert holding.release()
        assert eventually(lambda: bool(lease_writes(audited.events(user), freed)), timeout=LOCK_WAIT_MAX), (
            fleet.log_text(node)
        )
        took = lease_writes(audited.events(user), freed)[0][0] - freed
        acquired = f"Acquired reboot lock for node {node}"
        took_it = eventually(lambda: acquired in fleet.log_text(node), timeout=LOCK_WAIT_MAX)
        assert took_it, fleet.log_text(node)
    finally:
        fleet.close()
    assert {k: v for k, v in sent.items() if k[0] != "watch"} == {}, sent
    # woken by the watch (its news, the waiter's delay of up to 1 s, a round trip), not by the end of its wait
    # (LOCK_WAIT_MAX): a bound from the wait itself, far from this machine's speed
    assert took < LOCK_WAIT_MAX / 2, took


def settled(read: Callable[[], int], *, quiet: float = 5.0) -> bool:
    """``read()`` gave the same value over ``quiet`` seconds (a pass that was under way has logged)."""
    before = read()
    time.sleep(quiet)
    return read() == before


def watching(audited: Audited, user: str, resource: str) -> bool:
    """The API server has started answering a watch on ``resource`` of ``user``."""
    return any(
        e["verb"] == "watch" and (e.get("objectRef") or {}).get("resource") == resource
        and e.get("stage") == "ResponseStarted"
        for e in audited.events(user)
    )  # fmt: skip
