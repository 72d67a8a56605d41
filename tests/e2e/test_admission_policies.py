"""The shipped admission policies on the real API server, as the ServiceAccounts themselves.

The agent's identity is a pod-bound ServiceAccount token (TokenRequest with ``boundObjectRef`` to a Pod
scheduled on a node), the kubelet's kind of token, so the user extra
``authentication.kubernetes.io/node-name`` the policies read is the API server's own. Four installs, none in
kube-system: the kustomize base moved as a user moves it (a kustomization with ``namespace:``; kured's
names), the same renamed too (``nameSuffix``: ServiceAccount and DaemonSet ``kured-x``), and the chart's
render as release ``kured`` (kured's names) and as release ``ops``. The policies match the agents by the
marker permission their ClusterRole carries, not by name, and nothing of them is rewritten, but for one
matchCondition each test adds to the agents' policies of the kustomize installs (the ServiceAccounts of its
namespace only: the installs share this API server, and all kustomize installs carry the same marker), and
``-<namespace>`` on cluster-scoped names (:func:`~tests.e2e.test_rbac_profiles.render_moved`).

For each: every write pykured and kured make passes, and every forged one (another node, another field, a
foreign taint or Lease, the DaemonSet's template, a token bound to no pod; the policy ConfigMap's freeze,
blackouts, halt or lifted halts; a pod on another node; a requester's cordon, forged cycle state, approved
hook) is refused with a message that says why. The central FleetLock server's token is held to the same on
the ConfigMap. A full reboot cycle then runs under the policies with the profile's RBAC only, each agent
with a token bound to a pod on its node.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import json
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from pykured.alertmanager.record import record_patch
from pykured.core import errors
from pykured.fleet import requester as fleet_requester
from pykured.fleet.freeze import freeze, unfreeze
from pykured.fleet.quarantine import unquarantine
from pykured.kube.client import JSON_PATCH, MERGE_PATCH, Kube
from pykured.lock.record import LockEntry, encode_entry, parse_go_time
from pykured.policy.freeze import FreezeRecord
from pykured.policy.quarantine import QUARANTINED_ANNOTATION, QuarantineRecord
from pykured.policy.source import configmaps_path
from pykured_dev.eventually import eventually
from pykured_dev.testenv.fleet import Fleet
from pykured_dev.testenv.reference import helm_template, reference
from tests.chart.test_pykured_chart import CHART
from tests.e2e.test_rbac_profiles import (
    SIMULATION_OWNED,
    VAP,
    apply_docs,
    install,
    pod_bound_token,
    token_kubeconfig,
    unique_names,
)
from tests.testenv import TestEnv

pytestmark = [pytest.mark.k8s, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime.datetime(2026, 12, 3, 2, 0, tzinfo=datetime.UTC)


@dataclasses.dataclass
class Setup:
    ns: str
    account: str
    ds: str
    lease_prefix: str
    policy: str
    """The policy ConfigMap's name."""
    agent: Kube
    """A pod-bound token of the agents' ServiceAccount, its pod on ``mine``."""
    unbound: Kube
    """A token of the same ServiceAccount bound to no pod."""
    mine: str
    other: str
    configured: bool
    """The operator-chosen label, taint and hook of the chart's values are in the policies."""


def refused(call: Callable[[], Any], *fragments: str) -> str:
    """``call`` is refused by an admission policy (403) whose message holds every fragment."""
    with pytest.raises(errors.ForbiddenError) as caught:
        call()
    text = str(caught.value)
    assert "ValidatingAdmissionPolicy" in text, text
    for fragment in fragments:
        assert fragment in text, text
    return text


