"""The lock's admission rules on the real API server, as the agents' ServiceAccount with pod-bound tokens.

For the kustomize base and the chart's render (``setup`` of :mod:`tests.e2e.test_admission_policies`), the
agent on ``mine`` and the agent on ``other`` each with a token bound to a pod on its node:

* Leases: an agent takes and frees only its own node's slots (cluster slots, group slots, its roll-queue
  entry ``<prefix>-q-<node>``); a Lease another node holds is not written at all (freed, taken over,
  expired or not, its bookkeeping or labels changed); it names no other node as holder or owner; it keeps
  no bookkeeping on a slot it does not hold, sets no finalizer and no blocking owner; the central FleetLock
  server acts for every node but is bound by the owner rule.
* kured's annotation lock: an agent adds, replaces and removes only its own entry, as kured's JSON; other
  nodes' entries, the form and ``maxOwners`` stay while others hold; a value that is not kured's JSON is
  neither written nor rewritten.

Every refusal is the policy's (a 403 naming a ValidatingAdmissionPolicy) and says why. Then pykured's locks
with those tokens: a refused take of another node's expired slot (--lock-ttl), on either backend, counts as
held (one log line naming the policy, no second write) until ``pykured lock release`` frees it; and when a
holder's Node is deleted, kube-controller-manager's garbage collector deletes its slot (the slot's owner),
which the waiter then takes.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pykured.core import errors
from pykured.fleet.locks import lock_release
from pykured.gocompat.goflags import Duration
from pykured.kube.client import Kube, Obj
from pykured.lock.annotation import AnnotationLock
from pykured.lock.groups import group_lease_name
from pykured.lock.lease import LeaseLock
from pykured.lock.record import LockEntry, encode_entry, encode_multi, parse_go_time
from pykured.roll.queue import queue_lease_name
from pykured_dev.eventually import eventually
from tests.e2e.test_admission_policies import INSTALLS, Setup, refused, setup  # noqa: F401 - setup: the fixture
from tests.e2e.test_rbac_profiles import pod_bound_token, token_kubeconfig
from tests.testenv import TestEnv

pytestmark = [pytest.mark.k8s, pytest.mark.slow]

LOCK = "weave.works/kured-node-lock"
CREATED = "2026-12-02T10:00:00.123456789Z"


@dataclasses.dataclass
class Agents:
    setup: Setup
    mine: Kube
    """The agent on ``setup.mine`` (pod-bound token)."""
    theirs: Kube
    """The agent on ``setup.other`` (pod-bound token)."""
    admin: Kube

    @property
    def ns(self) -> str:
        return self.setup.ns

    def slot(self, index: int | str) -> str:
        return f"{self.setup.lease_prefix}-{index}"


def grant_lease_writes(k8s: TestEnv, ns: str, account: str) -> None:
    """``get``/``update`` on every Lease of ``ns`` (the rule ``--concurrency-label`` and ``--resume-rolls``
    add), so that what refuses a write below is the policy, never RBAC's names."""
    rule = {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
            "verbs": ["get", "list", "watch", "create", "update"]}  # fmt: skip
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "lease-writes"}, "rules": [rule]}  # fmt: skip
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "lease-writes"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "lease-writes"},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": ns}],
    }
    k8s.kube().create(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles", role)
    k8s.kube().create(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings", binding)


@pytest.fixture
def agents(k8s: TestEnv, setup: Setup, tmp_path: Path) -> Iterator[Agents]:  # noqa: F811
    grant_lease_writes(k8s, setup.ns, setup.account)
    token = pod_bound_token(k8s, setup.ns, setup.account, setup.other, ds=setup.ds)
    theirs = Kube.from_kubeconfig(token_kubeconfig(k8s, tmp_path / "theirs.json", token))
    made = Agents(setup, setup.agent, theirs, k8s.kube())
    made.mine.create_lease(setup.ns, lease(made.slot("rbac-probe"), setup.mine))

    def granted() -> bool:  # the Role in effect: an update of a Lease the base's Role does not name
        try:
            rewrite(made.mine, setup.ns, made.slot("rbac-probe"), take(setup.mine))
        except errors.ForbiddenError:
            return False
        return True

    assert eventually(granted, timeout=60, every=0.5), "the Lease Role never took effect"
    yield made
    theirs.close()


def lease(
    name: str,
    holder: str | None = None,
    *,
    annotations: dict[str, str] | None = None,
    owners: list[Obj] | None = None,
    labels: dict[str, str] | None = None,
    duration: int | None = None,
    acquired: str = "2026-12-02T10:00:00.000000Z",
) -> Obj:
    meta: dict[str, Any] = {"name": name, "labels": labels or {"pykured.dev/lock": "x"}}
    if annotations:
        meta["annotations"] = annotations
    if owners:
        meta["ownerReferences"] = owners
    spec: dict[str, Any] = {}
    if holder:
        spec = {"holderIdentity": holder, "acquireTime": acquired, "renewTime": acquired}
        if duration:
            spec["leaseDurationSeconds"] = duration
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": spec}


def owner(kube: Kube, node: str, **extra: Any) -> Obj:
    uid = kube.get_node(node)["metadata"]["uid"]
    return {"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid, **extra}


def rewrite(kube: Kube, ns: str, name: str, change: Any) -> Obj:
    """Read Lease ``name`` with ``kube`` and write it back changed by ``change(lease)``."""
    current = kube.get_lease(ns, name)
    change(current)
    return kube.replace_lease(ns, name, current)


def free(obj: Obj) -> None:
    obj["spec"] = {"leaseTransitions": obj["spec"].get("leaseTransitions", 0)}
    obj["metadata"].pop("ownerReferences", None)
    (obj["metadata"].get("annotations") or {}).pop("pykured.dev/unschedulable", None)


def take(node: str) -> Any:
    def change(obj: Obj) -> None:
        obj["spec"].update(holderIdentity=node, acquireTime=CREATED[:26] + "Z", renewTime=CREATED[:26] + "Z")

    return change


# -- Leases -------------------------------------------------------------------------------------------------


def test_an_agent_takes_and_frees_its_own_slots(k8s: TestEnv, agents: Agents) -> None:
    a, ns, mine = agents, agents.ns, agents.setup.mine
    # a cluster slot, as pykured takes it: held, remembering the cordon, owned by its own Node; then freed
    body = lease(a.slot(0), mine, annotations={"pykured.dev/unschedulable": "false"},
                 owners=[owner(a.admin, mine)])  # fmt: skip
    assert a.mine.create_lease(ns, body)["spec"]["holderIdentity"] == mine
    assert not rewrite(a.mine, ns, a.slot(0), free)["spec"].get("holderIdentity")
    # taken again (an existing Lease), and taken anew after its own TTL (its own expired slot)
    rewrite(a.mine, ns, a.slot(0), take(mine))
    rewrite(a.mine, ns, a.slot(0), take(mine))
    # a group slot of its own: taken (its group annotation), then given back
    group = group_lease_name(a.setup.lease_prefix, "zone-a", 0)
    a.mine.create_lease(ns, lease(group, mine, annotations={"pykured.dev/group": "zone-a"}))
    rewrite(a.mine, ns, group, free)
    # its own roll-queue entry: its place, renewed, then cleared
    queue = queue_lease_name(a.setup.lease_prefix, mine)
    assert queue == f"{a.setup.lease_prefix}-q-{mine}"
    entry = {"pykured.dev/queue-entry": '{"state":"waiting"}'}
    a.mine.create_lease(ns, lease(queue, mine, annotations=entry, labels={"pykured.dev/lock-queue": "x"}))
    rewrite(a.mine, ns, queue, take(mine))

    def leave(obj: Obj) -> None:
        free(obj)
        obj["metadata"]["annotations"].pop("pykured.dev/queue-entry")

    rewrite(a.mine, ns, queue, leave)
    # a free slot created by the holder-to-be of another slot: nothing held, nothing owned
    a.theirs.create_lease(ns, lease(a.slot(1)))


def test_a_lease_another_node_holds_is_not_written(k8s: TestEnv, agents: Agents) -> None:
    a, ns, mine, other = agents, agents.ns, agents.setup.mine, agents.setup.other
    held = f"held by node {other}: only its holder frees it"
    a.theirs.create_lease(ns, lease(a.slot(0), other, annotations={"pykured.dev/unschedulable": "true"},
                                    owners=[owner(a.admin, other)]))  # fmt: skip
    # emptied while it reboots (the attack that would let the roll run past --concurrency), taken over,
    # its cordon memory or its labels changed: whatever changes, refused
    refused(lambda: rewrite(a.mine, ns, a.slot(0), free), f"on node {mine} may not write Lease", held)
    refused(lambda: rewrite(a.mine, ns, a.slot(0), take(mine)), held)

    def forget_cordon(obj: Obj) -> None:
        obj["metadata"]["annotations"]["pykured.dev/unschedulable"] = "false"

    refused(lambda: rewrite(a.mine, ns, a.slot(0), forget_cordon), held)

    def relabel(obj: Obj) -> None:
        obj["metadata"]["labels"] = {"pykured.dev/lock": "elsewhere"}

    refused(lambda: rewrite(a.mine, ns, a.slot(0), relabel), held)
    # expired (a TTL of one second, taken long ago): a policy has no clock, so the same
    a.theirs.create_lease(ns, lease(a.slot(1), other, duration=1, acquired="2020-01-01T00:00:00.000000Z"))
    refused(lambda: rewrite(a.mine, ns, a.slot(1), take(mine)), f"held by node {other}", "expired or not")
    # another node's stale group slot (no cluster slot, grace long past) and its roll-queue entry
    group = group_lease_name(a.setup.lease_prefix, "zone-a", 0)
    a.theirs.create_lease(ns, lease(group, other, annotations={"pykured.dev/group": "zone-a"},
                                    acquired="2020-01-01T00:00:00.000000Z"))  # fmt: skip
    refused(lambda: rewrite(a.mine, ns, group, take(mine)), f"held by node {other}")
    queue = queue_lease_name(a.setup.lease_prefix, other)
    a.theirs.create_lease(
        ns, lease(queue, other, annotations={"pykured.dev/queue-entry": '{"state":"held"}'})
    )

    def clear(obj: Obj) -> None:
        free(obj)
        obj["metadata"]["annotations"].pop("pykured.dev/queue-entry")

    refused(lambda: rewrite(a.mine, ns, queue, clear), f"held by node {other}")
    stored = a.admin.get_lease(ns, a.slot(0))
    assert stored["spec"]["holderIdentity"] == other
    assert stored["metadata"]["annotations"]["pykured.dev/unschedulable"] == "true"
    assert a.admin.get_lease(ns, queue)["spec"]["holderIdentity"] == other
    # its holder frees it
    rewrite(a.theirs, ns, a.slot(0), free)


def test_an_agent_names_no_other_node_and_squats_no_entry(k8s: TestEnv, agents: Agents) -> None:
    a, ns, mine, other = agents, agents.ns, agents.setup.mine, agents.setup.other
    # another node as the holder of a slot it creates, or of a free one it takes
    refused(
        lambda: a.mine.create_lease(ns, lease(a.slot(0), other)),
        f"on node {mine} may not make node {other} the holder",
        "only for its own node",
    )
    a.mine.create_lease(ns, lease(a.slot(1)))
    refused(lambda: rewrite(a.mine, ns, a.slot(1), take(other)), f"may not make node {other} the holder")
    # another node's roll-queue entry: created (squatted), even in its own name or free
    theirs = queue_lease_name(a.setup.lease_prefix, other)
    for holder in (mine, None):
        refused(
            functools.partial(a.mine.create_lease, ns, lease(theirs, holder)),
            f"may write only its own lock queue entry {a.setup.lease_prefix}-q-{mine}, not {theirs}",
        )
    # owned by another Node (so the garbage collector would delete it with that one), or blocking a Node's
    # deletion
    refused(
        lambda: a.mine.create_lease(ns, lease(a.slot(2), mine, owners=[owner(a.admin, other)])),
        f"owned only by the Node of its holder ({mine})",
    )
    refused(
        lambda: a.mine.create_lease(
            ns, lease(a.slot(2), mine, owners=[owner(a.admin, mine, blockOwnerDeletion=True)])
        ),
        "without blockOwnerDeletion",
    )
    refused(
        lambda: a.mine.create_lease(ns, lease(a.slot(2), owners=[owner(a.admin, mine)])),
        "(a free slot by none)",
    )
    # a finalizer (the garbage collector could not delete the slot)
    body = lease(a.slot(2), mine)
    body["metadata"]["finalizers"] = ["example.com/keep"]
    refused(lambda: a.mine.create_lease(ns, body), "finalizers")
    # bookkeeping on a slot nobody holds (only the holder's own take or release changes it)
    refused(
        lambda: rewrite(a.mine, ns, a.slot(1),
                        lambda o: o["metadata"].update(annotations={"pykured.dev/unschedulable": "true"})),
        "pykured.dev/* annotations", "not: pykured.dev/unschedulable",
    )  # fmt: skip
    # a token bound to no pod names no node
    refused(lambda: a.setup.unbound.create_lease(ns, lease(a.slot(3))), "pod-bound")
    for name in (a.slot(0), a.slot(2), a.slot(3), theirs):
        assert name not in {i["metadata"]["name"] for i in a.admin.list_leases(ns)["items"]}


@pytest.mark.parametrize("setup", [i for i in INSTALLS if i.startswith("kustomize")], indirect=True)
def test_the_central_fleetlock_server_acts_for_every_node_but_owns_by_the_holder(
    k8s: TestEnv, agents: Agents
) -> None:
    """The kustomize base's central FleetLock ServiceAccount takes and frees any node's slot (it acts for
    the Zincati nodes); the owner rule binds it too. Kustomize installs only: the chart runs no central
    server."""
    a, ns, mine, other = agents, agents.ns, agents.setup.mine, agents.setup.other
    user = f"system:serviceaccount:{ns}:pykured-fleetlock"
    rule = {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "verbs": ["get", "create", "update"],
    }
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "central"},
            "rules": [rule]}  # fmt: skip
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "central"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "central"},
        "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}],
    }  # fmt: skip
    k8s.kube().create(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles", role)
    k8s.kube().create(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings", binding)
    # the marker overlays/fleetlock-central's ClusterRole carries: what the policies recognise it by
    marker = {"apiGroups": ["pykured.dev"], "resources": ["fleetlockservers"], "resourceNames": ["kured"],
              "verbs": ["use"]}  # fmt: skip
    k8s.grant_cluster_role(
        f"central-marker-{ns}",
        [marker],
        {"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"},
    )
    central = Kube.from_kubeconfig(
        k8s.kubeconfig_for(user, ("system:serviceaccounts", "system:authenticated"))
    )
    a.theirs.create_lease(ns, lease(a.slot(0), other, owners=[owner(a.admin, other)]))

    def freed() -> bool:
        try:
            rewrite(central, ns, a.slot(0), free)
        except errors.ForbiddenError:  # the Role not yet in effect
            return False
        return True

    assert eventually(freed, timeout=60, every=0.5)
    rewrite(central, ns, a.slot(0), take(mine))
    refused(
        lambda: central.create_lease(ns, lease(a.slot(1), mine, owners=[owner(a.admin, other)])),
        f"owned only by the Node of its holder ({mine})",
    )
    central.close()


# -- kured's annotation lock ---------------------------------------------------------------------------------


def kured_entry(node: str, *, created: str = CREATED, ttl: int = 0, unschedulable: bool = False) -> str:
    """One entry as kured 1.23.0 (Go's encoding/json) writes it."""
    return encode_entry(LockEntry(node, unschedulable, parse_go_time(created)[0], ttl, created))


def multi(max_owners: int, *nodes: str) -> str:
    created = parse_go_time(CREATED)[0]
    return encode_multi(
        max_owners=max_owners, entries=[LockEntry(n, False, created, 0, CREATED) for n in nodes]
    )


def write_lock(kube: Kube, where: Setup, value: str | None) -> Obj:
    ds = kube.get_daemonset(where.ns, where.ds)
    annotations = ds["metadata"].setdefault("annotations", {})
    if value is None:
        annotations.pop(LOCK, None)
    else:
        annotations[LOCK] = value
    return kube.replace_daemonset(where.ns, where.ds, ds)


def stored_lock(a: Agents) -> str | None:
    value = (a.admin.get_daemonset(a.ns, a.setup.ds)["metadata"].get("annotations") or {}).get(LOCK)
    return value if value is None else str(value)


def test_an_agent_changes_only_its_own_entry_in_the_single_lock(k8s: TestEnv, agents: Agents) -> None:
    a, s, mine, other = agents, agents.setup, agents.setup.mine, agents.setup.other
    # take when free, kured's single form; take anew after its own TTL; release
    write_lock(a.mine, s, kured_entry(mine, ttl=3_600_000_000_000))
    write_lock(a.mine, s, kured_entry(mine, created="2026-12-02T11:00:00Z", unschedulable=True))
    write_lock(a.mine, s, None)
    assert stored_lock(a) is None
    # another node holds it: not freed, not taken over (expired or not), not rewritten
    write_lock(a.theirs, s, kured_entry(other, ttl=1, created="2020-01-01T00:00:00Z"))
    held = (
        f"on node {mine} may change only its own entry in the lock annotation {LOCK}; the entries of {other}"
    )
    refused(lambda: write_lock(a.mine, s, None), held, "expired or not")
    refused(lambda: write_lock(a.mine, s, kured_entry(mine)), held)
    refused(lambda: write_lock(a.mine, s, kured_entry(other, unschedulable=True)), held)
    # a second entry beside it, turning the single form into kured's multi form
    expired = kured_entry(other, ttl=1, created="2020-01-01T00:00:00Z")
    beside = f'{{"maxOwners":2,"locks":[{expired},{kured_entry(mine)}]}}'
    refused(lambda: write_lock(a.mine, s, beside), "may not change the form or maxOwners")
    assert stored_lock(a) == kured_entry(other, ttl=1, created="2020-01-01T00:00:00Z")
    write_lock(a.theirs, s, None)
    # only kured's JSON, as Go writes it (nothing smuggled in unparsed)
    for value in (
        json.dumps({"nodeID": mine}),
        kured_entry(mine).replace('"TTL":0', '"TTL":0,"x":1'),
        kured_entry(mine) + " ",
        kured_entry(mine).replace(",", ", "),
        "manual",
    ):
        refused(functools.partial(write_lock, a.mine, s, value), "only as kured writes it")
    # a token bound to no pod names no node
    refused(lambda: write_lock(s.unbound, s, kured_entry(mine)), "pod-bound")
    # a value that is not kured's JSON (an operator's manual lock) is not rewritten, not even removed
    write_lock(a.admin, s, '{"nodeID":"manual"}')
    refused(lambda: write_lock(a.mine, s, kured_entry(mine)), "not the JSON kured writes")
    refused(lambda: write_lock(a.mine, s, None), "not the JSON kured writes")
    assert stored_lock(a) == '{"nodeID":"manual"}'


def test_an_agent_changes_only_its_own_entry_in_the_multi_lock(k8s: TestEnv, agents: Agents) -> None:
    a, s, mine, other = agents, agents.setup, agents.setup.mine, agents.setup.other
    write_lock(a.theirs, s, multi(2, other))
    # its entry appended beside the other's, then removed again, as kured and pykured do
    write_lock(a.mine, s, multi(2, other, mine))
    write_lock(a.mine, s, multi(2, other))
    write_lock(a.mine, s, multi(2, other, mine))
    held = f"may change only its own entry in the lock annotation {LOCK}; the entries of {other}"
    # the other's entry removed or changed; one more entry of its own (where its own entry stands is its own)
    refused(lambda: write_lock(a.mine, s, multi(2, mine)), held)
    write_lock(a.mine, s, multi(2, mine, other))
    write_lock(a.mine, s, multi(2, other, mine))
    changed = multi(2, other, mine).replace('"unschedulable":false', '"unschedulable":true', 1)
    refused(lambda: write_lock(a.mine, s, changed), held)
    refused(lambda: write_lock(a.mine, s, multi(2, other, mine, mine)), "may change only its own entry")
    # maxOwners while another holds
    refused(lambda: write_lock(a.mine, s, multi(3, other, mine)), "may not change the form or maxOwners",
            f"while {other} hold")  # fmt: skip
    # smuggled: an unknown key, a null entry
    refused(lambda: write_lock(a.mine, s, multi(2, other, mine)[:-1] + ',"x":1}'), "only as kured writes it")
    refused(
        lambda: write_lock(a.mine, s, multi(2, other, mine).replace("]", ",null]")), "only as kured writes it"
    )
    assert stored_lock(a) == multi(2, other, mine)
    # released by both, as kured leaves it: {"maxOwners":2,"locks":[]}; then maxOwners is free to change
    write_lock(a.mine, s, multi(2, other))
    write_lock(a.theirs, s, multi(2))
    write_lock(a.mine, s, multi(3, mine))
    write_lock(a.mine, s, multi(3))


# -- the lock under the policies -----------------------------------------------------------------------------


class Counted:
    """A client that counts the lock's writes (and forwards everything)."""

    WRITES = ("create_lease", "replace_lease", "replace_daemonset")

    def __init__(self, kube: Kube) -> None:
        self._kube = kube
        self.writes = 0

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._kube, name)
        if name not in self.WRITES:
            return real

        def write(*args: Any, **kwargs: Any) -> Any:
            self.writes += 1
            return real(*args, **kwargs)

        return write


def lease_lock(kube: Any, a: Agents, node: str, **kw: Any) -> LeaseLock:
    options: dict[str, Any] = {"ttl": Duration(0), "retry_interval": 0.2, "retry_timeout": 10.0}
    options.update(kw)
    return LeaseLock(
        kube, namespace=a.ns, prefix=a.setup.lease_prefix, node_id=node, concurrency=1, **options
    )


def annotation_lock(kube: Any, a: Agents, node: str, **kw: Any) -> AnnotationLock:
    options: dict[str, Any] = {"ttl": Duration(0), "conflict_delay": 0.2, "retry_interval": 0.2,
                               "retry_timeout": 10.0, "concurrency": 1}  # fmt: skip
    options.update(kw)
    return AnnotationLock(kube, namespace=a.ns, ds_name=a.setup.ds, annotation=LOCK, node_id=node, **options)


def refusal_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "Not allowed to" in r.getMessage()]


