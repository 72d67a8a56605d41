"""``charts/pykured``: kured's chart 6.1.0 values, kured's meaning, and exactly the documented differences.

Both charts are rendered (``helm template``, offline) with the same values files: kured's own default
``values.yaml``, no values at all, every ``configuration.*`` key (the values of
``tests/e2e/kured/test_chart.py``), a Prometheus setup (Service, NodePort, ServiceMonitor) and a realistic
production file (tolerations, node selector, resources, annotations and labels, extra env from a Secret, a
named ServiceAccount, OnDelete, host network, extra volumes, the signal method's security context, an init
container). Every object kured renders is rendered by pykured's chart under the same kind and name, and
after :func:`documented` takes out exactly the differences COMPATIBILITY.md lists (the ``helm.sh/chart``
label, the image, pykured's own arguments and RBAC rules, both appended), the objects are equal.

On the test control plane: ``helm install`` of kured's chart, then ``helm upgrade`` of the same release to
pykured's chart keeps every object's name, labels and the DaemonSet's selector, and the lock (the
DaemonSet's annotation) and the nodes' annotations carry over; the rendered DaemonSet's pod template then
runs as a node's agent (pykured's image) with the render's ServiceAccount and RBAC, through a whole reboot
cycle on the Lease lock.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from pykured import __version__
from pykured.config import parse
from pykured_dev.testenv.pods import PYKURED_IMAGE
from pykured_dev.testenv.reference import Reference, helm_template, reference
from tests.e2e.kured.values import every_key_values

pytestmark = pytest.mark.reference

CHART = Path(__file__).resolve().parents[2] / "charts" / "pykured"
CHART_LABEL = f"pykured-{__version__}"
KURED_CHART_LABEL = "kured-6.1.0"
LOCK = "weave.works/kured-node-lock"

# pykured's differences with the chart's default `pykured:` values (COMPATIBILITY.md, "The Helm chart").
DEFAULT_ARGS: list[str] = []  # kured's lock by default: the same arguments (but the notification URLs)
# Least privilege: no pods delete, no extensions group; Events in a Role of the namespace "default".


def marker_rule(namespace: str, full: str) -> dict[str, Any]:
    """The rule that grants nothing and marks the release's agents for its admission policies."""
    return {"apiGroups": ["pykured.dev"], "resources": ["agents"], "resourceNames": [f"{namespace}/{full}"],
            "verbs": ["use"]}  # fmt: skip


def default_cluster_rules(namespace: str, full: str) -> list[dict[str, Any]]:
    return [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "get"]},
        {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
        {"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["get"]},
        marker_rule(namespace, full),
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["watch"]},
    ]