def grant(
    k8s: TestEnv, ns: str, account: str, name: str, rules: list[dict[str, Any]], *, where: str | None = None
) -> None:
    """A Role ``name`` with ``rules`` in ``where`` (default ``ns``) bound to the ServiceAccount ``ns/account``
    (a grant the profile does not make)."""
    where = where or ns
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": name},
            "rules": rules}  # fmt: skip
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": ns}],
    }
    k8s.kube().create(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{where}/roles", role)
    k8s.kube().create(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{where}/rolebindings", binding)


def grant_daemonset_update(k8s: TestEnv, ns: str, account: str, ds: str) -> None:
    """The annotation lock's DaemonSet ``update`` (kured-compat's and the chart's default lock grant it)."""
    rule = {"apiGroups": ["apps"], "resources": ["daemonsets"], "resourceNames": [ds], "verbs": ["update"]}
    grant(k8s, ns, account, "ds-lock", [rule])


def _kustomize(k8s: TestEnv, ns: str, tmp_path: Path, suffix: str) -> tuple[str, str, str, str]:
    """kustomize/base moved into ``ns`` (and renamed with ``suffix``): account, DaemonSet, lease prefix (the
    Lease policy's, which a renamed DaemonSet's agents pass as --lease-prefix) and policy ConfigMap."""
    install(k8s, "kustomize/base", ns, tmp_path, name_suffix=suffix)
    k8s.create_daemonset(ns, f"kured{suffix}")
    return f"kured{suffix}", f"kured{suffix}", "kured-lock", f"kured-policy{suffix}"


def _chart(k8s: TestEnv, ns: str, tmp_path: Path, release: str) -> tuple[str, str, str, str]:
    """The chart's render as ``release`` in ``ns``, applied as rendered (cluster-scoped names made unique);
    its policy ConfigMap made as an operator makes it. The release's marker is its own: nothing to narrow."""
    ref = dataclasses.replace(reference(("helm",)), chart=CHART)
    values = {
        "configuration": {
            "preferNoScheduleTaint": "example.com/reboot-pending",
            "preRebootNodeLabels": ["example.com/rebooting=true"],
            "postRebootNodeLabels": ["example.com/rebooting=false"],
        },
        "pykured": {
            "lockBackend": "lease",
            "policyConfigMap": "kured-policy",
            "requesterClusterRole": {"create": True},
            "hooks": {"beforeReboot": ["example.com/before-ok"]},
        },
    }
    _text, objects = helm_template(ref, release=release, namespace=ns, values=values, workdir=tmp_path / "h")
    apply_docs(k8s, unique_names(objects, ns), {o["kind"] for o in objects})
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kured-policy"}}
    k8s.kube().create(configmaps_path(ns), body)
    full = next(o["metadata"]["name"] for o in objects if o["kind"] == "DaemonSet")
    return full, full, f"{full}-lock", "kured-policy"


INSTALLS = {
    "kustomize": lambda k8s, ns, tmp: _kustomize(k8s, ns, tmp, ""),
    "kustomize-renamed": lambda k8s, ns, tmp: _kustomize(k8s, ns, tmp, "-x"),
    "chart": lambda k8s, ns, tmp: _chart(k8s, ns, tmp, "kured"),
    "chart-renamed": lambda k8s, ns, tmp: _chart(k8s, ns, tmp, "ops"),
}


@pytest.fixture(params=list(INSTALLS))
def setup(request: pytest.FixtureRequest, k8s: TestEnv, tmp_path: Path) -> Iterator[Setup]:
    ns = k8s.new_namespace("vap")
    account, ds, prefix, policy = INSTALLS[request.param](k8s, ns, tmp_path)
    grant_daemonset_update(k8s, ns, account, ds)
    mine, other = k8s.add_nodes(k8s.unique("vap-mine"), k8s.unique("vap-other"))
    agent = Kube.from_kubeconfig(
        token_kubeconfig(k8s, tmp_path / "agent.json", pod_bound_token(k8s, ns, account, mine, ds=ds))
    )
    unbound = Kube.from_kubeconfig(
        token_kubeconfig(k8s, tmp_path / "unbound.json", k8s.sa_token(ns, account, create=False))
    )
    setup = Setup(
        ns, account, ds, prefix, policy, agent, unbound, mine, other, request.param.startswith("chart")
    )

    # Each policy takes effect on its own: wait until each refuses a probe (a new value each time: an
    # unchanged annotation is no change to refuse).
    probe = {"metadata": {"annotations": {"example.com/probe": ""}}}

    def node_probe(n: int) -> None:
        probe["metadata"]["annotations"]["example.com/probe"] = str(n)
        agent.patch_node(mine, probe, patch_type=MERGE_PATCH)

    def lease_probe(n: int) -> None:
        agent.create_lease(ns, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                "metadata": {"name": f"probe-{n}"}})  # fmt: skip

    def daemonset_probe(n: int) -> None:
        obj = agent.get_daemonset(ns, ds)
        obj["metadata"].setdefault("annotations", {})["example.com/probe"] = str(n)
        agent.replace_daemonset(ns, ds, obj)

    def configmap_probe(n: int) -> None:
        obj = agent.request("GET", configmaps_path(ns, policy))
        obj["metadata"].setdefault("annotations", {})["example.com/probe"] = str(n)
        agent.request("PUT", configmaps_path(ns, policy), body=obj)

    wait_until_refused(node_probe, "not: example.com/probe")
    wait_until_refused(lease_probe, "only Leases named")
    wait_until_refused(daemonset_probe, "only the lock annotation")
    wait_until_refused(configmap_probe, "not: example.com/probe")
    yield setup
    agent.close()
    unbound.close()


def wait_until_refused(call: Callable[[int], Any], fragment: str) -> None:
    """Call ``call(n)`` with n = 0, 1, … until an admission policy refuses it with ``fragment``."""
    probes = iter(range(1_000_000))

    def refused_now() -> bool:
        try:
            call(next(probes))
        except errors.ForbiddenError as exc:
            return fragment in str(exc)
        return False

    assert eventually(refused_now, timeout=90, every=0.5), f"no policy refused with {fragment!r}"


def node_annotations(k8s: TestEnv, node: str) -> dict[str, str]:
    found: dict[str, str] = k8s.kube().get_node(node)["metadata"].get("annotations", {})
    return found


def test_the_agent_writes_what_pykured_and_kured_write_on_its_own_node(k8s: TestEnv, setup: Setup) -> None:
    agent, mine = setup.agent, setup.mine
    # cordon and uncordon (the drain), as pykured and kured patch it
    assert agent.patch_node(mine, {"spec": {"unschedulable": True}})["spec"]["unschedulable"] is True
    assert not agent.patch_node(mine, {"spec": {"unschedulable": None}})["spec"].get("unschedulable")
    # the cycle's annotations, kured's and pykured's, set and removed
    set_ = {
        "weave.works/kured-reboot-in-progress": "2026-12-02T10:00:00Z",
        "weave.works/kured-most-recent-reboot-needed": "2026-12-02T10:00:00Z",
        "pykured.dev/status": "{}",
        "pykured.dev/reboot-boot-id": "b1",
    }
    agent.patch_node(mine, {"metadata": {"annotations": set_}}, patch_type=MERGE_PATCH)
    assert set_.items() <= node_annotations(k8s, mine).items()
    path = "/metadata/annotations/weave.works~1kured-reboot-in-progress"
    agent.patch_node(mine, [{"op": "remove", "path": path}], patch_type=JSON_PATCH)
    assert "weave.works/kured-reboot-in-progress" not in node_annotations(k8s, mine)
    # --silence-during-reboot's record, set when the lock is taken, marked when an expiry fails and removed
    # when the silence expires (the last two only if it is still the value read: a JSON patch's test)
    record = '{"id":"6f9b4e2a-0b1c-4d5e-8f90-123456789abc","until":"2026-12-02T12:00:00Z"}'
    marked = record[:-1] + ',"expireDue":"2026-12-02T11:00:00Z"}'
    silence = {"pykured.dev/silence": record}
    agent.patch_node(mine, {"metadata": {"annotations": silence}}, patch_type=MERGE_PATCH)
    assert silence.items() <= node_annotations(k8s, mine).items()
    agent.patch_node(mine, record_patch(record, marked), patch_type=JSON_PATCH)
    assert node_annotations(k8s, mine)["pykured.dev/silence"] == marked
    agent.patch_node(mine, record_patch(marked, None), patch_type=JSON_PATCH)
    assert "pykured.dev/silence" not in node_annotations(k8s, mine)
    # the hook label (pykured.dev/*) and the PreferNoSchedule taint (kured's example key)
    agent.patch_node(mine, {"metadata": {"labels": {"pykured.dev/before-reboot": "true"}}})
    taint = {"key": "weave.works/kured-node-reboot", "effect": "PreferNoSchedule"}
    agent.patch_node(mine, [{"op": "add", "path": "/spec/taints", "value": [taint]}], patch_type=JSON_PATCH)
    agent.patch_node(mine, [{"op": "remove", "path": "/spec/taints/0"}], patch_type=JSON_PATCH)
    # a lock slot of its own, and its entry in the annotation lock on the DaemonSet (as kured writes it)
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": f"{setup.lease_prefix}-0"},
        "spec": {"holderIdentity": mine},
    }
    agent.create_lease(setup.ns, lease)
    ds = agent.get_daemonset(setup.ns, setup.ds)
    entry = encode_entry(LockEntry(mine, False, parse_go_time("2026-12-02T10:00:00.5Z")[0]))
    ds["metadata"].setdefault("annotations", {})["weave.works/kured-node-lock"] = entry
    agent.replace_daemonset(setup.ns, setup.ds, ds)
    if setup.configured:  # the chart's values name the operator's label, taint and hook
        agent.patch_node(mine, {"metadata": {"labels": {"example.com/rebooting": "true"}}})
        pending = {"key": "example.com/reboot-pending", "effect": "PreferNoSchedule"}
        taints = k8s.kube().get_node(mine)["spec"].get("taints", [])
        agent.patch_node(
            mine, [{"op": "add", "path": "/spec/taints", "value": [*taints, pending]}], patch_type=JSON_PATCH
        )
        k8s.kube().patch_node(mine, {"metadata": {"annotations": {"example.com/before-ok": "true"}}})
        # the hook's answer is cleared when the hooks are asked (pykured.gates.hooks), never set by the agent
        hook = {"metadata": {"annotations": {"example.com/before-ok": None}}}
        agent.patch_node(mine, hook, patch_type=MERGE_PATCH)
        assert "example.com/before-ok" not in node_annotations(k8s, mine)
        assert k8s.kube().get_node(mine)["metadata"]["labels"]["example.com/rebooting"] == "true"