def operator_release(a: Agents, node: str, backend: str) -> str:
    """``pykured lock release NODE --backend BACKEND``, as a cluster admin."""
    out = io.StringIO()
    code = lock_release(a.admin, node, namespace=a.ns, ds_name=a.setup.ds, annotation=LOCK,
                        lease_prefix=a.setup.lease_prefix, out=out, backend=backend)  # fmt: skip
    assert code == 0, out.getvalue()
    return out.getvalue()


def test_an_expired_slot_of_another_node_counts_as_held_until_an_operator_frees_it(
    k8s: TestEnv, agents: Agents, caplog: pytest.LogCaptureFixture
) -> None:
    """--lock-ttl under the policies, on the Lease backend: the waiter's take of the holder's expired slot is
    refused; the lock understands it (not acquired, the holder named, one log line naming the policy, no
    second write), and ``pykured lock release`` frees it for the waiter. The slot is owned by its holder's
    Node, as the holder took it."""
    a, mine, other = agents, agents.setup.mine, agents.setup.other
    ttl = Duration.parse("1s")
    theirs = lease_lock(a.theirs, a, other, ttl=ttl)
    assert theirs.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    slot = a.admin.get_lease(a.ns, a.slot(0))
    uid = a.admin.get_node(other)["metadata"]["uid"]
    assert slot["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": other, "uid": uid}
    ]
    counted = Counted(a.mine)
    waiter = lease_lock(counted, a, mine, ttl=ttl)
    assert eventually(lambda: theirs.holding(now_ns=time.time_ns()) is None, timeout=60, every=0.2)  # expired
    caplog.set_level(logging.INFO)
    for _ in range(3):
        result = waiter.acquire(unschedulable=False, now_ns=time.time_ns())
        assert not result.acquired and result.holder_names == other
    assert counted.writes == 1
    (line,) = refusal_lines(caplog)
    assert f"take the expired slot {a.slot(0)}, held by node {other}" in line and "agent-leases" in line, line
    assert "ValidatingAdmissionPolicy" in line
    assert a.admin.get_lease(a.ns, a.slot(0))["spec"]["holderIdentity"] == other
    assert "Released the lease lock of" in operator_release(a, other, "lease")
    assert waiter.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    taken = a.admin.get_lease(a.ns, a.slot(0))
    assert taken["spec"]["holderIdentity"] == mine
    assert [o["name"] for o in taken["metadata"]["ownerReferences"]] == [mine]
    assert waiter.release()


