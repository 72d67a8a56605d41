"""The manifests' permissions are enough: a full reboot cycle as each profile's ServiceAccount.

For the base and each overlay, the rendered RBAC objects are applied to the test apiserver (moved into a
fresh namespace so profiles do not collide), and a real pykured agent runs one whole cycle — lock, cordon,
drain, reboot, uncordon, release — as ``system:serviceaccount:<ns>:kured`` with that RBAC only, using the
profile's own DaemonSet arguments (the simulation replaces the sentinel path and the reboot mechanics).
The FleetLock profiles run under their admission policies too, installed as a user moves a profile
(:func:`install`: a kustomization with ``namespace:`` over it; the policies match by the marker permission
in the ClusterRoles, whatever the namespace): the central server as its own ServiceAccount
``pykured-fleetlock``, the node-local one with a token bound to a pod on its node (the kubelet's kind).
Events about Nodes go to the namespace ``default``: the profiles' objects there stay there, renamed.
"""

from __future__ import annotations

import base64
import copy
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from pykured.core import errors
from pykured.kube.client import Kube
from pykured.status import agent as agentstatus
from pykured_dev.eventually import eventually
from pykured_dev.testenv.fleet import Fleet
from tests.testenv import TestEnv

pytestmark = [pytest.mark.k8s, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
PROFILES = {
    "base": ("kustomize/base", "command"),
    "kured-compat": ("kustomize/overlays/kured-compat", "command"),
    "signal": ("kustomize/overlays/signal", "signal"),
    "zincati": ("kustomize/overlays/zincati", "zincati"),
}
SIMULATION_OWNED = (
    "--reboot-sentinel=",
    "--reboot-sentinel-command=",
    "--reboot-method=",
    "--reboot-command=",
    "--zincati-marker-file=",
    "--metrics-port=",
)
RBAC_KINDS = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
PATHS = {
    "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
    "Role": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
}


def render(k8s: TestEnv, directory: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(k8s.kubectl("kustomize", str(ROOT / directory))) if d]


def relocate(obj: dict[str, Any], ns: str) -> dict[str, Any]:
    """Move a rendered RBAC object from kube-system into ``ns`` (cluster-scoped names get a suffix, and so do
    the objects in the namespace "default", where Events about Nodes go: they stay there)."""
    moved = copy.deepcopy(obj)
    meta = moved["metadata"]
    if moved["kind"] in ("ClusterRole", "ClusterRoleBinding") or meta.get("namespace") == "default":
        meta["name"] = f"{meta['name']}-{ns}"
    else:
        meta["namespace"] = ns
    if moved["kind"] == "ClusterRoleBinding" or (
        moved["kind"] == "RoleBinding" and meta["namespace"] == "default"
    ):
        moved["roleRef"]["name"] = f"{moved['roleRef']['name']}-{ns}"
    for subject in moved.get("subjects", []):
        if subject.get("kind") == "ServiceAccount":
            subject["namespace"] = ns
    return moved


def apply_profile_rbac(k8s: TestEnv, docs: list[dict[str, Any]], ns: str) -> None:
    """Create the rendered RBAC objects, moved into ``ns``."""
    for obj in docs:
        if obj["kind"] in RBAC_KINDS:
            moved = relocate(obj, ns)
            k8s.kube().create(PATHS[obj["kind"]].format(ns=moved["metadata"].get("namespace", ns)), moved)


POLICY_KINDS = {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
VAP = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
VAPB = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"
CLUSTER_KINDS = {"ClusterRole", "ClusterRoleBinding", *POLICY_KINDS}
MARKED = ("resource('agents')", "resource('fleetlockservers')")
"""The agents' and the central FleetLock server's policies match by these markers."""


def render_moved(
    k8s: TestEnv, directory: str, ns: str, workdir: Path, *, name_suffix: str = ""
) -> list[dict[str, Any]]:
    """``directory`` moved as a user moves it: a kustomization of its own with ``namespace: ns`` (and
    ``nameSuffix``) over it, rendered by kubectl. Nothing in the policies is rewritten.

    Several installs share the test API server, so every cluster-scoped object, and every object the
    profile puts in the namespace "default" (Events about Nodes), gets ``-<ns>`` appended to its name (the
    references to it follow); the latter stay in "default", where kustomize's ``namespace:`` would also
    have moved them."""
    home = workdir / f"kustomize-{ns}"
    home.mkdir(parents=True, exist_ok=True)
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "namespace": ns,
        **({"nameSuffix": name_suffix} if name_suffix else {}),
        "resources": [os.path.relpath(ROOT / directory, home)],
    }
    (home / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    docs = [d for d in yaml.safe_load_all(k8s.kubectl("kustomize", str(home))) if d]
    in_default = {
        (d["kind"], d["metadata"]["name"] + name_suffix)
        for d in render(k8s, directory)
        if d["metadata"].get("namespace") == "default"
    }
    for doc in docs:
        if (doc["kind"], doc["metadata"]["name"]) in in_default:
            doc["metadata"]["namespace"] = "default"
    return unique_names(docs, ns)


def unique_names(docs: list[dict[str, Any]], ns: str) -> list[dict[str, Any]]:
    """``-<ns>`` appended to the names of the cluster-scoped objects and those in "default", and to the
    references to them (a ClusterRoleBinding's role, a binding's policy); names do not change what a
    policy matches."""
    shared = {
        (d["kind"], d["metadata"]["name"])
        for d in docs
        if d["kind"] in CLUSTER_KINDS or d["metadata"].get("namespace") == "default"
    }
    out = []
    for doc in docs:
        moved = copy.deepcopy(doc)
        meta = moved["metadata"]
        if (doc["kind"], meta["name"]) in shared:
            meta["name"] = f"{meta['name']}-{ns}"
            if doc["kind"] in CLUSTER_KINDS:
                meta.pop("namespace", None)
        ref = moved.get("roleRef")
        if ref is not None and (ref["kind"], ref["name"]) in shared:
            ref["name"] = f"{ref['name']}-{ns}"
        if doc["kind"] == "ValidatingAdmissionPolicyBinding":
            moved["spec"]["policyName"] = f"{moved['spec']['policyName']}-{ns}"
        out.append(moved)
    return out


def narrowed(docs: list[dict[str, Any]], ns: str) -> list[dict[str, Any]]:
    """The agents' policies with one matchCondition added: the ServiceAccounts of ``ns`` only. The test
    installs share one API server, and each install's policies would otherwise apply to every install's
    agents (they match by the marker permission, wherever it is held). The shipped conditions stay."""
    out = []
    for doc in docs:
        conditions = doc.get("spec", {}).get("matchConditions", [])
        if doc["kind"] == "ValidatingAdmissionPolicy" and any(m in json.dumps(conditions) for m in MARKED):
            doc = copy.deepcopy(doc)
            this = f"request.userInfo.username.startsWith('system:serviceaccount:{ns}:')"
            doc["spec"]["matchConditions"] = [*conditions, {"name": "this-test-install", "expression": this}]
        out.append(doc)
    return out


def apply_docs(k8s: TestEnv, docs: list[dict[str, Any]], kinds: set[str]) -> None:
    """Server-side apply of the objects of ``kinds``, as ``kubectl apply --server-side`` does for users."""
    chosen = [d for d in docs if d["kind"] in kinds]
    k8s.kubectl("apply", "--server-side", "-f", "-", stdin="\n---\n".join(yaml.safe_dump(d) for d in chosen))


def install(
    k8s: TestEnv, directory: str, ns: str, workdir: Path, *, name_suffix: str = "", policies: bool = True
) -> list[dict[str, Any]]:
    """``directory`` moved into ``ns`` (:func:`render_moved`): its RBAC, ConfigMaps and (narrowed to ``ns``,
    :func:`narrowed`) policies applied; the rendered objects returned."""
    docs = render_moved(k8s, directory, ns, workdir, name_suffix=name_suffix)
    kinds = RBAC_KINDS | {"ConfigMap"} | (POLICY_KINDS if policies else set())
    apply_docs(k8s, narrowed(docs, ns), kinds)
    return docs


def token_kubeconfig(k8s: TestEnv, path: Path, token: str) -> str:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "t",
        "clusters": [
            {
                "name": "t",
                "cluster": {
                    "server": k8s.server,
                    "certificate-authority-data": base64.b64encode(k8s.ca_pem).decode(),
                },
            }
        ],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "t", "context": {"cluster": "t", "user": "u"}}],
    }
    path.write_text(json.dumps(config))
    return str(path)


