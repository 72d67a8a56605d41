"""kured's Helm chart 6.1.0 with pykured's image: the render's own command, args, env and RBAC, beside kured.

``helm template`` renders the chart (offline): with its defaults, with a values file that sets every
``configuration.*`` key plus ``extraArgs``, ``extraEnvVars`` (a Secret and a ConfigMap reference, a plain
value) and the notification URL, and each of those with only ``image`` swapped to pykured's. Each render is
applied to the API server (``kubectl apply --server-side``) in its own namespace; its DaemonSet's pod template
(as stored) runs on simulated nodes with exactly its container's command, args and env (``KURED_NODE_ID``
from ``fieldRef: spec.nodeName``), as the render's ServiceAccount with the render's RBAC.

* ``chart-defaults``: kured (the default image) and pykured (image swapped) start and pass the chart's own
  readiness and liveness probes (``GET /metrics`` on the ``metrics`` port) and report
  ``kured_reboot_required`` for their node. The default reboot command is ``/bin/systemctl reboot``, which
  pykured's safe mode refuses to run even through a shim, so the full cycle runs with the values file.
* ``chart-every-key``: two nodes per side go through a whole reboot cycle (annotations, labels, drain of a
  pod, notifications, lock with ``--concurrency=2``); kured's and pykured's writes are compared: the lock
  annotation's JSON keys and types, the node annotations and labels, the notifications, the reboot command.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml

from pykured import __version__
from pykured_dev.eventually import eventually
from pykured_dev.testenv.history import Change, replay, shape
from pykured_dev.testenv.pods import PYKURED_IMAGE, PodTemplate
from pykured_dev.testenv.reference import CHART_VERSION, helm_template, reference
from tests.e2e.kured.support import (
    KURED_MAIN_TICK,
    SCENARIO_TIMEOUT,
    Campaign,
    Mixed,
    check_roll,
    scenario,
)
from tests.e2e.kured.values import LABEL, LOCK_ANNOTATION, REBOOT_COMMAND, TAINT, every_key_values

pytestmark = [pytest.mark.k8s, pytest.mark.slow, pytest.mark.timeout(SCENARIO_TIMEOUT + 90)]

PYKURED_VALUES = {"image": {"repository": PYKURED_IMAGE, "tag": __version__}}
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?(Z|[+-]\d\d:\d\d)$")


def _apply(c: Campaign, *, namespace: str, release: str, values: dict[str, Any] | None) -> PodTemplate:
    """Render, apply server-side, and return the DaemonSet's pod template as the API server stores it."""
    text, objects = helm_template(
        reference(), release=release, namespace=namespace, values=values, workdir=c.workdir / "helm"
    )
    assert {o["kind"] for o in objects} == {
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "DaemonSet",
    }
    c.k8s.kubectl("apply", "--server-side", "--field-manager=helm", "-n", namespace, "-f", "-", stdin=text)
    ds = c.k8s.kube().get(f"/apis/apps/v1/namespaces/{namespace}/daemonsets/{release}")
    return PodTemplate.of(ds)


def _wait_ready(c: Campaign, node: str, template: PodTemplate, *, timeout: float = 40) -> None:
    container = template.container
    port = int(container["ports"][0]["containerPort"])
    path = container["readinessProbe"]["httpGet"]["path"]
    assert eventually(lambda: c.fleet.probe(node, port, path), timeout=timeout, every=0.2), (
        f"{template.image} on {node} never passed its readiness probe"
    )


def _get_until(sandbox: Any, port: int, path: str, wanted: bytes) -> tuple[int, bytes]:
    """GET ``path`` until its body has ``wanted`` (or 30 s pass); the last answer."""
    answer: list[tuple[int, bytes]] = []

    def has() -> bool:
        answer[:] = [sandbox.http_get(port, path)]
        return wanted in answer[0][1]

    eventually(has, timeout=90, every=0.2)
    return answer[0]


@scenario("chart-defaults")
def chart_defaults(c: Campaign) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for side, values in (("kured", None), ("pykured", PYKURED_VALUES)):
        namespace = c.k8s.new_namespace(f"cd{side[0]}")
        release = f"kured-{namespace}"
        template = _apply(c, namespace=namespace, release=release, values=values)
        (node,) = c.k8s.add_nodes(f"{namespace}-n1")
        c.fleet.add_pod(node, template)
        _wait_ready(c, node, template)
        container = template.container
        port = int(container["ports"][0]["containerPort"])
        sandbox = c.fleet.slots[node].sandbox
        assert sandbox is not None
        path = container["livenessProbe"]["httpGet"]["path"]
        gauge = f'kured_reboot_required{{node="{node}"}} 0'.encode()
        status, metrics = _get_until(sandbox, port, path, gauge)  # set by the first pass after start-up
        argv = [*container.get("command", []), *container.get("args", [])]
        found[side] = {
            "node": node,
            "image": template.image,
            "argv": [a.replace(release, "<release>").replace(namespace, "<namespace>") for a in argv],
            "env": container.get("env"),
            "liveness": status,
            "metrics": metrics.decode(),
        }
        c.fleet.remove(node)
    return found