def test_an_expired_annotation_lock_of_another_node_counts_as_held_until_an_operator_frees_it(
    k8s: TestEnv, agents: Agents, caplog: pytest.LogCaptureFixture
) -> None:
    """The same on kured's annotation lock, single form; then the multi form, where a take beside the other
    node's entry is the agent's own and passes."""
    a, mine, other = agents, agents.setup.mine, agents.setup.other
    ttl = Duration.parse("1s")
    theirs = annotation_lock(a.theirs, a, other, ttl=ttl)
    assert theirs.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    counted = Counted(a.mine)
    waiter = annotation_lock(counted, a, mine, ttl=ttl)
    assert eventually(lambda: theirs.holding(now_ns=time.time_ns()) is None, timeout=60, every=0.2)
    caplog.set_level(logging.INFO)
    for _ in range(3):
        result = waiter.acquire(unschedulable=False, now_ns=time.time_ns())
        assert not result.acquired and result.holder_names == other
    assert counted.writes == 1
    (line,) = refusal_lines(caplog)
    assert f"in annotation {LOCK}, held by node {other}" in line and "agent-daemonset" in line, line
    assert [e.node_id for e in waiter.holders(now_ns=time.time_ns())] == [other]
    assert "Released the annotation lock of" in operator_release(a, other, "daemonset")
    assert waiter.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    assert waiter.release()
    # the multi form: each appends and removes its own entry beside the other's
    theirs = annotation_lock(a.theirs, a, other, concurrency=2)
    ours = annotation_lock(a.mine, a, mine, concurrency=2)
    assert theirs.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    assert ours.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    assert theirs.release()
    assert [e.node_id for e in ours.holders(now_ns=time.time_ns())] == [mine]
    assert ours.release()