def pod_bound_token(k8s: TestEnv, ns: str, account: str, node: str, *, ds: str | None) -> str:
    """The kubelet's kind of token: a Pod of DaemonSet ``ds`` (so a drain leaves it; None: a Pod of no
    owner) running as ``account`` on ``node``, and a token bound to that Pod."""
    meta: dict[str, Any] = {"name": f"agent-{node}"[:63]}
    if ds is not None:
        owner = k8s.kube().get_daemonset(ns, ds)["metadata"]
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "name": ds,
                "uid": owner["uid"],
                "controller": True,
            }
        ]
    pod = k8s.kube().create(
        f"/api/v1/namespaces/{ns}/pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": {
                "serviceAccountName": account,
                "nodeName": node,
                "containers": [{"name": "kured", "image": "registry.invalid/kured:1"}],
            },
        },
    )
    answer = k8s.kube().create(
        f"/api/v1/namespaces/{ns}/serviceaccounts/{account}/token",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "expirationSeconds": 3600,
                "boundObjectRef": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": pod["metadata"]["name"],
                    "uid": pod["metadata"]["uid"],
                },
            },
        },
    )
    return str(answer["status"]["token"])


@pytest.fixture
def fleets() -> Iterator[list[Fleet]]:
    made: list[Fleet] = []
    yield made
    for fleet in made:
        fleet.close()