def test_forged_writes_are_refused_with_the_reason(k8s: TestEnv, setup: Setup) -> None:
    agent, mine, other = setup.agent, setup.mine, setup.other
    # another node: cordon it, or put cycle state on it
    refused(
        lambda: agent.patch_node(other, {"spec": {"unschedulable": True}}), f"on node {mine}", f"Node {other}"
    )
    refused(
        lambda: agent.patch_node(other, {"metadata": {"annotations": {"pykured.dev/reboot-boot-id": "x"}}}),
        f"may not write Node {other}",
    )
    refused(  # another node's silence record (only the central FleetLock server writes it for a node)
        lambda: agent.patch_node(other, {"metadata": {"annotations": {"pykured.dev/silence": "{}"}}}),
        f"may not write Node {other}",
    )
    refused(  # no exception for a halt's mark: a halt writes only the policy ConfigMap
        lambda: agent.patch_node(other, {"metadata": {"annotations": {"pykured.dev/halted-for": "x"}}}),
        f"may not write Node {other}",
        "only its own Node",
    )
    assert not k8s.kube().get_node(other)["spec"].get("unschedulable")
    # a token bound to no pod names no node
    refused(lambda: setup.unbound.patch_node(mine, {"spec": {"unschedulable": True}}), "pod-bound")
    # other fields of its own node
    refused(
        lambda: agent.patch_node(mine, {"metadata": {"annotations": {"example.com/approved": "true"}}}),
        "not: example.com/approved",
    )
    refused(
        lambda: agent.patch_node(
            mine, {"metadata": {"labels": {"node-role.kubernetes.io/control-plane": ""}}}
        ),
        "not: node-role.kubernetes.io/control-plane",
    )
    foreign = {"key": "example.com/evict", "effect": "NoExecute"}
    refused(
        lambda: agent.patch_node(
            mine, [{"op": "add", "path": "/spec/taints", "value": [foreign]}], patch_type=JSON_PATCH
        ),
        "only its PreferNoSchedule taint",
    )
    managed = {"key": "weave.works/kured-node-reboot", "effect": "NoExecute"}
    refused(
        lambda: agent.patch_node(
            mine, [{"op": "add", "path": "/spec/taints", "value": [managed]}], patch_type=JSON_PATCH
        ),
        "only its PreferNoSchedule taint",
    )
    refused(lambda: agent.patch_node(mine, {"spec": {"providerID": "aws:///x"}}), "only spec.unschedulable")
    approve = {"metadata": {"annotations": {"example.com/before-ok": "true"}}}
    refused(lambda: agent.patch_node(mine, approve, patch_type=MERGE_PATCH), "not: example.com/before-ok")
    assert "example.com/approved" not in node_annotations(k8s, mine)
    # a Lease outside the prefix (in kube-system: the leader elections)
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "kube-scheduler"}}
    refused(lambda: agent.create_lease(setup.ns, lease), "only Leases named", "not kube-scheduler")
    # the DaemonSet: its pod template, or another annotation
    ds = agent.get_daemonset(setup.ns, setup.ds)
    before = ds["spec"]["template"]["spec"]["containers"][0]["image"]
    changed = copy.deepcopy(ds)
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "registry.invalid/evil:1"
    refused(
        lambda: agent.replace_daemonset(setup.ns, setup.ds, changed),
        "only the lock annotation",
        "not its spec",
    )
    other_annotation = copy.deepcopy(ds)
    other_annotation["metadata"].setdefault("annotations", {})["example.com/x"] = "y"
    refused(lambda: agent.replace_daemonset(setup.ns, setup.ds, other_annotation), "only the lock annotation")
    image = k8s.kube().get_daemonset(setup.ns, setup.ds)["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == before != "registry.invalid/evil:1"


CLUSTER_AUTOSCALER = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
KARPENTER = "karpenter.sh/do-not-disrupt"


def test_the_agent_adds_and_removes_the_autoscaler_annotations_on_its_own_node_only(
    k8s: TestEnv, setup: Setup
) -> None:
    """The autoscalers' annotations (``--cluster-autoscaler-annotation``, ``--karpenter-annotation``): the
    agent adds each as ``"true"`` where its own Node has none, with its record, and removes it while
    ``"true"``; it may not write them on another node, with another value, over an operator's own value, nor
    write any other autoscaler's annotation."""
    agent, mine, other = setup.agent, setup.mine, setup.other
    record = "pykured.dev/autoscaler-annotations"
    marks = {CLUSTER_AUTOSCALER: "true", KARPENTER: "true", record: f"{CLUSTER_AUTOSCALER},{KARPENTER}"}
    # the cycle's begin and end, as one merge patch each (pykured.cycle.steps)
    agent.patch_node(mine, {"metadata": {"annotations": marks}}, patch_type=MERGE_PATCH)
    assert marks.items() <= node_annotations(k8s, mine).items()
    unmarks = {"metadata": {"annotations": dict.fromkeys(marks)}}
    agent.patch_node(mine, unmarks, patch_type=MERGE_PATCH)
    assert not set(marks) & set(node_annotations(k8s, mine))
    # another node: refused by the own-node rule
    for key in (CLUSTER_AUTOSCALER, KARPENTER):
        write = {"metadata": {"annotations": {key: "true"}}}
        refused(partial(agent.patch_node, other, write, patch_type=MERGE_PATCH), f"Node {other}")
    k8s.kube().patch_node(other, {"metadata": {"annotations": {KARPENTER: "true"}}})  # an operator's
    refused(
        lambda: agent.patch_node(
            other, {"metadata": {"annotations": {KARPENTER: None}}}, patch_type=MERGE_PATCH
        ),
        f"may not write Node {other}",
    )
    assert node_annotations(k8s, other)[KARPENTER] == "true"
    # another value than "true"
    refused(
        lambda: agent.patch_node(
            mine, {"metadata": {"annotations": {CLUSTER_AUTOSCALER: "false"}}}, patch_type=MERGE_PATCH
        ),
        f"not: {CLUSTER_AUTOSCALER}",
    )
    # an operator's own value: not overwritten, not removed
    k8s.kube().patch_node(mine, {"metadata": {"annotations": {CLUSTER_AUTOSCALER: "false"}}})
    refused(
        lambda: agent.patch_node(
            mine, {"metadata": {"annotations": {CLUSTER_AUTOSCALER: "true"}}}, patch_type=MERGE_PATCH
        ),
        f"not: {CLUSTER_AUTOSCALER}",
    )
    refused(
        lambda: agent.patch_node(
            mine, {"metadata": {"annotations": {CLUSTER_AUTOSCALER: None}}}, patch_type=MERGE_PATCH
        ),
        f"not: {CLUSTER_AUTOSCALER}",
    )
    assert node_annotations(k8s, mine)[CLUSTER_AUTOSCALER] == "false"
    # any other annotation of the autoscalers: refused
    for key in ("cluster-autoscaler.kubernetes.io/safe-to-evict", "karpenter.sh/do-not-evict"):
        write = {"metadata": {"annotations": {key: "true"}}}
        refused(partial(agent.patch_node, mine, write, patch_type=MERGE_PATCH), f"not: {key}")
        assert key not in node_annotations(k8s, mine)


def policy_map(k8s: TestEnv, setup: Setup) -> dict[str, Any]:
    found: dict[str, Any] = k8s.kube().request("GET", configmaps_path(setup.ns, setup.policy))
    return found


def rewrite(kube: Kube, setup: Setup, change: Callable[[dict[str, Any]], None]) -> Any:
    """Read the policy ConfigMap with ``kube``, ``change`` it, write it back whole (PUT, as the agents do)."""
    path = configmaps_path(setup.ns, setup.policy)
    obj = kube.request("GET", path)
    obj.setdefault("data", {})
    change(obj)
    return kube.request("PUT", path, body=obj)


def set_key(key: str, value: str) -> Callable[[dict[str, Any]], None]:
    return lambda obj: obj["data"].__setitem__(key, value)


def drop_key(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda obj: obj["data"].pop(key)


def test_the_policy_configmap_takes_only_a_halt_from_an_agent(k8s: TestEnv, setup: Setup) -> None:
    """An agent may stop the fleet, never lift a stop or change what an operator wrote: it adds the ``halt``
    key where there is none and changes the failed-drain count; it cannot change or remove the freeze, the
    blackouts, a halt (its own either), ``halts-lifted``, labels or other annotations, nor create, delete or
    write another namespace's ConfigMap (each granted by RBAC here, so the refusal is the policy's). The
    operator's ``pykured unfreeze`` lifts the halt and remembers it."""
    agent, admin, ns = setup.agent, k8s.kube(), setup.ns
    now = datetime.datetime.now(datetime.UTC)
    operator = freeze(admin, namespace=ns, name=setup.policy, reason="INC-1", until=None, now=now)
    blackouts = "2026-12-23T16:00/2027-01-02T10:00 year end\n"
    rewrite(admin, setup, set_key("blackouts", blackouts))
    say = "may only add the halt to the policy ConfigMap"
    refused(lambda: rewrite(agent, setup, drop_key("freeze")), say, "not change: freeze")
    refused(lambda: rewrite(agent, setup, set_key("freeze", "")), "not change: freeze")
    refused(lambda: rewrite(agent, setup, set_key("blackouts", "")), "not change: blackouts")
    refused(lambda: rewrite(agent, setup, set_key("halts-lifted", "[]")), "not change: halts-lifted")
    refused(lambda: rewrite(setup.unbound, setup, drop_key("freeze")), "not change: freeze")

    def label(obj: dict[str, Any]) -> None:
        obj["metadata"].setdefault("labels", {})["example.com/x"] = "y"

    refused(lambda: rewrite(agent, setup, label), "not its binaryData, labels")
    halt = FreezeRecord(reason="node x did not come back within 1h0m0s", by=f"pykured on {setup.mine}",
                        at=now, halted=setup.other, began="2026-12-03T01:00:00Z")  # fmt: skip
    refused(lambda: rewrite(agent, setup, set_key("halt", "x" * 5000)), "a halt of 1 to 4096 characters")
    refused(lambda: rewrite(agent, setup, set_key("halt", "")), "a halt of 1 to 4096 characters")
    # the one write: the halt added where there is none (and the count, the other key of the streak)
    rewrite(agent, setup, set_key("halt", halt.to_json()))

    def count(obj: dict[str, Any]) -> None:
        obj["metadata"].setdefault("annotations", {})["pykured.dev/failed-drains"] = '{"count":1,"last":""}'

    rewrite(agent, setup, count)
    data = policy_map(k8s, setup)["data"]
    assert data == {"freeze": operator.to_json(), "blackouts": blackouts, "halt": halt.to_json()}
    # a halt stays the halt it is: not replaced, not removed, by any agent
    refused(lambda: rewrite(agent, setup, set_key("halt", "{}")), say, "not change: halt")
    refused(lambda: rewrite(agent, setup, drop_key("halt")), "not change: halt")
    # no create, no delete, no other namespace: granted by RBAC here, refused by the policy
    elsewhere = k8s.new_namespace("vapcm")
    k8s.kube().create(configmaps_path(elsewhere), {"apiVersion": "v1", "kind": "ConfigMap",
                                                   "metadata": {"name": setup.policy}})  # fmt: skip
    everything = [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "delete", "get", "update"]}
    ]
    grant(k8s, ns, setup.account, "cm-all", everything)
    grant(k8s, ns, setup.account, "cm-all", everything, where=elsewhere)
    fresh = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "forged"}, "data": {"halt": "x"}}

    def create() -> None:
        agent.request("POST", configmaps_path(ns), body=fresh)

    assert eventually(lambda: _refused_by_policy(create), timeout=60, every=0.5)  # the RoleBinding in effect
    refused(create, "may not create ConfigMap")
    refused(lambda: agent.request("DELETE", configmaps_path(ns, setup.policy)), "may not delete ConfigMap")
    other = dataclasses.replace(setup, ns=elsewhere)

    def readable() -> bool:  # that RoleBinding in effect too
        try:
            agent.request("GET", configmaps_path(elsewhere, setup.policy))
        except errors.ForbiddenError:
            return False
        return True

    assert eventually(readable, timeout=60, every=0.5)
    refused(
        lambda: rewrite(agent, other, set_key("halt", "x")), "only the policy ConfigMap of its own namespace"
    )
    assert "halt" not in (policy_map(k8s, other).get("data") or {})
    # the operator lifts the halt and the freeze: the halted reboot is remembered, and only operators write it
    lifted = unfreeze(admin, namespace=ns, name=setup.policy)
    assert lifted is not None and lifted.to_json() == halt.to_json()
    data = policy_map(k8s, setup)["data"]
    remembered = f'[{{"node":"{setup.other}","began":"2026-12-03T01:00:00Z"}}]'
    assert data == {"blackouts": blackouts, "halts-lifted": remembered}
    refused(lambda: rewrite(agent, setup, set_key("halts-lifted", "[]")), "not change: halts-lifted")
    rewrite(agent, setup, set_key("halt", halt.to_json()))  # the fleet can be halted again