EVENTS_RULES = [{"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}]
POLICIES = (
    "agent-nodes", "agent-daemonset", "agent-leases", "agent-configmaps", "agent-pods", "reboot-requesters",
)  # fmt: skip
URL_FLAGS = ("--notify-url=", "--slack-hook-url=", "--prometheus-url=")
URL_ENV = {
    "KURED_NOTIFY_URL": "notify-url",
    "KURED_SLACK_HOOK_URL": "slack-hook-url",
    "KURED_PROMETHEUS_URL": "prometheus-url",
    "KURED_ALERTMANAGER_URL": "alertmanager-url",
}
SECCOMP = {"seccompProfile": {"type": "RuntimeDefault"}}


def default_role_rules(name: str) -> list[dict[str, Any]]:
    """The annotation lock (the default): ``update`` on the own DaemonSet only (kured: update and patch, also
    in the extensions group), and ``list``/``watch`` of it by name (a waiting agent watches it)."""
    verbs = ["update", "list", "watch"]
    return [{"apiGroups": ["apps"], "resources": ["daemonsets"], "resourceNames": [name], "verbs": verbs}]


def added_objects(full: str, *, events: bool = True, secret: bool = False) -> set[tuple[str, str]]:
    """The objects pykured's chart renders and kured's does not (default ``pykured:`` values)."""
    added = {(kind, f"{full[:40].rstrip('-')}-{name}") for name in POLICIES for kind in
             ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")}  # fmt: skip
    if events:
        added |= {("Role", f"{full}-events"), ("RoleBinding", f"{full}-events")}
    if secret:
        added.add(("Secret", f"{full}-notify"))
    return added


def prometheus_values() -> dict[str, Any]:
    return {
        "service": {
            "create": True,
            "name": "kured-prometheus-endpoint",
            "port": 8080,
            "type": "NodePort",
            "nodePort": 30000,
        },
        "metrics": {
            "create": True,
            "namespace": "monitoring",
            "labels": {"release": "prom"},
            "interval": "30s",
            "scrapeTimeout": "10s",
        },
    }


def realistic_values() -> dict[str, Any]:
    return {
        "image": {"pullSecrets": [{"name": "registry"}]},
        "updateStrategy": "OnDelete",
        "revisionHistoryLimit": 3,
        "podAnnotations": {"container.apparmor.security.beta.kubernetes.io/kured": "unconfined"},
        "dsAnnotations": {"owner": "platform"},
        "podLabels": {"team": "platform"},
        "priorityClassName": "system-node-critical",
        "hostNetwork": True,
        "tolerations": [{"operator": "Exists"}],
        "nodeSelector": {"kubernetes.io/os": "linux", "pool": "workers"},
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "pool", "operator": "NotIn", "values": ["gpu"]}]}
                    ]
                }
            }
        },
        "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
        "serviceAccount": {"name": "reboots", "extraAnnotations": {"eks.amazonaws.com/role-arn": "arn:x"}},
        "containerSecurityContext": {
            "privileged": False,
            "readOnlyRootFilesystem": True,
            "allowPrivilegeEscalation": False,
            "capabilities": {"add": ["CAP_KILL"], "drop": ["*"]},
        },
        "volumes": [{"name": "tmp", "emptyDir": {}}],
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
        "initContainers": [{"name": "wait", "image": "busybox", "command": ["true"]}],
        "extraEnvVars": [
            {"name": "KURED_NOTIFY_URL", "valueFrom": {"secretKeyRef": {"name": "n", "key": "url"}}}
        ],
        "extraArgs": {"drain-timeout": "30m", "force-reboot": ""},
        "configuration": {
            "rebootMethod": "signal",
            "timeZone": "Europe/Berlin",
            "startTime": "22:00",
            "endTime": "05:00",
            "rebootDays": ["sa", "su"],
            "period": "5m",
            "slackChannel": "{{ .Release.Namespace }}-alerts",
            "useRebootSentinelHostPath": False,
            "rebootSentinelCommand": "test -e /var/run/reboot-required",
            "concurrency": 2,
        },
    }


def kured_defaults() -> dict[str, Any]:
    chart = reference(("helm", "chart")).chart
    assert chart is not None
    values: dict[str, Any] = yaml.safe_load((chart / "values.yaml").read_text())
    return values


VALUES = {
    "no-values": lambda: None,
    "kured-defaults": kured_defaults,
    "every-key": lambda: every_key_values(1234, "x", "http://127.0.0.1:1234/prometheus-x"),
    "prometheus": prometheus_values,
    "realistic": realistic_values,
}