@pytest.mark.parametrize("profile", list(PROFILES))
def test_full_cycle_with_the_profiles_rbac_only(
    k8s: TestEnv, tmp_path: Path, fleets: list[Fleet], profile: str
) -> None:
    directory, method = PROFILES[profile]
    docs = render(k8s, directory)
    ns = k8s.new_namespace(profile)
    apply_profile_rbac(k8s, docs, ns)
    daemonset = next(d for d in docs if d["kind"] == "DaemonSet")
    k8s.create_daemonset(ns, daemonset["metadata"]["name"])
    container = daemonset["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["/usr/bin/kured"]
    args = [a for a in container.get("args", []) if not a.startswith(SIMULATION_OWNED)]
    node = k8s.add_nodes(k8s.unique(profile))[0]
    k8s.create_pod(k8s.new_namespace(), "app", node=node)
    identity = k8s.kubeconfig_for(*k8s.kured_identity(ns))
    fleet = Fleet(
        k8s,
        workdir=tmp_path / "fleet",
        method=method,
        kubeconfig=lambda _n: identity,
        args=[*args, f"--ds-namespace={ns}", "--period=10s"],
    )
    fleets.append(fleet)
    fleet.__enter__()
    fleet.add(node)
    fleet.touch(node)

    def done() -> bool:
        obj = k8s.kube().get_node(node)
        annotations = obj["metadata"].get("annotations", {})
        return (
            fleet.slots[node].reboots == 1
            and not obj["spec"].get("unschedulable")
            and "pykured.dev/unschedulable-before" not in annotations
        )

    assert fleet.wait_for(done, timeout=90), fleet.log_text(node)
    log = fleet.log_text(node)
    # The freeze is on by default: honoured under pykured's RBAC; under kured's, said once per start, and why.
    annotations = k8s.kube().get_node(node)["metadata"]["annotations"]
    status = agentstatus.decode(annotations[agentstatus.STATUS_ANNOTATION])
    assert status is not None
    unavailable = f"Policy ConfigMap {ns}/kured-policy cannot be read (forbidden: "
    if profile == "kured-compat":
        assert status.freeze == "forbidden"
        assert log.count(unavailable) == log.count("Kubernetes Reboot Daemon") >= 1, log
        log = "\n".join(line for line in log.splitlines() if unavailable not in line)
    else:
        assert status.freeze == "on" and status.policy == f"{ns}/kured-policy", status
    assert "Forbidden" not in log and "forbidden" not in log.replace("events are forbidden", ""), log


FLEETLOCK_PROFILES = {
    "fleetlock": ("kustomize/overlays/fleetlock", "DaemonSet"),
    "fleetlock-central": ("kustomize/overlays/fleetlock-central", "Deployment"),
}


@pytest.mark.parametrize("profile", list(FLEETLOCK_PROFILES))
def test_zincati_cycle_with_the_fleetlock_profiles_rbac_only(
    k8s: TestEnv, tmp_path: Path, fleets: list[Fleet], profile: str
) -> None:
    from pykured.fleetlock.appid import app_specific_id
    from pykured_dev.testenv.procs import free_port
    from tests.e2e.test_wiring import zincati

    directory, kind = FLEETLOCK_PROFILES[profile]
    ns = k8s.new_namespace(profile[:10])  # a client certificate's name holds at most 64 characters
    # the central server writes every Zincati node's fields, an agent its own
    docs = install(k8s, directory, ns, tmp_path)
    central = kind == "Deployment"
    k8s.create_daemonset(ns, "kured")
    workload = next(d for d in docs if d["kind"] == kind)
    args = [
        a
        for a in workload["spec"]["template"]["spec"]["containers"][0].get("args", [])
        if not a.startswith((*SIMULATION_OWNED, "--fleetlock-listen="))
    ]
    zincati_node = k8s.add_nodes(k8s.unique("fcos"))[0]
    k8s.create_pod(k8s.new_namespace(), "app", node=zincati_node)
    machine_id = k8s.kube().get_node(zincati_node)["status"]["nodeInfo"]["machineID"]
    (tmp_path / "machine-id").write_text(machine_id + "\n")
    port = free_port()
    server_node = k8s.add_nodes(k8s.unique("infra"))[0] if central else zincati_node
    if (
        central
    ):  # the central server answers a node only from one of its addresses: Zincati calls from loopback
        patch = {"status": {"addresses": [{"type": "ExternalIP", "address": "127.0.0.1"}]}}
        k8s.kube().patch_node_status(zincati_node, patch)
    if central:  # the central server runs as its own ServiceAccount, with its own ClusterRole
        assert workload["spec"]["template"]["spec"]["serviceAccountName"] == "pykured-fleetlock"
        identity = k8s.kubeconfig_for(
            f"system:serviceaccount:{ns}:pykured-fleetlock", k8s.kured_identity(ns)[1]
        )
    else:  # the node-local server is the node's agent: its token is bound to its pod on that node
        token = pod_bound_token(k8s, ns, "kured", zincati_node, ds="kured")
        identity = token_kubeconfig(k8s, tmp_path / "agent.json", token)
    probe = Kube.from_kubeconfig(identity)
    probes = iter(range(1_000_000))

    def active() -> bool:  # the policies in effect: a foreign annotation is refused
        try:
            probe.patch_node(
                zincati_node, {"metadata": {"annotations": {"example.com/p": str(next(probes))}}}
            )
        except errors.ForbiddenError as exc:
            return "not: example.com/p" in str(exc)
        return False

    assert eventually(active, timeout=90, every=0.5), "the policies never took effect"
    probe.close()
    fleet = Fleet(
        k8s,
        workdir=tmp_path / "fleet",
        kubeconfig=lambda _n: identity,
        args=[
            *args,
            f"--ds-namespace={ns}",
            f"--fleetlock-listen=127.0.0.1:{port}",
            f"--machine-id-file={tmp_path / 'machine-id'}",
        ],
    )
    fleets.append(fleet)
    fleet.__enter__()
    fleet.add(server_node)
    ident = app_specific_id(machine_id)

    def up() -> bool:
        try:
            return zincati(port, "steady-state", ident)[0] == 200
        except OSError:
            return False

    assert fleet.wait_for(up, timeout=90), fleet.log_text(server_node)
    status = 0
    for _ in range(60):
        status, _body = zincati(port, "pre-reboot", ident)
        if status == 200:
            break
    assert status == 200, fleet.log_text(server_node)
    assert k8s.kube().get_node(zincati_node)["spec"]["unschedulable"] is True
    if central:
        k8s.reboot_node(zincati_node)
    else:
        fleet.reboot(zincati_node)
        assert fleet.wait_for(up, timeout=90)
    assert zincati(port, "steady-state", ident)[0] == 200
    assert not k8s.kube().get_node(zincati_node)["spec"].get("unschedulable")
    assert "forbidden" not in fleet.log_text(server_node).lower(), fleet.log_text(server_node)


@pytest.mark.parametrize("extra_rule", [True, False], ids=["documented-rule", "base-only"])
def test_resume_rolls_with_the_documented_lease_rule(
    k8s: TestEnv, tmp_path: Path, fleets: list[Fleet], extra_rule: bool
) -> None:
    """docs/maintenance-policy.md: ``--resume-rolls`` needs ``get``/``update`` on leases without names.

    Without the rule the queue cannot be written: each agent says so and goes to the lock as kured would.
    """
    docs = render(k8s, "kustomize/base")
    ns = k8s.new_namespace("resume")
    apply_profile_rbac(k8s, docs, ns)
    if extra_rule:
        rule = {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "update"]}
        role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": "pykured-resume-rolls"}, "rules": [rule]}  # fmt: skip
        ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pykured-resume-rolls"}
        binding = {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "pykured-resume-rolls"}, "roleRef": ref,
            "subjects": [{"kind": "ServiceAccount", "name": "kured", "namespace": ns}],
        }  # fmt: skip
        k8s.kube().create(PATHS["Role"].format(ns=ns), role)
        k8s.kube().create(PATHS["RoleBinding"].format(ns=ns), binding)
    daemonset = next(d for d in docs if d["kind"] == "DaemonSet")
    k8s.create_daemonset(ns, daemonset["metadata"]["name"])
    args = [a for a in daemonset["spec"]["template"]["spec"]["containers"][0].get("args", [])
            if not a.startswith(SIMULATION_OWNED)]  # fmt: skip
    nodes = k8s.add_nodes(k8s.unique("resume"), k8s.unique("resume"))
    identity = k8s.kubeconfig_for(*k8s.kured_identity(ns))
    fleet = Fleet(
        k8s,
        workdir=tmp_path / "fleet",
        kubeconfig=lambda _n: identity,
        args=[*args, f"--ds-namespace={ns}", "--period=10s", "--resume-rolls"],
    )
    fleets.append(fleet)
    fleet.__enter__()
    for node in nodes:
        fleet.add(node)
        fleet.touch(node)
    assert fleet.wait_for(lambda: all(fleet.slots[n].reboots == 1 for n in nodes), timeout=120), (
        fleet.log_text(nodes[0]) + fleet.log_text(nodes[1])
    )
    logs = fleet.log_text(nodes[0]) + fleet.log_text(nodes[1])
    if extra_rule:
        assert "forbidden" not in logs.lower().replace("events are forbidden", ""), logs
    else:
        assert "Could not update the lock queue entry" in logs and "forbidden" in logs.lower(), logs