def _refused_by_policy(call: Callable[[], Any]) -> bool:
    """``call`` is refused by an admission policy (not by RBAC)."""
    try:
        call()
    except errors.ForbiddenError as exc:
        return "ValidatingAdmissionPolicy" in str(exc)
    return False


def _chart_pods(k8s: TestEnv, ns: str, tmp_path: Path, release: str, pykured: dict[str, Any]) -> str:
    ref = dataclasses.replace(reference(("helm",)), chart=CHART)
    values = {"configuration": {"drainTimeout": "15m"}, "pykured": pykured}
    _text, objects = helm_template(ref, release=release, namespace=ns, values=values, workdir=tmp_path / "h")
    apply_docs(k8s, unique_names(objects, ns), {o["kind"] for o in objects})
    return str(next(o["metadata"]["name"] for o in objects if o["kind"] == "DaemonSet"))


def _kustomize_pods(k8s: TestEnv, ns: str, tmp_path: Path, profile: str, suffix: str) -> str:
    install(k8s, profile, ns, tmp_path, name_suffix=suffix)
    k8s.create_daemonset(ns, f"kured{suffix}")
    return f"kured{suffix}"


POD_DELETERS = {
    "kured-compat": lambda k8s, ns, tmp: _kustomize_pods(k8s, ns, tmp, "kustomize/overlays/kured-compat", ""),
    "drain-escalation-renamed": lambda k8s, ns, tmp: _kustomize_pods(
        k8s, ns, tmp, "kustomize/overlays/drain-escalation", "-x"
    ),
    "chart-kured-rules": lambda k8s, ns, tmp: _chart_pods(
        k8s, ns, tmp, "kured", {"rbac": {"kuredRules": True}}
    ),
    "chart-drain-escalation": lambda k8s, ns, tmp: _chart_pods(
        k8s, ns, tmp, "ops", {"lockBackend": "lease", "drainEscalation": ["delete", "quarantine"]}
    ),
}