def agent_config(args: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """The agent's settings for the flags the chart rendered (``kured … --dump-config``), and ``env`` (what
    the Secret gives the pod): it accepts them."""
    done = subprocess.run(
        [str(Path(sys.executable).parent / "kured"), *args, "--dump-config"],
        env={"PATH": os.environ.get("PATH", ""), "KURED_NODE_ID": "n1", **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    config = json.loads(done.stdout)
    assert isinstance(config, dict)
    return config


def render(chart: str, values: dict[str, Any] | None, workdir: Path, *, release: str = "kured") -> list[Any]:
    ref = reference(("helm", "chart"))
    if chart == "pykured":
        ref = dataclasses.replace(ref, chart=CHART)
    _, objects = helm_template(
        ref, release=release, namespace="kube-system", values=values, workdir=workdir / chart
    )
    return objects


def _drop_nulls(value: Any) -> Any:
    """Keys whose value is null are absent to the API server (kured's ServiceAccount has `annotations:`)."""
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


def documented(obj: dict[str, Any], chart_label: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The object without its documented differences, and what they were."""
    obj = _drop_nulls(copy.deepcopy(obj))
    taken: dict[str, Any] = {}
    for meta in (obj["metadata"], obj.get("spec", {}).get("template", {}).get("metadata", {})):
        if "labels" in meta:
            assert meta["labels"].pop("helm.sh/chart") == chart_label
    if obj["kind"] == "DaemonSet":
        pod = obj["spec"]["template"]["spec"]
        container = pod["containers"][0]
        taken["image"] = container.pop("image")
        taken["args"] = [a for a in container.pop("args") if a != RELAY_ARG]
        # --reboot-method=signal: the agent's securityContext, and pykured's signal relay
        taken["relayed"] = len(pod["containers"]) > 1
        if "--reboot-method=signal" in taken["args"]:
            taken["agentSecurityContext"] = container.pop("securityContext")
        if taken["relayed"]:
            taken["relay"] = pod["containers"].pop(1)
            container["volumeMounts"].remove({"name": "relay", "mountPath": "/relay"})
            pod["volumes"] = [v for v in pod["volumes"] if v["name"] != "relay"]
        taken["securityContext"] = pod.pop("securityContext", None)
        env = container.get("env", [])
        taken["url_env"] = [
            e
            for e in env
            if e["name"] in URL_ENV and e.get("valueFrom", {}).get("secretKeyRef", {}).get("optional") is True
        ]
        container["env"] = [e for e in env if e not in taken["url_env"]]
    if obj["kind"] in ("ClusterRole", "Role"):
        taken["rules"] = obj.pop("rules")
    return obj, taken


RELAY_ARG = "--reboot-signal-relay=/relay/reboot"
UNPRIVILEGED = {
    "privileged": False,
    "runAsNonRoot": True,
    "runAsUser": 65532,
    "runAsGroup": 65532,
    "readOnlyRootFilesystem": True,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
}


def by_key(objects: list[Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(o["kind"], o["metadata"]["name"]): o for o in objects}


def compare(
    values: dict[str, Any] | None, workdir: Path, *, extra_args: list[str], release: str = "kured"
) -> None:
    """pykured's render is kured's plus exactly the documented differences."""
    kured = by_key(render("kured", values, workdir, release=release))
    ours = by_key(render("pykured", values, workdir, release=release))
    full = next(name for kind, name in kured if kind == "DaemonSet")
    urls = {
        key: value
        for key, value in (
            ("notify-url", ((values or {}).get("configuration") or {}).get("notifyUrl")),
            ("slack-hook-url", ((values or {}).get("configuration") or {}).get("slackHookUrl")),
            ("prometheus-url", ((values or {}).get("configuration") or {}).get("prometheusUrl")),
        )
        if value
    }
    assert set(ours) == set(kured) | added_objects(full, secret=bool(urls)), "kured's kinds and names, plus"
    for key, theirs in kured.items():
        mine, added = documented(ours[key], CHART_LABEL)
        base, removed = documented(theirs, KURED_CHART_LABEL)
        assert mine == base, key
        if key[0] == "DaemonSet":
            image = (values or {}).get("image", {})
            repository = image.get("repository") or PYKURED_IMAGE
            assert added["image"] == f"{repository}:{image.get('tag') or __version__}"
            assert added["securityContext"] == SECCOMP and removed["securityContext"] is None
            signal = "agentSecurityContext" in removed
            assert added["relayed"] is signal and removed["relayed"] is False
            if signal:  # the one privilege moves to the relay; the agent with the host's files has none
                assert removed["agentSecurityContext"] == (values or {})["containerSecurityContext"]
                assert added["agentSecurityContext"] == UNPRIVILEGED
                assert added["relay"]["args"] == ["signal-relay", "--relay=/relay/reboot"]
                assert added["relay"]["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["KILL"]}
                assert added["relay"]["volumeMounts"] == [{"name": "relay", "mountPath": "/relay"}]
            # the notification URLs: out of the arguments, into the Secret and the environment
            kept = [arg for arg in removed["args"] if not arg.startswith(URL_FLAGS)]
            assert len(removed["args"]) - len(kept) == len(urls)
            assert not any(arg.startswith(URL_FLAGS) for arg in added["args"])
            assert not any(value in arg for arg in added["args"] for value in urls.values())
            extra_count = len(values.get("extraArgs", {})) if values else 0
            cut = len(kept) - extra_count
            assert added["args"] == kept[:cut] + extra_args + kept[cut:]
            secret = f"{full}-notify"
            assert added["url_env"] == ([
                {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key, "optional": True}}}
                for name, key in URL_ENV.items()
            ] if urls else [])  # fmt: skip
            if urls:
                assert ours[("Secret", secret)]["stringData"] == {
                    key: value.replace("{{ .Release.Namespace }}", "kube-system")
                    for key, value in urls.items()
                }
        if key[0] == "ClusterRole":
            assert added["rules"] == default_cluster_rules("kube-system", full)
        if key[0] == "Role":
            assert added["rules"] == default_role_rules(key[1])
    if ("Role", f"{full}-events") in ours:
        assert ours[("Role", f"{full}-events")]["rules"] == EVENTS_RULES
        assert ours[("Role", f"{full}-events")]["metadata"]["namespace"] == "default"


@pytest.mark.parametrize("name", list(VALUES))
def test_same_values_same_objects_but_the_documented_differences(name: str, tmp_path: Path) -> None:
    compare(VALUES[name](), tmp_path, extra_args=DEFAULT_ARGS)


def test_a_release_name_without_kured_and_the_name_overrides(tmp_path: Path) -> None:
    compare(None, tmp_path / "a", extra_args=DEFAULT_ARGS, release="ops")
    compare({"nameOverride": "reboots"}, tmp_path / "b", extra_args=DEFAULT_ARGS, release="ops")
    compare({"fullnameOverride": "node-reboots"}, tmp_path / "c", extra_args=DEFAULT_ARGS, release="ops")


def test_kured_s_lock_and_no_additions(tmp_path: Path) -> None:
    """``pykured: {lockBackend: daemonset, events: false, watchNode: false, rbac: {kuredRules: true}}``:
    kured's RBAC exactly plus the marker that grants nothing (the admission policies stay, and are the only
    objects added)."""
    values = {
        "pykured": {
            "lockBackend": "daemonset",
            "events": False,
            "watchNode": False,
            "rbac": {"kuredRules": True},
        }
    }
    assert by_key(render("pykured", values, tmp_path))
    kured = by_key(render("kured", values, tmp_path))
    ours = by_key(render("pykured", values, tmp_path))
    assert set(ours) == set(kured) | added_objects("kured", events=False)
    for key, theirs in kured.items():
        mine, added = documented(ours[key], CHART_LABEL)
        base, removed = documented(theirs, KURED_CHART_LABEL)
        assert mine == base
        if "rules" in added:
            marker = [marker_rule("kube-system", "kured")] if key[0] == "ClusterRole" else []
            assert added["rules"] == removed["rules"] + marker, key
        if "args" in added:
            assert added["args"] == [*removed["args"], "--lock-backend=daemonset", "--events=false"]


def test_every_pykured_setting(tmp_path: Path) -> None:
    values = {
        "pykured": {
            "lockBackend": "lease",
            "leasePrefix": "reboot-slot",
            "policyConfigMap": "kured-policy",
            "maintenanceWindows": [
                "FREQ=MONTHLY;BYDAY=+2TU;BYHOUR=1;DURATION=4h",
                "FREQ=DAILY;BYHOUR=3;DURATION=1h",
            ],
            "blackouts": ["2026-12-23T16:00/2027-01-02T10:00 year-end freeze"],
            "resumeRolls": True,
            "blockingNodeLabels": ["example.com/reboot-hold", "tier=db"],
            "blockingNodeAnnotations": ["example.com/why"],
            "concurrencyLabel": "topology.kubernetes.io/zone",
            "concurrencyPerLabel": 2,
            "maxUnavailable": "25%",
            "settle": {
                "podSelectors": ["app=ceph-osd"],
                "pdbs": True,
                "nodesReady": True,
                "prometheusQuery": "ALERTS{severity='critical'}",
                "timeout": "45m",
            },
            "hooks": {
                "beforeReboot": ["a.example/ok", "b.example/ok"],
                "afterReboot": ["c.example/ok"],
                "timeout": "2h",
            },
            "fleetlock": {"listen": "127.0.0.1:3333", "group": "workers"},
            "alertmanager": {
                "url": "http://alertmanager.monitoring:9093",
                "silenceDuringReboot": 'node="{{.Node}}", severity!~"page|ticket"',
                "silenceMax": "90m",
            },
            "logLevel": "debug",
            "requesterClusterRole": {"create": True},
        },
        "extraArgs": {"period": "5m"},
        "configuration": {"prometheusUrl": "http://prometheus.monitoring:9090"},
    }
    ours = by_key(render("pykured", values, tmp_path))
    args = ours[("DaemonSet", "kured")]["spec"]["template"]["spec"]["containers"][0]["args"]
    own = args[args.index("--concurrency=1") + 1 :]
    assert own == [
        "--lock-backend=lease",
        "--lease-prefix=reboot-slot",
        "--policy-configmap=kured-policy",
        "--concurrency-label=topology.kubernetes.io/zone",
        "--concurrency-per-label=2",
        "--settle-prometheus-query=ALERTS{severity='critical'}",
        "--settle-timeout=45m",
        "--reboot-hook-timeout=2h",
        "--fleetlock-listen=127.0.0.1:3333",
        "--fleetlock-group=workers",
        "--log-level=debug",
        "--max-unavailable=25%",
        "--maintenance-window=FREQ=MONTHLY;BYDAY=+2TU;BYHOUR=1;DURATION=4h",
        "--maintenance-window=FREQ=DAILY;BYHOUR=3;DURATION=1h",
        "--blackout=2026-12-23T16:00/2027-01-02T10:00 year-end freeze",
        "--settle-pod-selector=app=ceph-osd",
        "--blocking-node-label=example.com/reboot-hold",
        "--blocking-node-label=tier=db",
        "--blocking-node-annotation=example.com/why",
        "--before-reboot-annotations=a.example/ok,b.example/ok",
        "--after-reboot-annotations=c.example/ok",
        "--resume-rolls",
        "--settle-pdbs",
        "--settle-nodes-ready",
        '--silence-during-reboot=node="{{.Node}}", severity!~"page|ticket"',
        "--silence-max=90m",
        "--period=5m",
    ]
    # the Prometheus and Alertmanager URLs (credentials, if any) from the Secret, never an argument
    assert not any("monitoring:90" in arg for arg in args)
    assert ours[("Secret", "kured-notify")]["stringData"] == {
        "prometheus-url": "http://prometheus.monitoring:9090",
        "alertmanager-url": "http://alertmanager.monitoring:9093",
    }
    env = ours[("DaemonSet", "kured")]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {
        e["name"]: e["valueFrom"]["secretKeyRef"]["key"]
        for e in env
        if "secretKeyRef" in e.get("valueFrom", {})
    } == URL_ENV
    cluster_rules = ours[("ClusterRole", "kured")]["rules"]
    assert {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]} in cluster_rules
    assert {
        "apiGroups": ["policy"],
        "resources": ["poddisruptionbudgets"],
        "verbs": ["list", "get"],
    } in cluster_rules
    role_rules = ours[("Role", "kured")]["rules"]
    assert role_rules == [
        # the lock slots by name (--concurrency 1: one), the rest bounded by the Lease admission policy
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["reboot-slot-0"],
            "verbs": ["get", "update"],
        },
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["list", "watch", "create"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "update"]},
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": ["kured-policy"],
            "verbs": ["get", "list", "watch", "update"],
        },
    ]
    leases = ours[("ValidatingAdmissionPolicy", "kured-agent-leases")]["spec"]
    assert leases["variables"][0] == {"name": "leasePrefix", "expression": "'reboot-slot-'"}
    nodes = {
        v["name"]: v["expression"]
        for v in ours[("ValidatingAdmissionPolicy", "kured-agent-nodes")]["spec"]["variables"]
    }
    assert nodes["hookAnnotations"] == "['a.example/ok', 'b.example/ok', 'c.example/ok']"
    assert nodes["rebootLabelKeys"] == "[]" and nodes["taintKeys"] == "[]"
    requester = ours[("ClusterRole", "kured-reboot-requester")]
    assert requester["rules"][0] == {
        "apiGroups": [""],
        "resources": ["nodes"],
        "verbs": ["get", "list", "patch"],
    }
    # and the agent accepts every one of these flags (and nothing else, as the chart renders them)
    secret = ours[("Secret", "kured-notify")]["stringData"]
    config = agent_config(args, {name: secret[key] for name, key in URL_ENV.items() if key in secret})
    assert config["alertmanager-url"] == "http://alertmanager.monitoring:9093"
    assert config["policy-configmap"] == "kured-policy"
    assert config["lock-backend"] == "lease"
    assert config["resume-rolls"] is True
    assert len(config["maintenance-window"]) == 2
    assert config["before-reboot-annotations"] == ["a.example/ok", "b.example/ok"]
    assert config["period"] == "5m0s"  # extraArgs come last: they win
    assert config["max-unavailable"] == "25%" and config["concurrency-per-label"] == 2


@pytest.mark.parametrize(
    ("pykured", "arg", "lists_nodes"),
    [({"maxUnavailable": 3}, "--max-unavailable=3", False), ({"maxUnavailable": 0}, None, False),
     ({"maxUnavailable": ""}, None, False),
     ({"lockBackend": "lease", "concurrencyLabel": "zone", "concurrencyPerLabel": "50%"},
      "--concurrency-per-label=50%", True),
     ({"lockBackend": "lease", "concurrencyLabel": "zone", "concurrencyPerLabel": 2},
      "--concurrency-per-label=2", False)],
    ids=["max-unavailable-number", "max-unavailable-0-off", "max-unavailable-empty-off", "per-label-share",
         "per-label-number"],
)  # fmt: skip
def test_budgets_render_their_flag_and_a_share_per_label_may_list_nodes(
    pykured: dict[str, Any], arg: str | None, lists_nodes: bool, tmp_path: Path
) -> None:
    ours = by_key(render("pykured", {"pykured": pykured}, tmp_path))
    args = ours[("DaemonSet", "kured")]["spec"]["template"]["spec"]["containers"][0]["args"]
    budgets = [a for a in args if a.startswith(("--max-unavailable", "--concurrency-per-label"))]
    assert budgets == ([arg] if arg else [])
    rule = {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}
    assert (rule in ours[("ClusterRole", "kured")]["rules"]) is lists_nodes


def helm(*args: str, workdir: Path, kubeconfig: str | None = None) -> subprocess.CompletedProcess[str]:
    ref: Reference = reference(("helm",))
    assert ref.helm is not None
    home = workdir / "helm-home"
    env = {
        **os.environ,
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }
    if kubeconfig:
        env["KUBECONFIG"] = kubeconfig
    return subprocess.run([str(ref.helm), *args], capture_output=True, text=True, env=env, timeout=300)


def test_helm_lint_is_clean(tmp_path: Path) -> None:
    done = helm("lint", "--strict", str(CHART), workdir=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 chart(s) failed" in done.stdout
    assert "[WARNING]" not in done.stdout and "[ERROR]" not in done.stdout


@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        ({"configuration": {"rebootDay": ["mo"]}}, "rebootDay"),
        ({"imag": {"tag": "1"}}, "imag"),
        ({"pykured": {"lockbackend": "lease"}}, "lockbackend"),
        ({"pykured": {"lockBackend": "leases"}}, "lockBackend"),
        ({"pykured": {"settle": {"pdb": True}}}, "pdb"),
        ({"service": {"typ": "NodePort"}}, "typ"),
        ({"pykured": {"imageDigest": "latest"}}, "imageDigest"),
        ({"pykured": {"maxUnavailable": "150%"}}, "maxUnavailable"),
        ({"pykured": {"maxUnavailable": "a quarter"}}, "maxUnavailable"),
        ({"pykured": {"concurrencyPerLabel": "0%"}}, "concurrencyPerLabel"),
    ],
    ids=[
        "configuration-typo",
        "top-level-typo",
        "pykured-typo",
        "bad-backend",
        "nested-typo",
        "service-typo",
        "digest-not-sha256",
        "max-unavailable-above-100",
        "max-unavailable-words",
        "per-label-zero-percent",
    ],
)
def test_the_schema_rejects_typos(values: dict[str, Any], complaint: str, tmp_path: Path) -> None:
    path = tmp_path / "values.yaml"
    path.write_text(json.dumps(values))
    done = helm("template", "kured", str(CHART), "-f", str(path), workdir=tmp_path)
    assert done.returncode != 0
    assert "values don't meet the specifications of the schema" in done.stderr
    assert complaint in done.stderr


def test_an_image_digest_pins_the_image_by_content(tmp_path: Path) -> None:
    digest = "sha256:" + "ab" * 32
    values = {
        "image": {"repository": "registry.example/pykured", "tag": "9.9"},
        "pykured": {"imageDigest": digest},
    }
    (ds,) = [o for o in render("pykured", values, tmp_path / "digest") if o["kind"] == "DaemonSet"]
    assert ds["spec"]["template"]["spec"]["containers"][0]["image"] == f"registry.example/pykured@{digest}"
    (ds,) = [
        o for o in render("pykured", {"image": values["image"]}, tmp_path / "tag") if o["kind"] == "DaemonSet"
    ]
    assert ds["spec"]["template"]["spec"]["containers"][0]["image"] == "registry.example/pykured:9.9"


def test_helm_package(tmp_path: Path) -> None:
    done = helm("package", str(CHART), "--destination", str(tmp_path), workdir=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / f"pykured-{__version__}.tgz").is_file()


def test_the_chart_s_admission_policies_are_the_kustomize_base_s(tmp_path: Path) -> None:
    """One set of rules: the chart's policies differ from kustomize/base/admission.yaml only in names, the
    install id in the marker they match (the release's, ``<namespace>/<fullname>``, kustomize's ``kured``),
    the lists taken from values, and the central FleetLock server (the chart runs none)."""
    base = Path(__file__).resolve().parents[2] / "kustomize" / "base" / "admission.yaml"
    theirs = {
        d["metadata"]["name"].removeprefix("pykured-"): d
        for d in yaml.safe_load_all(base.read_text())
        if d["kind"] == "ValidatingAdmissionPolicy"
    }
    rendered = by_key(render("pykured", None, tmp_path, release="ops"))
    ours = {name.removeprefix("ops-kured-"): obj for (kind, name), obj in rendered.items()
            if kind == "ValidatingAdmissionPolicy"}  # fmt: skip
    assert set(ours) == set(theirs) == set(POLICIES)
    for name in POLICIES:
        binding = rendered[("ValidatingAdmissionPolicyBinding", f"ops-kured-{name}")]["spec"]
        assert binding == {"policyName": f"ops-kured-{name}", "validationActions": ["Deny"]}
    for name, policy in theirs.items():
        spec, expected = ours[name]["spec"], policy["spec"]
        assert spec["validations"] == expected["validations"], name
        assert spec["matchConstraints"] == expected["matchConstraints"] and spec["failurePolicy"] == "Fail"
        variables = {v["name"]: v["expression"] for v in expected.get("variables", [])}
        if "central" in variables:
            variables["central"] = "false"
        if "leasePrefix" in variables:
            variables["leasePrefix"] = "'ops-kured-lock-'"
        assert {v["name"]: v["expression"] for v in spec.get("variables", [])} == variables, name
        if name == "reboot-requesters":
            assert spec["matchConditions"] == expected["matchConditions"]
            continue
        agents = "authorizer.group('pykured.dev').resource('agents').name('{}').check('use').allowed()"
        mine, admin = spec["matchConditions"]
        theirs_first, theirs_admin = expected["matchConditions"]
        assert admin == theirs_admin and admin["name"] == "not-a-cluster-admin", name
        assert mine["name"] == "pykured-agent"
        assert " ".join(mine["expression"].split()) == (
            "request.userInfo.username.startsWith('system:serviceaccount:') && "
            + agents.format("kube-system/ops-kured")
        ), name
        assert agents.format("kured") in theirs_first["expression"], name


def test_the_least_privilege_switches(tmp_path: Path) -> None:
    """``pykured.rbac.podsDelete`` (no eviction API), ``admissionPolicies: false``, an existing notification
    Secret, and the podSecurityContext; the schema refuses a typo under ``pykured.rbac``."""
    values = {
        "configuration": {"notifyUrl": "slack://token@channel"},
        "pykured": {
            "rbac": {"podsDelete": True},
            "admissionPolicies": False,
            "notificationSecret": "my-notify",
            "podSecurityContext": {"seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"}},
        },
    }
    ours = by_key(render("pykured", values, tmp_path))
    assert {"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]} in ours[("ClusterRole", "kured")][
        "rules"
    ]
    assert not any(kind.startswith("ValidatingAdmissionPolicy") for kind, _ in ours)
    assert not any(kind == "Secret" for kind, _ in ours), "an existing Secret: the chart makes none"
    pod = ours[("DaemonSet", "kured")]["spec"]["template"]["spec"]
    assert pod["securityContext"] == {"seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"}}
    env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in pod["containers"][0]["env"] if "valueFrom" in e
           and "secretKeyRef" in e["valueFrom"]}  # fmt: skip
    assert env == {name: {"name": "my-notify", "key": key, "optional": True} for name, key in URL_ENV.items()}
    assert not any("slack://" in arg for arg in pod["containers"][0]["args"])
    # with a Secret of the operator's, a Prometheus or Alertmanager URL in values is refused (lost otherwise)
    for url in (
        {"configuration": {"prometheusUrl": "http://p:9090"}},
        {"pykured": {"alertmanager": {"url": "http://a"}}},
    ):
        path = tmp_path / "lost.yaml"
        both = {**url, "pykured": {**url.get("pykured", {}), "notificationSecret": "my-notify"}}
        path.write_text(json.dumps(both))
        done = helm("template", "kured", str(CHART), "-f", str(path), workdir=tmp_path)
        assert done.returncode != 0 and "keys prometheus-url, alertmanager-url" in done.stderr, done.stderr
    path = tmp_path / "typo.yaml"
    path.write_text(json.dumps({"pykured": {"rbac": {"podDelete": True}}}))
    done = helm("template", "kured", str(CHART), "-f", str(path), workdir=tmp_path)
    assert done.returncode != 0 and "podDelete" in done.stderr


@pytest.mark.parametrize(
    ("steps", "pods_delete"),
    [(["delete", "quarantine"], True), (["quarantine"], False), ([], False)],
    ids=["delete-quarantine", "quarantine", "off"],
)
def test_drain_escalation_and_its_pods_delete_grant(
    steps: list[str], pods_delete: bool, tmp_path: Path
) -> None:
    """``pykured.drainEscalation``: the flag, and ``delete`` on pods only when the list includes delete; the
    agent accepts what the chart renders; the schema refuses a step that does not exist."""
    values = {"configuration": {"drainTimeout": "10m"}, "pykured": {"drainEscalation": steps}}
    ours = by_key(render("pykured", values, tmp_path))
    args = ours[("DaemonSet", "kured")]["spec"]["template"]["spec"]["containers"][0]["args"]
    flags = [a for a in args if a.startswith("--drain-escalation")]
    assert flags == ([f"--drain-escalation={','.join(steps)}"] if steps else [])
    delete = {"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]}
    assert (delete in ours[("ClusterRole", "kured")]["rules"]) is pods_delete
    assert agent_config(args)["drain-escalation"] == steps
    path = tmp_path / "typo.yaml"
    path.write_text(json.dumps({"pykured": {"drainEscalation": ["reboot"]}}))
    refused = helm("template", "kured", str(CHART), "-f", str(path), workdir=tmp_path)
    assert refused.returncode != 0 and "drainEscalation" in refused.stderr


def test_the_signal_method_renders_the_kustomize_signal_profile_s_two_containers(tmp_path: Path) -> None:
    """The chart's signal pod is the one ``kustomize/overlays/signal`` runs (which the real-node tier proves:
    ``tests/e2e/realnode/test_signal.py``): the same agent securityContext, the same relay container."""
    from pykured_dev.testenv.install import kustomize_base

    image = "example.test/pykured:1"
    values = {"image": {"repository": "example.test/pykured", "tag": "1", "pullPolicy": "Never"},
              "configuration": {"rebootMethod": "signal"}}  # fmt: skip
    chart = by_key(render("pykured", values, tmp_path))[("DaemonSet", "kured")]["spec"]["template"]["spec"]
    kustomize = next(
        d for d in kustomize_base(image, overlay="kustomize/overlays/signal") if d["kind"] == "DaemonSet"
    )
    overlay = kustomize["spec"]["template"]["spec"]
    assert [c["name"] for c in chart["containers"]] == [c["name"] for c in overlay["containers"]]
    assert chart["containers"][0]["securityContext"] == overlay["containers"][0]["securityContext"]
    assert chart["containers"][1] == overlay["containers"][1]
    assert RELAY_ARG in chart["containers"][0]["args"] and RELAY_ARG in overlay["containers"][0]["args"]
    relay = {v["name"]: v for v in chart["volumes"]}["relay"]
    assert relay == {v["name"]: v for v in overlay["volumes"]}["relay"]
    assert chart["hostPID"] is overlay["hostPID"] is True
    off = {**values, "pykured": {"signalRelay": False}}
    kured_shape = by_key(render("pykured", off, tmp_path / "off"))[("DaemonSet", "kured")]["spec"][
        "template"
    ]["spec"]
    assert [c["name"] for c in kured_shape["containers"]] == ["kured"]
    assert RELAY_ARG not in kured_shape["containers"][0]["args"]


@pytest.mark.parametrize(
    ("autoscalers", "args", "allowed"),
    [({}, [], ["cluster-autoscaler.kubernetes.io/scale-down-disabled", "karpenter.sh/do-not-disrupt"]),
     ({"clusterAutoscaler": "", "karpenter": "karpenter.sh/do-not-consolidate"},
      ["--cluster-autoscaler-annotation=", "--karpenter-annotation=karpenter.sh/do-not-consolidate"],
      ["karpenter.sh/do-not-consolidate"]),
     ({"clusterAutoscaler": "", "karpenter": ""},
      ["--cluster-autoscaler-annotation=", "--karpenter-annotation="], [])],
    ids=["default", "renamed-and-off", "both-off"],
)  # fmt: skip
def test_the_autoscaler_annotations_render_their_flags_and_the_policy_allows_those(
    autoscalers: dict[str, str], args: list[str], allowed: list[str], tmp_path: Path
) -> None:
    """``pykured.autoscalerAnnotations``: the agent's defaults render no flag; a name changed or ``""``
    renders its flag, and the Node policy allows the names the agent writes, no others."""
    ours = by_key(render("pykured", {"pykured": {"autoscalerAnnotations": autoscalers}}, tmp_path))
    rendered = ours[("DaemonSet", "kured")]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert [a for a in rendered if a.startswith(("--cluster-autoscaler", "--karpenter"))] == args
    assert parse(rendered, {"KURED_NODE_ID": "n1"}).autoscaler_annotations == tuple(allowed)
    nodes = {
        v["name"]: v["expression"]
        for v in ours[("ValidatingAdmissionPolicy", "kured-agent-nodes")]["spec"]["variables"]
    }
    assert nodes["autoscalerAnnotations"] == "[" + ", ".join(f"'{name}'" for name in allowed) + "]"