@pytest.mark.parametrize(
    ("profile", "granted"),
    [("kustomize/overlays/drain-escalation", True), ("kustomize/base", False)],
    ids=["drain-escalation-profile", "base-refuses"],
)
def test_drain_escalation_delete_needs_the_profiles_pods_delete(
    k8s: TestEnv, tmp_path: Path, fleets: list[Fleet], profile: str, granted: bool
) -> None:
    """``--drain-escalation=delete,quarantine`` as the ServiceAccount: a pod whose PodDisruptionBudget never
    allows an eviction is deleted under the drain-escalation profile's RBAC (its one extra grant) and the
    node reboots; under the base's, the API server refuses the delete (403, no timeout: kured's path, the
    node neither reboots nor is quarantined, the pod stays)."""
    docs = render(k8s, profile)
    ns = k8s.new_namespace("escalation")
    apply_profile_rbac(k8s, docs, ns)
    daemonset = next(d for d in docs if d["kind"] == "DaemonSet")
    k8s.create_daemonset(ns, daemonset["metadata"]["name"])
    container = daemonset["spec"]["template"]["spec"]["containers"][0]
    owned = (*SIMULATION_OWNED, "--drain-timeout=", "--drain-escalation=")  # a short timeout, the same steps
    args = [a for a in container.get("args", []) if not a.startswith(owned)]
    node = k8s.add_nodes(k8s.unique("esc"))[0]
    apps = k8s.new_namespace()
    k8s.create_pod(apps, "guarded", node=node, labels={"app": "guarded"})
    k8s.create_pdb(apps, "guarded", {"app": "guarded"}, min_available=1)
    k8s.set_pdb_status(apps, "guarded", disruptions_allowed=0)
    identity = k8s.kubeconfig_for(*k8s.kured_identity(ns))
    fleet = Fleet(
        k8s,
        workdir=tmp_path / "fleet",
        method="command",
        kubeconfig=lambda _n: identity,
        args=[
            *args,
            f"--ds-namespace={ns}",
            "--period=10s",
            "--drain-timeout=3s",
            "--drain-escalation=delete,quarantine",
        ],
    )
    fleets.append(fleet)
    fleet.__enter__()
    fleet.add(node)
    fleet.touch(node)

    def pods() -> set[str]:
        items = k8s.kube().list_pods(field_selector=f"spec.nodeName={node}")["items"]
        return {p["metadata"]["name"] for p in items}

    if granted:
        assert fleet.wait_for(lambda: fleet.slots[node].reboots == 1, timeout=90), fleet.log_text(node)
        assert "guarded" not in pods()
        log = fleet.log_text(node)
        assert log.count("Drain escalation (delete)") == 1 and f"{apps}/guarded" in log, log
        assert "forbidden" not in log.replace("events are forbidden", ""), log
    else:
        refusal = 'cannot delete resource \\"pods\\"'

        def refused() -> bool:
            return refusal in fleet.log_text(node) or refusal.replace("\\", "") in fleet.log_text(node)

        assert fleet.wait_for(refused, timeout=90), fleet.log_text(node)
        assert fleet.wait_for(lambda: not k8s.kube().get_node(node)["spec"].get("unschedulable"), timeout=90)
        annotations = k8s.kube().get_node(node)["metadata"].get("annotations", {})
        assert fleet.slots[node].reboots == 0 and "pykured.dev/quarantined" not in annotations
        assert "guarded" in pods()