@pytest.mark.parametrize("profile", list(POD_DELETERS))
def test_an_agent_deletes_only_pods_on_its_own_node(k8s: TestEnv, tmp_path: Path, profile: str) -> None:
    """The profiles that grant ``delete`` on pods (kured's RBAC, --drain-escalation=delete): the agent's
    token deletes a pod on its own node, and no other: not one on another node, not one that is not
    scheduled, none with a token bound to no pod; a cluster admin is not held to it. Evictions are not
    narrowed (an Eviction does not name the pod's node; SECURITY.md): one of another node's pods is
    evicted."""
    ns = k8s.new_namespace("vappods")
    ds = POD_DELETERS[profile](k8s, ns, tmp_path)
    mine, other = k8s.add_nodes(k8s.unique("vap-mine"), k8s.unique("vap-other"))
    apps = k8s.new_namespace("apps")
    for name, node in (("here", mine), ("there", other), ("elsewhere", other), ("nowhere", None)):
        k8s.create_pod(apps, name, node=node)
    agent = Kube.from_kubeconfig(
        token_kubeconfig(k8s, tmp_path / "agent.json", pod_bound_token(k8s, ns, ds, mine, ds=ds))
    )
    unbound = Kube.from_kubeconfig(
        token_kubeconfig(k8s, tmp_path / "unbound.json", k8s.sa_token(ns, ds, create=False))
    )

    def probe(n: int) -> None:  # a pod of its own each time: one admitted before the policy is gone
        k8s.create_pod(apps, f"probe-{n}", node=other)
        agent.delete_pod(apps, f"probe-{n}")

    wait_until_refused(probe, "may delete only pods on its own node")
    text = refused(lambda: agent.delete_pod(apps, "there"), f"pykured agent on node {mine}")
    assert f"may delete only pods on its own node, not {apps}/there on node {other}" in text, text
    refused(lambda: agent.delete_pod(apps, "nowhere"), f"not {apps}/nowhere (not scheduled)")
    refused(
        lambda: unbound.delete_pod(apps, "here"), "only a pod-bound ServiceAccount token may delete a pod"
    )
    deleted = agent.delete_pod(apps, "here")  # its own node's pod: admitted
    assert deleted["metadata"]["name"] == "here"
    here = k8s.kube().list_pods(namespace=apps, field_selector="metadata.name=here")["items"]
    assert not here or here[0]["metadata"].get("deletionTimestamp")
    there = k8s.kube().get_pod(apps, "there")
    assert not there["metadata"].get("deletionTimestamp")
    k8s.kube().delete_pod(apps, "there")  # a cluster admin is not an agent
    agent.evict_pod(apps, "elsewhere")  # evictions are not narrowed to the own node (SECURITY.md)
    agent.close()
    unbound.close()


