"""The kustomize manifests: every profile renders with kubectl's kustomize, the API server accepts it
(server-side apply, dry run) and its key fields are what the profile promises.

Profiles: ``base`` (Lease lock, least-privilege RBAC), ``kured-compat`` (kured's annotation lock and exactly
kured's RBAC, kured-rbac.yaml), ``signal`` (an unprivileged agent, a relay with only CAP_KILL), ``zincati``
(marker hand-off), ``fleetlock`` (node-local FleetLock) and ``fleetlock-central`` (Deployment + Service).
Container arguments are parsed with pykured's own flag parser, so a manifest can only use flags pykured
defines.
The Dockerfile is checked by ``tools/dockerfile-check``, which ``tools/dev test`` runs before pytest.
"""

from __future__ import annotations

import json
import os
import posixpath
from pathlib import Path
from typing import Any

import pytest
import yaml

import pykured
from tests.chart.test_pykured_chart import UNPRIVILEGED

pytestmark = pytest.mark.k8s

ROOT = Path(__file__).resolve().parents[2]
KUSTOMIZE = ROOT / "kustomize"
PROFILES = {
    "base": KUSTOMIZE / "base",
    "kured-compat": KUSTOMIZE / "overlays" / "kured-compat",
    "signal": KUSTOMIZE / "overlays" / "signal",
    "zincati": KUSTOMIZE / "overlays" / "zincati",
    "fleetlock": KUSTOMIZE / "overlays" / "fleetlock",
    "fleetlock-central": KUSTOMIZE / "overlays" / "fleetlock-central",
    "drain-escalation": KUSTOMIZE / "overlays" / "drain-escalation",
}
IMAGE = f"ghcr.io/pykured/pykured:{pykured.__version__}"
NS = "kube-system"

# The marker the agents' admission policies recognise them by (no API serves it: it grants nothing).
AGENTS_MARKER = {"apiGroups": ["pykured.dev"], "resources": ["agents"], "resourceNames": ["kured"],
                 "verbs": ["use"]}  # fmt: skip