@pytest.mark.kcm
@pytest.mark.timeout(300)
def test_the_garbage_collector_deletes_the_slot_of_a_deleted_node_and_a_waiter_takes_it(
    k8s: TestEnv, agents: Agents, caplog: pytest.LogCaptureFixture
) -> None:
    """A holder's Node is deleted: the waiter's liveness check finds it gone, and its free of the slot is
    refused under the policies (said once); kube-controller-manager's garbage collector deletes the slot (its
    owner is that Node), and the waiter creates it anew and holds it."""
    a, mine, other = agents, agents.setup.mine, agents.setup.other
    theirs = lease_lock(a.theirs, a, other)
    assert theirs.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    waiter = lease_lock(a.mine, a, mine, liveness_interval=0.0)
    assert not waiter.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    k8s.delete_node(other)
    caplog.set_level(logging.INFO)
    for _ in range(2):
        result = waiter.acquire(unschedulable=False, now_ns=time.time_ns())
        assert not result.acquired and result.holder_names == other
    (line,) = refusal_lines(caplog)
    assert f"free the deleted Node's slot {a.slot(0)}, held by node {other}" in line, line
    k8s.start_kcm("garbage-collector-controller")
    try:

        def deleted() -> bool:
            try:
                a.admin.get_lease(a.ns, a.slot(0))
            except errors.NotFoundError:
                return True
            return False

        assert eventually(deleted, timeout=120, every=0.5), "the garbage collector never deleted the slot"
    finally:
        k8s.stop_kcm()
    assert waiter.acquire(unschedulable=False, now_ns=time.time_ns()).acquired
    assert a.admin.get_lease(a.ns, a.slot(0))["spec"]["holderIdentity"] == mine