def test_the_central_fleetlock_server_writes_any_node_s_fields_and_only_adds_a_halt(
    k8s: TestEnv, tmp_path: Path
) -> None:
    """The central FleetLock server (its own ServiceAccount and marker, overlays/fleetlock-central moved
    into a namespace of its own): it writes pykured's fields on any Node, and nothing else there; on the
    policy ConfigMap it only adds the halt, as an agent. The agents' token of the same install still writes
    only its own Node."""
    ns = k8s.new_namespace("vapcentral")
    install(k8s, "kustomize/overlays/fleetlock-central", ns, tmp_path)
    k8s.create_daemonset(ns, "kured")
    infra, zincati, mine = k8s.add_nodes(k8s.unique("infra"), k8s.unique("fcos"), k8s.unique("vap-mine"))
    token = pod_bound_token(k8s, ns, "pykured-fleetlock", infra, ds=None)
    central = Kube.from_kubeconfig(token_kubeconfig(k8s, tmp_path / "central.json", token))
    agent = Kube.from_kubeconfig(
        token_kubeconfig(k8s, tmp_path / "agent.json", pod_bound_token(k8s, ns, "kured", mine, ds="kured"))
    )
    setup = Setup(ns, "pykured-fleetlock", "kured", "kured-lock", "kured-policy", central, central, infra,
                  zincati, configured=False)  # fmt: skip

    def probe(n: int) -> None:
        central.patch_node(zincati, {"metadata": {"annotations": {"example.com/probe": str(n)}}})

    wait_until_refused(probe, "not: example.com/probe")
    central.patch_node(zincati, {"spec": {"unschedulable": True}})  # any node: its cordon, its annotations
    central.patch_node(zincati, {"metadata": {"annotations": {"pykured.dev/reboot-boot-id": "b"}}})
    assert k8s.kube().get_node(zincati)["spec"]["unschedulable"] is True
    refused(
        lambda: central.patch_node(zincati, {"metadata": {"labels": {"x.example/y": "z"}}}), "x.example/y"
    )
    refused(
        lambda: agent.patch_node(zincati, {"spec": {"unschedulable": None}}), f"may not write Node {zincati}"
    )
    # the policy ConfigMap: an operator's freeze stays; the halt is added, once
    now = datetime.datetime.now(datetime.UTC)
    freeze(k8s.kube(), namespace=ns, name="kured-policy", reason="INC-2", until=None, now=now)
    refused(lambda: rewrite(central, setup, drop_key("freeze")), "not change: freeze")
    halt = FreezeRecord(reason="r", by="pykured on the FleetLock server", at=now, halted=zincati, began="b")
    rewrite(central, setup, set_key("halt", halt.to_json()))
    refused(lambda: rewrite(central, setup, drop_key("halt")), "not change: halt")
    refused(lambda: rewrite(agent, setup, drop_key("halt")), "not change: halt")
    assert policy_map(k8s, setup)["data"]["halt"] == halt.to_json()
    central.close()
    agent.close()


