"""The shipped admission policies on the real API server, as the ServiceAccounts themselves.

The agent's identity is a pod-bound ServiceAccount token (TokenRequest with ``boundObjectRef`` to a Pod
scheduled on a node), the kubelet's kind of token, so the user extra
``authentication.kubernetes.io/node-name`` the policies read is the API server's own. For the kustomize
base (relocated into a fresh namespace, the policies renamed) and the chart's render: every write pykured
and kured make passes, and every forged one (another node, another field, a foreign taint or Lease, the
DaemonSet's template, a token bound to no pod; a requester's cordon, forged cycle state, approved hook) is
refused with a message that says why. A full reboot cycle then runs under the policies with the profile's
RBAC only, each agent with a token bound to a pod on its node.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from pykured.core import errors
from pykured.fleet.quarantine import unquarantine
from pykured.kube.client import JSON_PATCH, MERGE_PATCH, Kube
from pykured.lock.record import LockEntry, encode_entry, parse_go_time
from pykured.policy.quarantine import QUARANTINED_ANNOTATION, QuarantineRecord
from pykured_dev.eventually import eventually
from pykured_dev.testenv.fleet import Fleet
from pykured_dev.testenv.reference import helm_template, reference
from tests.chart.test_pykured_chart import CHART
from tests.e2e.test_rbac_profiles import (
    SIMULATION_OWNED,
    VAP,
    apply_policies,
    apply_profile_rbac,
    pod_bound_token,
    render,
    token_kubeconfig,
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


def grant_daemonset_update(k8s: TestEnv, ns: str, account: str, ds: str) -> None:
    """The annotation lock's DaemonSet ``update`` (kured-compat's and the chart's default lock grant it)."""
    rule = {"apiGroups": ["apps"], "resources": ["daemonsets"], "resourceNames": [ds], "verbs": ["update"]}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "ds-lock"},
            "rules": [rule]}  # fmt: skip
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "ds-lock"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "ds-lock"},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": ns}],
    }
    k8s.kube().create(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles", role)
    k8s.kube().create(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings", binding)


def _kustomize(k8s: TestEnv, ns: str) -> tuple[str, str, str]:
    docs = render(k8s, "kustomize/base")
    apply_profile_rbac(k8s, docs, ns)
    apply_policies(k8s, docs, ns)
    k8s.create_daemonset(ns, "kured")
    return "kured", "kured", "kured-lock"


def _chart(k8s: TestEnv, ns: str, tmp_path: Path) -> tuple[str, str, str]:
    release = f"kured-{ns}"
    ref = dataclasses.replace(reference(("helm",)), chart=CHART)
    values = {
        "configuration": {
            "preferNoScheduleTaint": "example.com/reboot-pending",
            "preRebootNodeLabels": ["example.com/rebooting=true"],
            "postRebootNodeLabels": ["example.com/rebooting=false"],
        },
        "pykured": {
            "lockBackend": "lease",
            "requesterClusterRole": {"create": True},
            "hooks": {"beforeReboot": ["example.com/before-ok"]},
        },
    }
    text, _objects = helm_template(ref, release=release, namespace=ns, values=values, workdir=tmp_path / "h")
    k8s.kubectl("apply", "--server-side", "--field-manager=helm", "-f", "-", stdin=text)
    return release, release, f"{release}-lock"


@pytest.fixture(params=["kustomize", "chart"])
def setup(request: pytest.FixtureRequest, k8s: TestEnv, tmp_path: Path) -> Iterator[Setup]:
    ns = k8s.new_namespace("vap")
    if request.param == "kustomize":
        account, ds, prefix = _kustomize(k8s, ns)
    else:
        account, ds, prefix = _chart(k8s, ns, tmp_path)
    grant_daemonset_update(k8s, ns, account, ds)
    mine, other = k8s.add_nodes(k8s.unique("vap-mine"), k8s.unique("vap-other"))
    agent = Kube.from_kubeconfig(
        token_kubeconfig(k8s, tmp_path / "agent.json", pod_bound_token(k8s, ns, account, mine, ds=ds))
    )
    unbound = Kube.from_kubeconfig(
        token_kubeconfig(k8s, tmp_path / "unbound.json", k8s.sa_token(ns, account, create=False))
    )
    setup = Setup(ns, account, ds, prefix, agent, unbound, mine, other, request.param == "chart")

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

    wait_until_refused(node_probe, "not: example.com/probe")
    wait_until_refused(lease_probe, "only Leases named")
    wait_until_refused(daemonset_probe, "only the lock annotation")
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

    assert eventually(refused_now, timeout=30, every=0.5), f"no policy refused with {fragment!r}"


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
    # --silence-during-reboot's record, set when the lock is taken and removed when the silence expires
    silence = {
        "pykured.dev/silence": '{"id":"6f9b4e2a-0b1c-4d5e-8f90-123456789abc","until":"2026-12-02T12:00:00Z"}'
    }
    agent.patch_node(mine, {"metadata": {"annotations": silence}}, patch_type=MERGE_PATCH)
    assert silence.items() <= node_annotations(k8s, mine).items()
    agent.patch_node(
        mine, {"metadata": {"annotations": {"pykured.dev/silence": None}}}, patch_type=MERGE_PATCH
    )
    assert "pykured.dev/silence" not in node_annotations(k8s, mine)
    # the hook label (pykured.dev/*) and the PreferNoSchedule taint (kured's example key)
    agent.patch_node(mine, {"metadata": {"labels": {"pykured.dev/before-reboot": "true"}}})
    taint = {"key": "weave.works/kured-node-reboot", "effect": "PreferNoSchedule"}
    agent.patch_node(mine, [{"op": "add", "path": "/spec/taints", "value": [taint]}], patch_type=JSON_PATCH)
    agent.patch_node(mine, [{"op": "remove", "path": "/spec/taints/0"}], patch_type=JSON_PATCH)
    # the halt's mark on another node, the one exception to "only its own"
    agent.patch_node(
        setup.other, {"metadata": {"annotations": {"pykured.dev/halted-for": "x"}}}, patch_type=MERGE_PATCH
    )
    assert node_annotations(k8s, setup.other)["pykured.dev/halted-for"] == "x"
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


def test_a_reboot_requester_writes_only_the_request(k8s: TestEnv, setup: Setup) -> None:
    rules = next(
        d for d in yaml.safe_load_all((ROOT / "kustomize/requester/clusterrole.yaml").read_text()) if d
    )["rules"]
    requester = Kube.from_kubeconfig(k8s.kubeconfig_for(k8s.user_with_cluster_role("requester", rules)))
    node = setup.other
    request = {"pykured.dev/reboot-request": '{"bootID":"b"}'}

    def may_request() -> bool:  # the ClusterRoleBinding and the policy's authorizer check in effect
        try:
            requester.patch_node(node, {"metadata": {"annotations": request}}, patch_type=MERGE_PATCH)
        except errors.ForbiddenError:
            return False
        return True

    assert eventually(may_request, timeout=30, every=0.5)

    def foreign(n: int) -> None:
        requester.patch_node(node, {"metadata": {"annotations": {"example.com/rprobe": str(n)}}})

    wait_until_refused(foreign, "not: example.com/rprobe")
    assert node_annotations(k8s, node)["pykured.dev/reboot-request"] == '{"bootID":"b"}'
    cancel = {"metadata": {"annotations": {"pykured.dev/reboot-request": None}}}
    requester.patch_node(node, cancel, patch_type=MERGE_PATCH)
    assert "pykured.dev/reboot-request" not in node_annotations(k8s, node)
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
    requester = Kube.from_kubeconfig(k8s.kubeconfig_for(k8s.user_with_cluster_role("unquarantiner", rules)))

    def may_request() -> bool:  # the ClusterRoleBinding and the policy's authorizer check in effect
        try:
            requester.patch_node(other, {"metadata": {"annotations": {"pykured.dev/reboot-request": "x"}}})
        except errors.ForbiddenError:
            return False
        return True

    assert eventually(may_request, timeout=30, every=0.5)
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
    docs = render(k8s, profile)
    ns = k8s.new_namespace("vapcycle")
    apply_profile_rbac(k8s, docs, ns)
    apply_policies(k8s, docs, ns)
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

    assert eventually(active, timeout=30, every=0.5), "the policies never took effect"
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
        p for p in admin.get(VAP)["items"]
        if p["metadata"]["name"].endswith(("agent-nodes", f"agent-nodes-{setup.ns}"))
        and f"system:serviceaccount:{setup.ns}:" in json.dumps(p["spec"].get("matchConditions", []))
    ]  # fmt: skip
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
        assert eventually(admitted, timeout=30, every=0.5), "the weakened policy still refused"
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