@scenario("chart-every-key")
def chart_every_key(c: Campaign) -> dict[str, Any]:
    k8s = c.k8s
    sides: dict[str, Any] = {}
    for side in ("kured", "pykured"):
        namespace = k8s.new_namespace(f"ce{side[0]}")
        k8s.kube().create(
            f"/api/v1/namespaces/{namespace}/secrets",
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "kured-notify"},
                "stringData": {"url": f"generic+http://127.0.0.1:{c.receiver.port}/notify-{side}"},
            },
        )
        k8s.kube().create(
            f"/api/v1/namespaces/{namespace}/configmaps",
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "kured-messages"},
                "data": {"uncordon": "%s is back (chart test)"},
            },
        )
        values = every_key_values(c.receiver.port, side, c.prometheus[side].url)
        if side == "pykured":
            values.update(PYKURED_VALUES)
        release = f"kured-{namespace}"
        template = _apply(c, namespace=namespace, release=release, values=values)
        nodes = k8s.add_nodes(f"{namespace}-n1", f"{namespace}-n2")
        for i, node in enumerate(nodes):
            k8s.create_pod(namespace, f"workload-{i}", node=node, grace=1)
            c.fleet.add_pod(node, template)
        m = Mixed(
            namespace=namespace,
            limit=2,
            kind=dict.fromkeys(nodes, side),
            ds=release,
            annotation=LOCK_ANNOTATION,
            taint=TAINT,
        )
        sides[side] = {"mixed": m, "template": template, "values": values}
    for info in sides.values():
        for node in info["mixed"].nodes:
            _wait_ready(c, node, info["template"])
    for info in sides.values():
        for node in info["mixed"].nodes:
            c.fleet.touch(node)
    for side, info in sides.items():
        m = info["mixed"]
        timeout = KURED_MAIN_TICK + 130 if side == "kured" else 60
        c.finish(m, timeout=timeout)
        info["pods"] = k8s.kube().get(f"/api/v1/namespaces/{m.namespace}/pods")["items"]
    return sides


# -- what the history says a side did to its nodes ---------------------------------------------------------


AUTOSCALER_MARKS = ("cluster-autoscaler.kubernetes.io/scale-down-disabled", "karpenter.sh/do-not-disrupt")
"""pykured's own extension, on by default: a node in its cycle is marked for the autoscalers (not kured)."""


def _pykureds_own(key: str) -> bool:
    return key.startswith("pykured.dev/") or key in AUTOSCALER_MARKS


def _node_story(changes: list[Change], nodes: list[str]) -> dict[str, Any]:
    """Per node: the kured-visible annotation keys ever set, final annotations, label values in order, and
    the autoscalers' marks ever set (pykured's extension, kept out of the comparison)."""
    keys: dict[str, list[str]] = {n: [] for n in nodes}
    marks: dict[str, set[str]] = {n: set() for n in nodes}
    labels: dict[str, list[str]] = {n: [] for n in nodes}
    final: dict[str, dict[str, str]] = {}
    for change, state in replay(changes):
        if change.kind != "Node" or change.key not in keys:
            continue
        meta = state.nodes[change.key]["metadata"]
        for key in meta.get("annotations") or {}:
            if key in AUTOSCALER_MARKS:
                marks[change.key].add(key)
            if not _pykureds_own(key) and key not in keys[change.key]:
                keys[change.key].append(key)
        value = (meta.get("labels") or {}).get(LABEL)
        if value and (not labels[change.key] or labels[change.key][-1] != value):
            labels[change.key].append(value)
        final[change.key] = {k: v for k, v in (meta.get("annotations") or {}).items() if not _pykureds_own(k)}
        final[change.key].update(
            {k: v for k, v in (meta.get("annotations") or {}).items() if k in AUTOSCALER_MARKS}
        )  # a mark left at the end is a difference
    return {"keys": keys, "labels": labels, "final": final, "marks": marks}


def _lock_value(changes: list[Change], key: str) -> str | None:
    value = None
    for change in changes:
        if change.kind == "DaemonSet" and change.key == key:
            value = (change.obj["metadata"].get("annotations") or {}).get(LOCK_ANNOTATION)
    return value


def test_every_configuration_key_of_the_chart_is_set() -> None:
    chart_dir = reference(("chart",)).chart
    assert chart_dir is not None
    chart = yaml.safe_load((chart_dir / "values.yaml").read_text())
    ours = every_key_values(1, "x", "http://127.0.0.1:1/prometheus-x")
    assert set(ours["configuration"]) == set(chart["configuration"])
    assert yaml.safe_load((chart_dir / "Chart.yaml").read_text())["version"] == CHART_VERSION