def test_a_cluster_admin_service_account_is_not_held_to_the_agents_rules(
    k8s: TestEnv, tmp_path: Path
) -> None:
    """A ServiceAccount that may do anything (cluster-admin: its wildcard holds the agents' marker too) is
    not an agent to the policies: the check of the verb no role grants (``never``) tells it apart. The same
    namespace, the same narrowing condition: the shipped condition alone keeps it out."""
    ns = k8s.new_namespace("vapadmin")
    install(k8s, "kustomize/base", ns, tmp_path)
    k8s.create_daemonset(ns, "kured")
    mine, other = k8s.add_nodes(k8s.unique("vap-mine"), k8s.unique("vap-other"))
    agent = Kube.from_kubeconfig(
        token_kubeconfig(k8s, tmp_path / "agent.json", pod_bound_token(k8s, ns, "kured", mine, ds="kured"))
    )
    k8s.ensure(f"/api/v1/namespaces/{ns}/serviceaccounts",
               {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "ops"}})  # fmt: skip
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": f"ops-admin-{ns}"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": "ops", "namespace": ns}],
    }
    k8s.kube().create("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding)
    ops = Kube.from_kubeconfig(
        token_kubeconfig(k8s, tmp_path / "ops.json", pod_bound_token(k8s, ns, "ops", other, ds=None))
    )

    def probe(n: int) -> None:
        agent.patch_node(other, {"metadata": {"labels": {"pykured.dev/probe": str(n)}}})

    wait_until_refused(probe, f"may not write Node {other}")
    foreign = {"metadata": {"labels": {"example.com/role": "db"}}}

    def admitted() -> bool:  # the ClusterRoleBinding in effect
        try:
            ops.patch_node(mine, foreign)
        except errors.ForbiddenError:
            return False
        return True

    assert eventually(admitted, timeout=60, every=0.5)
    assert k8s.kube().get_node(mine)["metadata"]["labels"]["example.com/role"] == "db"
    policy = ops.request("GET", configmaps_path(ns, "kured-policy"))
    ops.request("PUT", configmaps_path(ns, "kured-policy"), body={**policy, "data": {"freeze": "x"}})
    ops.close()
    agent.close()


TWO = pytest.mark.parametrize("setup", ["kustomize", "chart-renamed"], indirect=True)
"""The requesters' policy is the same for every install (it matches their marker): two installs show it."""


@TWO
def test_a_reboot_requester_writes_only_the_request(k8s: TestEnv, setup: Setup) -> None:
    rules = next(
        d for d in yaml.safe_load_all((ROOT / "kustomize/requester/clusterrole.yaml").read_text()) if d
    )["rules"]
    user = k8s.user_with_cluster_role("requester", rules)
    requester = Kube.from_kubeconfig(k8s.kubeconfig_for(user))
    node = setup.other
    mine = json.dumps({"bootID": "b", "requestedBy": user}, separators=(",", ":"))
    request = {"pykured.dev/reboot-request": mine}

    def may_request() -> bool:  # the ClusterRoleBinding and the policy's authorizer check in effect
        try:
            requester.patch_node(node, {"metadata": {"annotations": request}}, patch_type=MERGE_PATCH)
        except errors.ForbiddenError:
            return False
        return True

    assert eventually(may_request, timeout=90, every=0.5)

    def foreign(n: int) -> None:
        requester.patch_node(node, {"metadata": {"annotations": {"example.com/rprobe": str(n)}}})

    wait_until_refused(foreign, "not: example.com/rprobe")
    assert node_annotations(k8s, node)["pykured.dev/reboot-request"] == mine
    # a request in someone else's name, or naming its requester twice (a decoder keeps the last), or none
    for value in (
        '{"bootID":"b","requestedBy":"alice"}',
        json.dumps({"bootID": "b", "requestedBy": user})[:-1] + ',"requestedBy":"alice"}',
        '{"bootID":"b","reason":"\\"requestedBy\\":\\"' + user + '\\""}',
        '{"bootID":"b"}',
    ):
        forged: dict[str, Any] = {"metadata": {"annotations": {"pykured.dev/reboot-request": value}}}
        refused(
            lambda body=forged: requester.patch_node(node, body, patch_type=MERGE_PATCH),  # type: ignore[misc]
            f"requestedBy must be {user}",
        )
    assert node_annotations(k8s, node)["pykured.dev/reboot-request"] == mine
    cancel = {"metadata": {"annotations": {"pykured.dev/reboot-request": None}}}
    requester.patch_node(node, cancel, patch_type=MERGE_PATCH)
    assert "pykured.dev/reboot-request" not in node_annotations(k8s, node)
    # what `pykured request-reboot` writes passes: it names the requester the API server knows
    views = fleet_requester.nodes(requester, names=[node])
    who = fleet_requester.whoami(requester)
    done = fleet_requester.request_reboot(requester, views, reason="kernel", requested_by=who, now=NOW)
    assert [o.action for o in done] == ["requested"] and who == user
    requester.patch_node(node, cancel, patch_type=MERGE_PATCH)
    # cordon, forged cycle state, an approved reboot hook, a label: refused, each with why
    refused(lambda: requester.patch_node(node, {"spec": {"unschedulable": True}}), "not its spec (cordon")
    forged = {"metadata": {"annotations": {"pykured.dev/reboot-boot-id": "x"}}}
    refused(
        lambda: requester.patch_node(node, forged, patch_type=MERGE_PATCH),
        "only the pykured.dev/reboot-request annotation",
        "not: pykured.dev/reboot-boot-id",
    )
    hook = {"metadata": {"annotations": {"example.com/before-ok": "true"}}}
    refused(lambda: requester.patch_node(node, hook, patch_type=MERGE_PATCH), "not: example.com/before-ok")
    refused(
        lambda: requester.patch_node(node, {"metadata": {"labels": {"x.example/y": "z"}}}), "reboot-request"
    )
    after = k8s.kube().get_node(node)
    assert not after["spec"].get("unschedulable")
    assert "pykured.dev/reboot-boot-id" not in after["metadata"].get("annotations", {})
    requester.close()


@TWO
def test_the_quarantine_is_the_agents_on_its_own_node_and_unquarantine_may_end_it(
    k8s: TestEnv, setup: Setup
) -> None:
    """The agent writes ``pykured.dev/quarantined`` on its own Node only; a reboot requester may never write
    one, may remove it (``pykured unquarantine``) and, in the same write, undo the cordon it names: not a
    cordon the record does not name, and no other spec change."""
    agent, mine, other = setup.agent, setup.mine, setup.other
    ours = QuarantineRecord.make(reason="drain timed out", at=NOW, pods=["ns/a"], cordoned=True).to_json()
    mark = {"metadata": {"annotations": {QUARANTINED_ANNOTATION: ours}}}
    agent.patch_node(mine, {"spec": {"unschedulable": True}})
    agent.patch_node(mine, mark, patch_type=MERGE_PATCH)
    refused(lambda: agent.patch_node(other, mark, patch_type=MERGE_PATCH), f"may not write Node {other}")
    rules = next(
        d for d in yaml.safe_load_all((ROOT / "kustomize/requester/clusterrole.yaml").read_text()) if d
    )["rules"]
    user = k8s.user_with_cluster_role("unquarantiner", rules)
    requester = Kube.from_kubeconfig(k8s.kubeconfig_for(user))
    request = json.dumps({"bootID": "x", "requestedBy": user}, separators=(",", ":"))

    def may_request() -> bool:  # the ClusterRoleBinding and the policy's authorizer check in effect
        try:
            requester.patch_node(
                other, {"metadata": {"annotations": {"pykured.dev/reboot-request": request}}}
            )
        except errors.ForbiddenError:
            return False
        return True

    assert eventually(may_request, timeout=90, every=0.5)
    refused(
        lambda: requester.patch_node(other, mark, patch_type=MERGE_PATCH), f"not: {QUARANTINED_ANNOTATION}"
    )
    # an admin's cordon under a record that says pykured did not cordon: the record goes, the cordon stays
    theirs = QuarantineRecord.make(reason="drain timed out", at=NOW, pods=[], cordoned=False).to_json()
    k8s.kube().patch_node(other, {"spec": {"unschedulable": True},
                                  "metadata": {"annotations": {QUARANTINED_ANNOTATION: theirs}}})  # fmt: skip
    both = {"spec": {"unschedulable": None}, "metadata": {"annotations": {QUARANTINED_ANNOTATION: None}}}
    refused(lambda: requester.patch_node(other, both, patch_type=MERGE_PATCH), "not its spec (cordon")
    done = unquarantine(requester, other)
    assert done.left_cordoned and not done.uncordoned
    after = k8s.kube().get_node(other)
    assert after["spec"]["unschedulable"] is True
    assert QUARANTINED_ANNOTATION not in after["metadata"].get("annotations", {})
    # pykured's cordon, named by the record: the requester's one write ends both
    uncordon_only = {"spec": {"unschedulable": None}}
    refused(lambda: requester.patch_node(mine, uncordon_only, patch_type=MERGE_PATCH), "not its spec (cordon")
    done = unquarantine(requester, mine)
    assert done.uncordoned
    after = k8s.kube().get_node(mine)
    assert not after["spec"].get("unschedulable")
    assert QUARANTINED_ANNOTATION not in after["metadata"].get("annotations", {})
    requester.close()


@pytest.fixture
def fleets() -> Iterator[list[Fleet]]:
    made: list[Fleet] = []
    yield made
    for fleet in made:
        fleet.close()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("profile", ["kustomize/base", "kustomize/overlays/kured-compat"])
def test_full_cycle_under_the_policies_with_pod_bound_tokens(
    k8s: TestEnv, tmp_path: Path, fleets: list[Fleet], profile: str
) -> None:
    ns = k8s.new_namespace("vapcycle")
    docs = install(k8s, profile, ns, tmp_path)
    daemonset = next(d for d in docs if d["kind"] == "DaemonSet")
    k8s.create_daemonset(ns, daemonset["metadata"]["name"])
    args = [a for a in daemonset["spec"]["template"]["spec"]["containers"][0]["args"]
            if not a.startswith(SIMULATION_OWNED)]  # fmt: skip
    node, other = k8s.add_nodes(k8s.unique("vapcycle"), k8s.unique("vapcycle"))
    k8s.create_pod(k8s.new_namespace(), "app", node=node)
    kubeconfigs = {
        n: token_kubeconfig(k8s, tmp_path / f"{n}.json", pod_bound_token(k8s, ns, "kured", n, ds="kured"))
        for n in (node, other)
    }
    probe = Kube.from_kubeconfig(kubeconfigs[node])

    def active() -> bool:
        try:
            probe.patch_node(other, {"spec": {"unschedulable": True}})
        except errors.ForbiddenError as exc:
            return "may not write Node" in str(exc)
        return False

    assert eventually(active, timeout=90, every=0.5), "the policies never took effect"
    k8s.kube().patch_node(other, {"spec": {"unschedulable": None}})
    probe.close()
    fleet = Fleet(
        k8s,
        workdir=tmp_path / "fleet",
        kubeconfig=lambda n: kubeconfigs[n],
        args=[*args, f"--ds-namespace={ns}", "--period=10s", "--annotate-nodes=true",
              "--prefer-no-schedule-taint=weave.works/kured-node-reboot"],
    )  # fmt: skip
    fleets.append(fleet)
    fleet.__enter__()
    for n in (node, other):
        fleet.add(n)
        fleet.touch(n)

    def done() -> bool:
        return all(fleet.slots[n].reboots == 1 for n in (node, other)) and not any(
            k8s.kube().get_node(n)["spec"].get("unschedulable") for n in (node, other)
        )

    assert fleet.wait_for(done, timeout=150), fleet.log_text(node) + fleet.log_text(other)
    logs = fleet.log_text(node) + fleet.log_text(other)
    assert "ValidatingAdmissionPolicy" not in logs, logs
    if profile.endswith("kured-compat"):  # kured's RBAC reads no policy ConfigMap (test_rbac_profiles)
        logs = "\n".join(line for line in logs.splitlines() if "cannot be read (forbidden: " not in line)
    assert "forbidden" not in logs.lower(), logs


def test_the_own_node_rule_is_what_refuses_another_nodes_cordon(k8s: TestEnv, setup: Setup) -> None:
    """The proof broken once: with the node policy's own-node rule weakened to ``true`` (as a bad edit
    would), the forged cordon of another node is admitted (RBAC alone allows it); the rule restored, it is
    refused again. So the refusals above are the policy's, and a test of them turns red with it."""
    admin = k8s.kube()
    policies = [
        p
        for p in admin.get(VAP)["items"]
        if "-agent-nodes" in p["metadata"]["name"] and p["metadata"]["name"].endswith(setup.ns)
    ]
    (policy,) = policies
    path = f"{VAP}/{policy['metadata']['name']}"
    original = copy.deepcopy(policy["spec"]["validations"])
    assert "variables.boundNode == object.metadata.name" in original[0]["expression"]
    cordon = {"spec": {"unschedulable": True}}
    refused(lambda: setup.agent.patch_node(setup.other, cordon), f"may not write Node {setup.other}")

    def with_first_rule(expression: str) -> None:
        current = admin.get(path)
        current["spec"]["validations"] = [{**original[0], "expression": expression}, *original[1:]]
        admin.request("PUT", path, body=current)

    def admitted() -> bool:
        try:
            setup.agent.patch_node(setup.other, cordon)
        except errors.ForbiddenError:
            return False
        return True

    with_first_rule("true")
    try:
        assert eventually(admitted, timeout=90, every=0.5), "the weakened policy still refused"
        assert admin.get_node(setup.other)["spec"].get("unschedulable") is True
    finally:
        with_first_rule(original[0]["expression"])
        admin.patch_node(setup.other, {"spec": {"unschedulable": None}})
    wait_until_refused(
        lambda n: setup.agent.patch_node(
            setup.other, {"metadata": {"labels": {"pykured.dev/probe": str(n)}}}
        ),
        f"may not write Node {setup.other}",
    )
    assert not admin.get_node(setup.other)["spec"].get("unschedulable")
