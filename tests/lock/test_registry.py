"""The lock backends by name on FakeKube: the agent's lock built from the configuration (the configured
backend, guarded by every other registered one), a third backend plugged in, and every backend opened for
inspection."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from pykured.config import Config
from pykured.core.errors import LockError
from pykured.gocompat.goflags import Duration
from pykured.kube.api import KubeApi
from pykured.lock.annotation import AnnotationView
from pykured.lock.base import Lock, LockView
from pykured.lock.lease import LeaseLock
from pykured.lock.operator import PlainView
from pykured.lock.paced import GroupPacedLock
from pykured.lock.registry import (
    BACKENDS,
    DAEMONSET,
    LEASE,
    Backend,
    LockConfig,
    LockHooks,
    LockPlace,
    LockRegistry,
    build_lock,
    open_read_only,
    open_views,
)
from pykured.lock.switch import GuardedLock
from tests.fakes import FakeKube
from tests.lock.conftest import T_NS, make_annotation_lock, make_lease_lock

ZONE = "topology.kubernetes.io/zone"
NS = "kube-system"


def config(node: str, backend: str, **kw: Any) -> Config:
    return Config(node_id=node, lock_backend=backend, ds_namespace=NS, lease_prefix="pykured-lock", **kw)


def third_leases(kube: Any, node: str) -> LeaseLock:
    return LeaseLock(kube, namespace=NS, prefix="third-lock", node_id=node, concurrency=1, ttl=Duration(0))


def _build_third(cfg: LockConfig, kube: KubeApi, *, guard_only: bool, hooks: LockHooks) -> Lock:
    return third_leases(kube, cfg.node_id)


def _open_third(kube: KubeApi, place: LockPlace) -> LockView:
    return third_leases(kube, "")


THIRD = Backend("third", _build_third, _open_third)


@pytest.fixture
def kube() -> FakeKube:
    kube = FakeKube()
    kube.add_daemonset(NS, "kured")
    for name in ("a1", "a2", "b1"):
        kube.add_node(name, labels={ZONE: "zone-" + name[0]})
    return kube


def test_the_lock_backend_values_are_registered_kureds_first() -> None:
    assert BACKENDS.names == ("daemonset", "lease")
    assert [b.name for b in BACKENDS] == ["daemonset", "lease"]


@pytest.mark.parametrize(
    ("backend", "label", "watched", "other"),
    # both watched: the annotation lock's waits watch the DaemonSet until RBAC refuses it (then polled)
    [("daemonset", "annotation", True, make_lease_lock), ("lease", "lease", True, make_annotation_lock)],
    ids=["daemonset", "lease"],
)
def test_the_configured_backend_is_the_agents_and_the_other_guards_it(
    kube: Any, backend: str, label: str, watched: bool, other: Any
) -> None:
    lock = build_lock(config("a1", backend), kube)
    assert isinstance(lock, GuardedLock)
    assert (lock.backend, lock.watched, lock.node_id, lock.concurrency) == (label, watched, "a1", 1)
    assert other(kube, NS, "b1").acquire(unschedulable=False, now_ns=T_NS).acquired
    refused = lock.acquire(unschedulable=False, now_ns=T_NS)
    assert not refused.acquired and refused.holder_names == "b1"
    assert other(kube, NS, "b1").release()
    assert lock.acquire(unschedulable=False, now_ns=T_NS).acquired
    assert [e.node_id for e in lock.holders(now_ns=T_NS)] == ["a1"]


def test_with_a_concurrency_label_the_lease_lock_is_paced_and_still_watched(kube: Any) -> None:
    def paced(node: str) -> Lock:
        cfg = config(node, "lease", concurrency=3, concurrency_label=ZONE, concurrency_per_label=1)
        return build_lock(cfg, kube)

    lock_a1, lock_a2, lock_b1 = paced("a1"), paced("a2"), paced("b1")
    assert lock_a1.watched is True
    assert lock_a1.acquire(unschedulable=False, now_ns=T_NS).acquired
    refused = lock_a2.acquire(unschedulable=False, now_ns=T_NS)  # a cluster slot is free, its group's is not
    assert not refused.acquired and refused.holder_names == "a1"
    assert lock_b1.acquire(unschedulable=False, now_ns=T_NS).acquired
    groups = [lease for lease in kube.list_leases(NS)["items"] if "-g-" in lease["metadata"]["name"]]
    assert len(groups) == 2


def test_only_the_agents_own_backend_is_paced() -> None:
    kube = FakeKube()
    cfg = config("a1", "lease", concurrency_label=ZONE)
    assert isinstance(
        BACKENDS.get("lease").build(cfg, kube, guard_only=False, hooks=LockHooks()), GroupPacedLock
    )
    assert isinstance(BACKENDS.get("lease").build(cfg, kube, guard_only=True, hooks=LockHooks()), LeaseLock)


def test_the_annotation_as_the_guard_needs_no_daemonset() -> None:
    kube = FakeKube()  # no kured DaemonSet: a cluster served by the Leases alone
    kube.add_node("a1")
    assert build_lock(config("a1", "lease"), kube).acquire(unschedulable=False, now_ns=T_NS).acquired


@pytest.mark.parametrize("backend", BACKENDS.names)
def test_the_hooks_reach_the_agents_backend(kube: Any, backend: str) -> None:
    """``may_take`` is asked right before a slot is written: a closed window takes no slot."""
    asked: list[str] = []

    def may_take() -> bool:
        asked.append(backend)
        return False

    lock = build_lock(config("a1", backend), kube, hooks=LockHooks(may_take=may_take))
    assert not lock.acquire(unschedulable=False, now_ns=T_NS).acquired
    assert asked and lock.holders(now_ns=T_NS) == ()


def test_a_third_registered_backend_guards_the_primary_and_may_be_chosen(kube: Any) -> None:
    registry = BACKENDS.register(THIRD)
    assert registry.names == ("daemonset", "lease", "third")
    assert third_leases(kube, "b1").acquire(unschedulable=False, now_ns=T_NS).acquired
    for backend in ("daemonset", "lease"):
        refused = build_lock(config("a1", backend), kube, registry=registry).acquire(
            unschedulable=False, now_ns=T_NS
        )
        assert not refused.acquired and refused.holder_names == "b1", backend
    assert third_leases(kube, "b1").release()
    assert make_annotation_lock(kube, NS, "b1").acquire(unschedulable=False, now_ns=T_NS).acquired
    chosen = build_lock(config("a1", "third"), kube, registry=registry)
    refused = chosen.acquire(unschedulable=False, now_ns=T_NS)
    assert not refused.acquired and refused.holder_names == "b1"
    assert BACKENDS.names == ("daemonset", "lease")  # the default registry is unchanged


def test_a_name_registered_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="registered twice"):
        BACKENDS.register(dataclasses.replace(THIRD, name="lease"))
    with pytest.raises(ValueError, match="registered twice"):
        LockRegistry((THIRD, THIRD))


def test_an_unknown_backend_is_a_lock_error(kube: Any) -> None:
    with pytest.raises(LockError, match="unknown lock backend 'etcd' \\(choose from daemonset, lease\\)"):
        build_lock(config("a1", "etcd"), kube)


def test_every_backend_is_opened_for_inspection_by_no_node(kube: Any) -> None:
    assert (
        make_annotation_lock(kube, NS, "a1", ttl=Duration(1))
        .acquire(unschedulable=False, now_ns=T_NS)
        .acquired
    )
    held = LeaseLock(
        kube, namespace="leases", prefix="kured-lock", node_id="b1", concurrency=1, ttl=Duration(0)
    )
    assert held.acquire(unschedulable=True, now_ns=T_NS).acquired
    place = LockPlace(
        namespace=NS, ds_name="kured", annotation="weave.works/kured-node-lock", lease_prefix="kured-lock",
        lease_namespace="leases",
    )  # fmt: skip
    views = open_read_only(kube, place)
    assert list(views) == ["daemonset", "lease"]
    assert [(v.backend, v.where, v.node_id) for v in views.values()] == [
        ("annotation", f"{NS}/kured", ""),
        ("lease", "leases/kured-lock-*", ""),
    ]
    assert [e.node_id for e in views["daemonset"].entries()] == ["a1"]  # its TTL ran out: still listed
    assert [(e.node_id, e.unschedulable) for e in views["lease"].entries()] == [("b1", True)]
    assert views["lease"].release(node_id="b1")  # an operator's release
    assert held.holders(now_ns=T_NS) == ()


def test_a_registry_of_its_own_is_opened_whole(kube: Any) -> None:
    place = LockPlace(namespace=NS, ds_name="kured", annotation="a", lease_prefix="kured-lock")
    views = open_read_only(kube, place, registry=LockRegistry((THIRD,)))
    assert list(views) == ["third"] and views["third"].where == f"{NS}/third-lock-*"


@pytest.mark.parametrize("backend", ["daemonset", "lease"])
def test_max_unavailable_is_a_share_of_the_daemonsets_nodes_on_both_backends(kube: Any, backend: str) -> None:
    """``--max-unavailable=50%`` with --concurrency=3: the DaemonSet runs on 2 nodes, so one reboots at once;
    on 4 nodes, two."""
    kube.daemonsets[(NS, "kured")]["status"] = {"desiredNumberScheduled": 2}
    locks = {
        n: build_lock(config(n, backend, concurrency=3, max_unavailable="50%"), kube) for n in ("a1", "a2")
    }
    assert locks["a1"].acquire(unschedulable=False, now_ns=T_NS).acquired
    assert not locks["a2"].acquire(unschedulable=False, now_ns=T_NS).acquired
    assert locks["a2"].concurrency == 1
    kube.daemonsets[(NS, "kured")]["status"] = {"desiredNumberScheduled": 4}
    assert locks["a2"].acquire(unschedulable=False, now_ns=T_NS).acquired
    assert locks["a2"].concurrency == 2


@pytest.mark.parametrize("backend", ["daemonset", "lease"])
def test_without_max_unavailable_concurrency_alone_limits(kube: Any, backend: str) -> None:
    """Off by default: kured's --concurrency, whatever the DaemonSet's count (here none)."""
    locks = [build_lock(config(n, backend, concurrency=2), kube) for n in ("a1", "a2", "b1")]
    assert [lock.acquire(unschedulable=False, now_ns=T_NS).acquired for lock in locks] == [True, True, False]


def test_a_share_per_label_is_counted_from_the_labelled_nodes(kube: Any) -> None:
    """``--concurrency-per-label=50%``: zone a has 2 Nodes (one at once), zone b 1 (one)."""
    kube.add_node("a3", labels={ZONE: "zone-a"})
    kube.add_node("a4", labels={ZONE: "zone-a"})

    def paced(node: str) -> Lock:
        return build_lock(config(node, "lease", concurrency=5, concurrency_label=ZONE,
                                 concurrency_per_label="50%"), kube)  # fmt: skip

    assert [paced(n).acquire(unschedulable=False, now_ns=T_NS).acquired for n in ("a1", "a2", "a3")] == [
        True, True, False,
    ]  # fmt: skip
    assert paced("b1").acquire(unschedulable=False, now_ns=T_NS).acquired


# -- one vocabulary: the flag's value and the printed word of each backend ---------------------------------


def test_each_backend_has_its_flag_value_and_the_word_it_is_printed_as() -> None:
    assert BACKENDS.names == ("daemonset", "lease")
    assert BACKENDS.labels == ("annotation", "lease")
    assert BACKENDS.default is DAEMONSET and Config().lock_backend == DAEMONSET.name
    assert THIRD.label == "third"  # a backend registered without a word is printed as its name


@pytest.mark.parametrize("backend", BACKENDS.backends, ids=BACKENDS.names)
def test_every_lock_of_a_backend_prints_its_registered_word(kube: Any, backend: Backend) -> None:
    place = LockPlace(namespace=NS, ds_name="kured", annotation="a", lease_prefix="kured-lock")
    built = [
        backend.build(config("a1", backend.name), kube, guard_only=g, hooks=LockHooks())
        for g in (False, True)
    ]
    words = {build_lock(config("a1", backend.name), kube).backend, *(lock.backend for lock in built)}
    words |= {backend.open(kube, place).backend, backend.open_view(kube, place).backend}
    assert words == {backend.label}


def test_a_backend_is_found_by_its_flag_value_or_its_word() -> None:
    assert BACKENDS.find("daemonset") is DAEMONSET and BACKENDS.find("annotation") is DAEMONSET
    assert BACKENDS.find("lease") is LEASE
    assert BACKENDS.find("both") is None and BACKENDS.find("") is None


def test_the_flags_only_a_backend_serves_are_registered_with_it() -> None:
    assert BACKENDS.serving("concurrency-label") == ("lease",)
    assert BACKENDS.serving("resume-rolls") == ("lease",)
    assert BACKENDS.serving("max-unavailable") == ()


def test_a_word_registered_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="words registered twice"):
        BACKENDS.register(dataclasses.replace(THIRD, label="lease"))
    with pytest.raises(ValueError, match="words registered twice"):
        BACKENDS.register(dataclasses.replace(THIRD, label="daemonset"))


def test_every_backend_is_opened_as_its_operator_view(kube: Any) -> None:
    """kured's annotation has a view of its own; a backend registered without one gets a plain view of what it
    opens."""
    place = LockPlace(namespace=NS, ds_name="kured", annotation="a", lease_prefix="kured-lock")
    views = open_views(kube, place)
    assert [type(v) for v in views] == [AnnotationView, PlainView]
    assert [v.subject for v in views] == [f"annotation lock on {NS}/kured", f"lease lock {NS}/kured-lock-*"]
    (third,) = open_views(kube, place, registry=LockRegistry((THIRD,)))
    assert isinstance(third, PlainView) and third.subject == f"lease lock {NS}/third-lock-*"