@pytest.mark.kured_scenario("chart-defaults")
def test_chart_defaults_kured_and_pykured_pass_the_charts_probes(kured: Campaign) -> None:
    found = kured.result("chart-defaults")
    assert found["kured"]["argv"] == found["pykured"]["argv"]
    assert found["kured"]["argv"] == [
        "/usr/bin/kured",
        "--ds-name=<release>",
        "--ds-namespace=<namespace>",
        "--metrics-port=8080",
        "--reboot-sentinel=/sentinel/reboot-required",
        "--reboot-command=/bin/systemctl reboot",
        "--log-format=text",
        "--concurrency=1",
    ]
    assert found["kured"]["env"] == found["pykured"]["env"]
    for side in ("kured", "pykured"):
        assert found[side]["liveness"] == 200
        line = f'kured_reboot_required{{node="{found[side]["node"]}"}} 0'
        assert line in found[side]["metrics"], (side, found[side]["metrics"][-500:])


@pytest.mark.kured_scenario("chart-every-key")
def test_chart_every_key_full_cycle_kured_and_pykured_write_the_same(kured: Campaign) -> None:
    sides = kured.result("chart-every-key")
    changes = kured.history.changes()
    stories = {}
    for side, info in sides.items():
        m: Mixed = info["mixed"]
        roll = check_roll(m)
        # the same argv apart from the image's entry point: the render's own arguments
        assert info["template"].container["command"] == ["/usr/bin/kured"]
        assert not roll.blocked  # two slots, two nodes: nobody waited
        # one reboot command per node, through kured's nsenter wrapping
        for node in m.nodes:
            assert m.nsenter[node] == [f"-m/proc/1/ns/mnt -- {REBOOT_COMMAND}"], m.nsenter
        # the workload pod was drained (evicted) from each node
        assert not [
            p["metadata"]["name"] for p in info["pods"] if p["metadata"]["name"].startswith("workload")
        ]
        story = _node_story(changes, m.nodes)
        for node in m.nodes:
            assert story["labels"][node] == ["pending", "done"], (side, story["labels"])
            final = story["final"][node]
            assert RFC3339.match(final["weave.works/kured-most-recent-reboot-needed"]), final
            assert "weave.works/kured-reboot-in-progress" not in final
            # pykured marks a node in its cycle for the autoscalers by default, under kured's chart too
            assert story["marks"][node] == (set(AUTOSCALER_MARKS) if side == "pykured" else set()), story
        values = [json.loads(v) for v in roll.lock_values]
        assert all(v["maxOwners"] == 2 for v in values)
        entries = [e for v in values for e in v["locks"]]
        assert all(e["TTL"] == 30 * 60 * 10**9 and RFC3339.match(e["created"]) for e in entries), entries
        stories[side] = {
            "value_keys": {json.dumps([(k, type(x).__name__) for k, x in v.items()]) for v in values},
            "entry_shapes": {json.dumps(shape(e)) for e in entries},
            "annotation_keys": {tuple(sorted(k)) for k in story["keys"].values()},
            "final_annotation_keys": {tuple(sorted(f)) for f in story["final"].values()},
            "final_lock": _lock_value(changes, f"{m.namespace}/{m.ds}"),
            "taints": {
                t["key"]
                for n in m.nodes
                for t in (state_node(changes, n).get("spec") or {}).get("taints") or []
            },
        }
        posts = kured.receiver.posts(f"/notify-{side}")
        bodies = sorted(p["body"].replace(n, "<node>") for p in posts for n in m.nodes if n in p["body"])
        stories[side]["notifications"] = bodies
        stories[side]["content_types"] = {p["content_type"] for p in posts}
        assert not kured.receiver.posts(f"/from-values-{side}"), "KURED_NOTIFY_URL must override notifyUrl"
        queried = [q for q in kured.prometheus[side].queries() if "ALERTS" in q]
        assert queried, f"{side} never asked Prometheus"
    assert stories["kured"]["notifications"] == sorted(
        ["Draining <node> (chart test)", "Rebooting <node> (chart test)", "<node> is back (chart test)"] * 2
    )
    differ = {
        k: (stories["kured"][k], stories["pykured"][k])
        for k in stories["kured"]
        if stories["kured"][k] != stories["pykured"][k]
    }
    assert not differ, f"kured vs pykured: {differ}"


def state_node(changes: list[Change], node: str) -> dict[str, Any]:
    """The last recorded version of ``node``."""
    last: dict[str, Any] = {}
    for change in changes:
        if change.kind == "Node" and change.key == node:
            last = change.obj
    return last