# kured-rbac.yaml (kured 1.23.0), in kured's order.
KURED_CLUSTER_RULES = [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "delete", "get"]},
    {"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
    AGENTS_MARKER,  # not kured's: it grants nothing
]
KURED_ROLE_RULES = [
    {"apiGroups": ["apps"], "resources": ["daemonsets"], "resourceNames": ["kured"], "verbs": ["update"]},
]
BASE_CLUSTER_RULES = [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch", "watch"]},  # watch: its own Node
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "get"]},  # no delete: pods are evicted
    {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
    {"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["get"]},
    AGENTS_MARKER,
]
EVENTS_RULES = [{"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}]  # in "default" only
POLICIES = (
    "pykured-agent-nodes",
    "pykured-agent-daemonset",
    "pykured-agent-leases",
    "pykured-agent-configmaps",
    "pykured-agent-pods",
    "pykured-reboot-requesters",
)


def _kind_name(doc: dict[str, Any]) -> tuple[str, str]:
    return doc["kind"], doc["metadata"]["name"]


@pytest.fixture(scope="module")
def rendered(k8s: Any) -> dict[str, tuple[str, dict[tuple[str, str], dict[str, Any]]]]:
    """Each profile's ``kubectl kustomize`` output: the YAML text and its objects by (kind, name)."""
    out: dict[str, tuple[str, dict[tuple[str, str], dict[str, Any]]]] = {}
    for name, path in PROFILES.items():
        text = k8s.kubectl("kustomize", str(path))
        docs = [doc for doc in yaml.safe_load_all(text) if doc]
        objects = {_kind_name(doc): doc for doc in docs}
        assert len(objects) == len(docs), f"{name}: duplicate objects"
        out[name] = (text, objects)
    return out


def _parse(args: list[str]) -> Any:
    """pykured's flag parser (pykured.config.parse) on a container's arguments, as kured would see them."""
    try:
        from pykured.config import parse
    except ImportError as exc:  # pragma: no cover - only while pykured.config is missing
        pytest.fail(f"pykured.config.parse is needed to check the manifests' flags: {exc}")
    return parse(list(args), {"KURED_NODE_ID": "node-1"})


def _workloads(objects: dict[tuple[str, str], dict[str, Any]]) -> list[dict[str, Any]]:
    return [obj for (kind, _), obj in objects.items() if kind in ("DaemonSet", "Deployment")]


def _container(obj: dict[str, Any]) -> dict[str, Any]:
    """The agent's container: the only one, or the first beside the signal profile's relay."""
    containers = obj["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1 or [c["name"] for c in containers] == ["kured", "signal-relay"]
    container: dict[str, Any] = containers[0]
    return container


def _daemonset(objects: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
    return objects[("DaemonSet", "kured")]


def _mounts(obj: dict[str, Any]) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """mountPath -> (volumeMount, volume) of the workload's only container."""
    volumes = {vol["name"]: vol for vol in obj["spec"]["template"]["spec"].get("volumes", [])}
    return {m["mountPath"]: (m, volumes[m["name"]]) for m in _container(obj).get("volumeMounts", [])}


# -- every profile -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("profile", PROFILES)
def test_applies_to_the_api_server(k8s: Any, rendered: Any, profile: str) -> None:
    text, objects = rendered[profile]
    out = k8s.kubectl(
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=pykured-manifest-test",
        "--dry-run=server",
        "-f",
        "-",
        stdin=text,
    )
    lines = out.splitlines()
    for doc in objects.values():
        group = doc["apiVersion"].rpartition("/")[0]
        resource = doc["kind"].lower() + (f".{group}" if group else "")
        assert f"{resource}/{doc['metadata']['name']} serverside-applied (server dry run)" in lines, out
    assert len(lines) == len(objects)


@pytest.mark.parametrize("profile", PROFILES)
def test_workloads_run_kured_with_flags_pykured_defines(rendered: Any, profile: str) -> None:
    _, objects = rendered[profile]
    workloads = _workloads(objects)
    assert workloads
    for obj in workloads:
        assert obj["metadata"]["namespace"] == NS
        pod = obj["spec"]["template"]["spec"]
        account = "kured" if obj["kind"] == "DaemonSet" else "pykured-fleetlock"  # central FleetLock: its own
        assert pod["serviceAccountName"] == account
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert pod["enableServiceLinks"] is False
        container = _container(obj)
        assert container["image"] == IMAGE
        assert container["command"] == ["/usr/bin/kured"]
        assert all(arg.startswith("--") and "=" in arg for arg in container["args"]), container["args"]
        cfg = _parse(container["args"])
        assert cfg.ds_name == "kured" and cfg.ds_namespace == NS
        env = {e["name"]: e for e in container["env"]}
        assert env["KURED_NODE_ID"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
        assert env["MALLOC_ARENA_MAX"]["value"] == "2"
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["resources"] == {
            "requests": {"cpu": "10m", "memory": "64Mi"},
            "limits": {"memory": "192Mi"},
        }
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert ports["metrics"] == cfg.metrics_port == 8080
        for probe in ("livenessProbe", "readinessProbe"):
            assert container[probe]["httpGet"] == {"path": "/metrics", "port": "metrics"}
            assert container[probe]["failureThreshold"] == 5
    assert objects[("ServiceAccount", "kured")]["metadata"]["namespace"] == NS
    # URLs (notifications, Prometheus, Alertmanager) never on the command line: from the Secret kured-notify,
    # if there is one.
    for obj in workloads:
        assert not any("://" in arg for arg in _container(obj)["args"])
    env = {e["name"]: e for e in _container(_daemonset(objects))["env"]}
    urls = {
        "KURED_NOTIFY_URL": "notify-url",
        "KURED_SLACK_HOOK_URL": "slack-hook-url",
        "KURED_PROMETHEUS_URL": "prometheus-url",
        "KURED_ALERTMANAGER_URL": "alertmanager-url",
    }
    for name, key in urls.items():
        assert env[name]["valueFrom"] == {
            "secretKeyRef": {"name": "kured-notify", "key": key, "optional": True}
        }
    # The admission policies are in every profile, each bound to deny.
    for name in POLICIES:
        assert objects[("ValidatingAdmissionPolicy", name)]["spec"]["failurePolicy"] == "Fail"
        binding = objects[("ValidatingAdmissionPolicyBinding", name)]["spec"]
        assert binding == {"policyName": name, "validationActions": ["Deny"]}
    for kind in ("ClusterRoleBinding", "RoleBinding"):
        binding = objects[(kind, "kured")]
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "kured", "namespace": NS}]
        assert binding["roleRef"]["name"] == "kured"


@pytest.mark.parametrize("profile", PROFILES)
def test_daemonset_has_kureds_shape(rendered: Any, profile: str) -> None:
    _, objects = rendered[profile]
    ds = _daemonset(objects)
    assert ds["metadata"]["namespace"] == NS
    assert ds["spec"]["selector"] == {"matchLabels": {"name": "kured"}}  # kured's immutable selector
    pod = ds["spec"]["template"]["spec"]
    assert pod["hostPID"] is True
    assert {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"} in pod["tolerations"]
    assert {"key": "node-role.kubernetes.io/master", "effect": "NoSchedule"} in pod["tolerations"]
    cfg = _parse(_container(ds)["args"])
    assert cfg.reboot_sentinel == "/sentinel/reboot-required"
    mount, volume = _mounts(ds)["/sentinel"]
    assert mount["readOnly"] is True
    assert volume["hostPath"] == {"path": "/var/run", "type": "Directory"}


# -- profile by profile ------------------------------------------------------------------------------------


def test_base_uses_the_lease_lock_with_least_privilege(rendered: Any) -> None:
    _, objects = rendered["base"]
    ds = _daemonset(objects)
    cfg = _parse(_container(ds)["args"])
    assert "--lock-backend=lease" in _container(ds)["args"]
    assert cfg.lock_backend == "lease" and cfg.concurrency == 1
    assert cfg.reboot_method == "command"
    assert _container(ds)["securityContext"] == {"privileged": True, "readOnlyRootFilesystem": True}
    assert objects[("ClusterRole", "kured")]["rules"] == BASE_CLUSTER_RULES
    role = objects[("Role", "kured")]
    assert role["metadata"]["namespace"] == NS
    slot = f"{cfg.lease_name_prefix}-0"
    assert slot == "kured-lock-0"
    assert role["rules"] == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": [slot],
            "verbs": ["get", "update"],
        },
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["list", "watch", "create"]},
        {"apiGroups": ["apps"], "resources": ["daemonsets"], "resourceNames": ["kured"], "verbs": ["get"]},
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": [cfg.policy_configmap],
            "verbs": ["get", "list", "watch", "update"],
        },
    ]
    assert cfg.policy_configmap == "kured-policy" and cfg.reboot_deadline.seconds == 3600
    events = objects[("Role", "kured-events")]
    assert events["metadata"]["namespace"] == "default" and events["rules"] == EVENTS_RULES
    assert objects[("RoleBinding", "kured-events")]["subjects"] == [
        {"kind": "ServiceAccount", "name": "kured", "namespace": NS}
    ]
    # create on Leases cannot be limited by name: the lease policy limits it to the lock's prefix
    leases = objects[("ValidatingAdmissionPolicy", "pykured-agent-leases")]["spec"]
    assert leases["variables"][0] == {"name": "leasePrefix", "expression": f"'{cfg.lease_name_prefix}-'"}
    assert objects[("ConfigMap", "kured-policy")]["metadata"]["namespace"] == NS
    # Nothing beyond what the Lease lock needs: no DaemonSet writes, no delete of Leases, no node list.
    verbs = {v for rule in role["rules"] + BASE_CLUSTER_RULES for v in rule["verbs"]}
    assert not verbs & {"*", "delete", "deletecollection", "escalate", "bind", "impersonate"}


def test_kured_compat_has_kureds_lock_and_exactly_kureds_rbac(rendered: Any) -> None:
    _, objects = rendered["kured-compat"]
    _, base = rendered["base"]
    ds = _daemonset(objects)
    args = _container(ds)["args"]
    assert not any(arg.startswith("--lock-backend") for arg in args)
    cfg = _parse(args)
    assert cfg.lock_backend == "daemonset"
    assert cfg.lock_annotation == "weave.works/kured-node-lock"
    assert cfg.events is False  # kured's RBAC grants no events
    assert objects[("ClusterRole", "kured")]["rules"] == KURED_CLUSTER_RULES
    assert objects[("Role", "kured")]["rules"] == KURED_ROLE_RULES
    assert objects[("Role", "kured")]["metadata"]["namespace"] == NS
    # Only the arguments and the RBAC differ from the base (no Events: no Events Role).
    assert set(objects) == set(base) - {("Role", "kured-events"), ("RoleBinding", "kured-events")}
    assert {k: v for k, v in _container(ds).items() if k != "args"} == {
        k: v for k, v in _container(_daemonset(base)).items() if k != "args"
    }


def test_signal_splits_the_host_s_files_from_the_privilege(rendered: Any) -> None:
    """The agent: an unprivileged user, no capability, the host's /var/run for its sentinel. The relay: root
    with only CAP_KILL and nothing of the host mounted. They share only the relay's emptyDir."""
    _, objects = rendered["signal"]
    ds = _daemonset(objects)
    pod = ds["spec"]["template"]["spec"]
    agent, relay_container = pod["containers"]
    cfg = _parse(agent["args"])
    assert cfg.reboot_method == "signal" and cfg.reboot_signal == 39
    assert cfg.reboot_signal_relay == "/relay/reboot"
    assert cfg.lock_backend == "lease"
    assert agent["securityContext"] == UNPRIVILEGED
    assert {m["name"] for m in agent["volumeMounts"]} == {"sentinel", "tmp", "relay"}
    assert relay_container["name"] == "signal-relay" and relay_container["image"] == agent["image"]
    assert relay_container["args"] == ["signal-relay", "--relay=/relay/reboot"]
    assert relay_container["securityContext"] == {
        "privileged": False,
        "runAsUser": 0,
        "readOnlyRootFilesystem": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"], "add": ["KILL"]},
    }
    assert [m["name"] for m in relay_container["volumeMounts"]] == ["relay"]  # nothing of the host
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes["relay"] and volumes["sentinel"]["hostPath"]["path"] == "/var/run"
    assert pod["hostPID"] is True  # kill(1, sig) must reach the host's PID 1
    assert cfg.reboot_sentinel_command == ""  # nsenter would be denied without privileges (kured#894)


def test_drain_escalation_adds_pods_delete_and_nothing_else(rendered: Any) -> None:
    """``--drain-escalation=delete,quarantine``: ``delete`` on pods is the one grant added to the base's."""
    _, objects = rendered["drain-escalation"]
    _, base = rendered["base"]
    cfg = _parse(_container(_daemonset(objects))["args"])
    assert cfg.drain_escalation == ("delete", "quarantine") and cfg.drain_timeout.seconds == 900
    rules = objects[("ClusterRole", "kured")]["rules"]
    assert rules == [*base[("ClusterRole", "kured")]["rules"], {"apiGroups": [""], "resources": ["pods"],
                                                                 "verbs": ["delete"]}]  # fmt: skip
    assert {
        k: v for k, v in objects.items() if k not in (("ClusterRole", "kured"), ("DaemonSet", "kured"))
    } == {k: v for k, v in base.items() if k not in (("ClusterRole", "kured"), ("DaemonSet", "kured"))}


def test_zincati_hands_off_through_the_marker_file_on_the_host(rendered: Any) -> None:
    _, objects = rendered["zincati"]
    ds = _daemonset(objects)
    cfg = _parse(_container(ds)["args"])
    assert cfg.reboot_method == "zincati"
    assert cfg.zincati_marker_file == "/var/lib/zincati/admin/strategy/marker_file/allowfinalize.json"
    mount, volume = _mounts(ds)["/var/lib/zincati/admin/strategy"]
    assert not mount.get("readOnly", False)
    assert volume["hostPath"] == {"path": "/var/lib/zincati/admin/strategy", "type": "DirectoryOrCreate"}
    # The marker (and its temp file for the atomic rename) lands inside the mount, at the host's path.
    assert posixpath.dirname(cfg.zincati_marker_file).startswith(mount["mountPath"] + "/")
    assert cfg.reboot_sentinel_command_argv == (
        "sh",
        "-c",
        "rpm-ostree status --pending-exit-77 >/dev/null; test $? -eq 77",
    )
    assert _container(ds)["securityContext"]["privileged"] is True  # the sentinel command uses nsenter


def test_fleetlock_serves_on_the_nodes_loopback(rendered: Any) -> None:
    _, objects = rendered["fleetlock"]
    ds = _daemonset(objects)
    pod = ds["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True
    assert pod["dnsPolicy"] == "ClusterFirstWithHostNet"
    cfg = _parse(_container(ds)["args"])
    assert cfg.fleetlock_listen == "127.0.0.1:3333"
    assert cfg.fleetlock_mode == "node-local"
    assert cfg.reboot_method == "command" and "--reboot-method" not in " ".join(_container(ds)["args"])
    mount, volume = _mounts(ds)[cfg.machine_id_file]
    assert mount["readOnly"] is True
    assert volume["hostPath"] == {"path": "/etc/machine-id", "type": "File"}
    assert objects[("ClusterRole", "kured")]["rules"] == BASE_CLUSTER_RULES


def test_fleetlock_central_is_a_deployment_behind_a_service(rendered: Any) -> None:
    _, objects = rendered["fleetlock-central"]
    deploy = objects[("Deployment", "pykured-fleetlock")]
    assert deploy["spec"]["replicas"] == 1
    assert deploy["spec"]["strategy"] == {"type": "Recreate"}
    container = _container(deploy)
    cfg = _parse(container["args"])
    assert cfg.fleetlock_mode == "central"
    assert cfg.fleetlock_listen == "0.0.0.0:3333"
    assert cfg.lock_backend == "lease"  # the same slots as the DaemonSet: one reboot budget
    pod = deploy["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert "hostPID" not in pod and "hostNetwork" not in pod
    assert container["securityContext"]["privileged"] is False
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["fleetlock"] == int(cfg.fleetlock_listen.rpartition(":")[2])

    service = objects[("Service", "pykured-fleetlock")]
    assert service["metadata"]["namespace"] == NS
    assert service["spec"]["ports"] == [
        {"name": "fleetlock", "port": 80, "targetPort": "fleetlock", "protocol": "TCP"}
    ]
    labels = deploy["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    ds_labels = _daemonset(objects)["spec"]["template"]["metadata"]["labels"]
    # The DaemonSet's pods are not endpoints of the FleetLock Service.
    assert not service["spec"]["selector"].items() <= ds_labels.items()

    # Its own ServiceAccount and ClusterRole (the node index: list/watch); the agents' RBAC is the base's.
    assert pod["serviceAccountName"] == "pykured-fleetlock"
    assert objects[("ServiceAccount", "pykured-fleetlock")]["metadata"]["namespace"] == NS
    assert objects[("ClusterRole", "kured")]["rules"] == BASE_CLUSTER_RULES
    assert objects[("ClusterRole", "pykured-fleetlock")]["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "get"]},
        {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
        {"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["get"]},
        {
            "apiGroups": ["pykured.dev"],
            "resources": ["fleetlockservers"],
            "resourceNames": ["kured"],
            "verbs": ["use"],
        },
    ]
    subject = [{"kind": "ServiceAccount", "name": "pykured-fleetlock", "namespace": NS}]
    for kind, name, role in (
        ("ClusterRoleBinding", "pykured-fleetlock", "pykured-fleetlock"),
        ("RoleBinding", "pykured-fleetlock", "kured"),  # the agents' Lease slots and policy ConfigMap
        ("RoleBinding", "pykured-fleetlock-events", "kured-events"),
    ):
        assert (
            objects[(kind, name)]["subjects"] == subject and objects[(kind, name)]["roleRef"]["name"] == role
        )
    # Only the nodes' addresses reach :3333; the metrics port stays open.
    policy = objects[("NetworkPolicy", "pykured-fleetlock")]
    assert policy["metadata"]["namespace"] == NS
    assert policy["spec"]["podSelector"]["matchLabels"] == labels
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    fleetlock_rule, metrics_rule = policy["spec"]["ingress"]
    assert fleetlock_rule["ports"] == [{"port": "fleetlock", "protocol": "TCP"}]
    assert [list(peer) for peer in fleetlock_rule["from"]] == [["ipBlock"]]  # no pod or namespace selector
    assert metrics_rule == {"ports": [{"port": "metrics", "protocol": "TCP"}]}
    # The agents' node policy lets the central server (by its marker) write any Zincati node's fields.
    nodes_policy = objects[("ValidatingAdmissionPolicy", "pykured-agent-nodes")]["spec"]
    marker = "resource('fleetlockservers').name('kured').check('use')"
    assert marker in nodes_policy["matchConditions"][0]["expression"]
    central = {v["name"]: v["expression"] for v in nodes_policy["variables"]}["central"]
    assert marker in central and "serviceaccount:kube-system" not in json.dumps(nodes_policy)


def test_every_profile_directory_is_tested() -> None:
    found = {"base"} | {entry.name for entry in os.scandir(KUSTOMIZE / "overlays") if entry.is_dir()}
    assert found == set(PROFILES)


# -- the reboot requester's ClusterRole (not a profile: it grants nothing to the agent) -------------------


REQUESTER_RULES = [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]},
    {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]},
    # the marker the pykured-reboot-requesters admission policy recognises (no API serves it)
    {"apiGroups": ["pykured.dev"], "resources": ["rebootrequests"], "verbs": ["create"]},
]


def test_requester_cluster_role_renders_applies_and_grants_only_what_requests_need(k8s: Any) -> None:
    text = k8s.kubectl("kustomize", str(KUSTOMIZE / "requester"))
    docs = [doc for doc in yaml.safe_load_all(text) if doc]
    assert [_kind_name(d) for d in docs] == [("ClusterRole", "pykured-reboot-requester")]
    assert docs[0]["rules"] == REQUESTER_RULES
    k8s.kubectl("apply", "--server-side", "--dry-run=server", "-f", "-", stdin=text)
    readme = (ROOT / "README.md").read_text()
    assert "kubectl create clusterrolebinding" in readme
    assert "--clusterrole=pykured-reboot-requester" in readme
