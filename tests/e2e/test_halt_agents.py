"""Rolls that stop themselves, with real agents on simulated nodes: a node whose reboot never comes back
halts the fleet through the policy ConfigMap's halt (both lock backends, and under kustomize/base's RBAC and
admission policies with pod-bound tokens), ``pykured unfreeze`` lifts it once for good, and a per-node pause
stops one node only."""

from __future__ import annotations

import datetime
import io
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pykured.cli import agent as cli
from pykured.cli.plan import plan_main
from pykured.cli.rollout import rollout_main
from pykured.cli.status import status_main
from pykured.core.errors import NotFoundError
from pykured.fleet import freeze as freezecmd
from pykured.kube.client import Obj
from pykured.policy.source import configmaps_path
from tests.e2e.test_rbac_profiles import install, pod_bound_token, token_kubeconfig
from tests.fleets import MakeFleet, fleet_factory
from tests.receivers import serve_receiver
from tests.testenv import TestEnv

pytestmark = [pytest.mark.k8s, pytest.mark.slow]
POLICY = "kured-policy"


@pytest.fixture
def make_fleet(k8s: TestEnv, tmp_path: Path) -> Iterator[MakeFleet]:
    with fleet_factory(k8s, tmp_path, period="10s") as make:
        yield make


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[str]]]:
    """A real HTTP notification receiver on 127.0.0.1 (shoutrrr's generic service, JSON)."""
    receiver, stop = serve_receiver()
    yield receiver.json_url, receiver.bodies
    stop()


def policy_data(k8s: TestEnv, ns: str) -> dict[str, str]:
    try:
        obj = k8s.kube().request("GET", configmaps_path(ns, POLICY))
    except NotFoundError:
        return {}
    return dict(obj.get("data") or {})


def freeze_of(k8s: TestEnv, ns: str) -> dict[str, Any] | None:
    text = policy_data(k8s, ns).get("freeze")
    return json.loads(text) if text else None


def halt_of(k8s: TestEnv, ns: str) -> dict[str, Any] | None:
    text = policy_data(k8s, ns).get("halt")
    return json.loads(text) if text else None


def events(k8s: TestEnv, node: str) -> list[Obj]:
    found: list[Obj] = k8s.kube().get(
        "/api/v1/namespaces/default/events", query={"fieldSelector": f"involvedObject.name={node}"}
    )["items"]
    return found


def not_ready(k8s: TestEnv, node: str) -> None:
    """The node went down for its reboot and stays down (its kubelet posts nothing more)."""
    condition = {"type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": "down"}
    k8s.kube().patch_node_status(node, {"status": {"conditions": [condition]}})


def cordoned(k8s: TestEnv, node: str) -> bool:
    return bool(k8s.kube().get_node(node)["spec"].get("unschedulable"))


def under_the_policies(k8s: TestEnv, tmp_path: Path, ns: str, nodes: list[str]) -> dict[str, str]:
    """kustomize/base's RBAC, policy ConfigMap and admission policies moved into ``ns`` (narrowed to it:
    :func:`~tests.e2e.test_rbac_profiles.install`), the second lock slot granted as kustomize/README.md says
    for --concurrency=2; a kubeconfig per node with a token bound to a pod of the DaemonSet on it."""
    install(k8s, "kustomize/base", ns, tmp_path)
    slots = {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["kured-lock-1"],
             "verbs": ["get", "update"]}  # fmt: skip
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "slot-1"},
            "rules": [slots]}  # fmt: skip
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "slot-1"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "slot-1"},
        "subjects": [{"kind": "ServiceAccount", "name": "kured", "namespace": ns}],
    }
    k8s.kube().create(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles", role)
    k8s.kube().create(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings", binding)
    return {
        n: token_kubeconfig(k8s, tmp_path / f"{n}.json", pod_bound_token(k8s, ns, "kured", n, ds="kured"))
        for n in nodes
    }


@pytest.mark.parametrize("backend", ["daemonset", "lease", "lease-under-the-policies"])
def test_a_node_that_does_not_come_back_halts_the_fleet_until_unfreeze(
    k8s: TestEnv, make_fleet: MakeFleet, receiver: tuple[str, list[str]], backend: str, tmp_path: Path
) -> None:
    url, seen = receiver
    lock = backend.removesuffix("-under-the-policies")
    args = (f"--lock-backend={lock}", "--concurrency=2", "--reboot-deadline=15s", f"--notify-url={url}")
    kubeconfigs: dict[str, str] = {}
    policies = backend != lock
    fleet, ns, (doomed, *others) = make_fleet(
        3, args=args, start=not policies, kubeconfig=(lambda n: kubeconfigs[n]) if policies else None
    )
    if policies:  # the halt is the agents' own write to the ConfigMap: the policy on it admits it
        kubeconfigs.update(under_the_policies(k8s, tmp_path / "rbac", ns, [doomed, *others]))
        for node in (doomed, *others):
            fleet.start(node)
    else:
        k8s.kube().request(
            "POST",
            configmaps_path(ns),
            body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": POLICY}},
        )
    fleet.paused.add(doomed)  # its reboot command runs, but the simulated host never comes back
    fleet.touch(doomed)
    request = fleet.slots[doomed].request
    assert fleet.wait_for(request.exists, timeout=60), fleet.log_text(doomed)
    fleet.kill(doomed)
    not_ready(k8s, doomed)

    reason = f"node {doomed} did not come back within 15s"
    assert fleet.wait_for(lambda: (halt_of(k8s, ns) or {}).get("halted") == doomed, timeout=60), "\n".join(
        fleet.log_text(n)[-2000:] for n in others
    )
    record = halt_of(k8s, ns)
    began = k8s.kube().get_node(doomed)["metadata"]["annotations"]["pykured.dev/reboot-triggered-at"]
    assert record is not None and record["reason"] == reason and "until" not in record
    assert record["began"] == began and freeze_of(k8s, ns) is None  # the halt's own key
    assert record["by"] in (f"pykured on {n}" for n in others)
    halter = record["by"].removeprefix("pykured on ")
    assert fleet.wait_for(lambda: "Halting the fleet" in fleet.log_text(halter), timeout=60)
    assert f"Halting the fleet: {reason} (reboot began " in fleet.log_text(halter)
    assert "still on the boot it was rebooted from): no new reboot starts until `pykured unfreeze`" in (
        fleet.log_text(halter)
    )
    assert sum("Halting the fleet" in fleet.log_text(n) for n in others) == 1  # exactly one agent halts
    assert fleet.wait_for(
        lambda: any(e["reason"] == "RebootHalted" and reason in e["message"] for e in events(k8s, doomed)),
        timeout=60,
    )
    assert fleet.wait_for(lambda: any(reason in s for s in seen), timeout=90), seen
    out, err = io.StringIO(), io.StringIO()
    where = (f"--kubeconfig={k8s.admin_kubeconfig}", f"--ds-namespace={ns}")
    assert status_main([doomed, *where], out=out, err=err) == 0, err.getvalue()
    first = out.getvalue().splitlines()[0]
    assert first.startswith(f"HALTED: halted by pykured on {halter} at ") and first.endswith(
        f": {reason}; no reboot starts until `pykured unfreeze`"
    )
    # the plan says the same, and, for a user who may only get nodes, what it cannot read
    out = io.StringIO()
    assert plan_main([doomed, *others, *where], out=out, err=err) == 0, err.getvalue()
    lines = out.getvalue().splitlines()
    assert lines[0].startswith(f"HALTED: halted by pykured on {halter} at ")
    assert "holds the lock (rebooting)" in next(line for line in lines if line.startswith(doomed))
    assert "estimated end: none while halted (1 to reboot)" in lines
    get_nodes = {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}
    viewer = k8s.user_with_cluster_role("viewer", [get_nodes])
    out = io.StringIO()
    mine = (f"--kubeconfig={k8s.kubeconfig_for(viewer)}", f"--ds-namespace={ns}")
    assert plan_main([doomed, *mine], out=out, err=err) == 0, err.getvalue()
    assert out.getvalue().endswith(
        f"cannot read: policy ConfigMap {ns}/{POLICY}: forbidden (403) for this user: a freeze or a halt "
        "would not show here\n"
    )

    # nothing else starts a reboot: a free slot remains (--concurrency=2), but the freeze blocks it
    for node in others:
        fleet.touch(node)
    assert fleet.wait_for(
        lambda: all("Reboot blocked: halted by pykured on" in fleet.log_text(n) for n in others), timeout=60
    ), "\n".join(fleet.log_text(n)[-2000:] for n in others)
    assert all(fleet.slots[n].reboots == 0 and not cordoned(k8s, n) for n in others)
    assert not any(fleet.slots[n].request.exists() for n in others)

    # the operator lifts the halt: the roll goes on with the slot left; the same reboot does not halt again
    lifted = freezecmd.unfreeze(k8s.kube(), namespace=ns, name=POLICY)
    assert lifted is not None and lifted.halted == doomed
    assert json.loads(policy_data(k8s, ns)["halts-lifted"]) == [{"node": doomed, "began": began}]
    assert fleet.wait_for(lambda: all(fleet.slots[n].reboots == 1 for n in others), timeout=120), "\n".join(
        fleet.log_text(n)[-2000:] for n in others
    )
    assert halt_of(k8s, ns) is None and freeze_of(k8s, ns) is None
    logs = "".join(fleet.log_text(n) for n in others)
    assert logs.count("Halting the fleet") == 1, logs
    annotations = k8s.kube().get_node(doomed)["metadata"]["annotations"]
    assert "pykured.dev/halted-for" not in annotations  # no agent wrote the node it halted for
    if policies:
        assert "ValidatingAdmissionPolicy" not in logs, logs


def test_a_paused_node_waits_while_the_fleet_rolls(
    k8s: TestEnv, make_fleet: MakeFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet, ns, (paused, other) = make_fleet(2, args=("--lock-backend=lease",))
    now = datetime.datetime.now(datetime.UTC)
    record = freezecmd.pause_nodes(k8s.kube(), [paused], reason="disk swap", until=None, now=now)
    assert record.reason == "disk swap" and record.by == "pykured-admin"
    fleet.touch(paused)
    fleet.touch(other)
    assert fleet.wait_for(lambda: fleet.slots[other].reboots == 1, timeout=60), fleet.log_text(other)
    assert fleet.wait_for(
        lambda: "Reboot blocked: paused by pykured-admin at " in fleet.log_text(paused), timeout=90
    ), fleet.log_text(paused)
    assert fleet.slots[paused].reboots == 0 and not cordoned(k8s, paused)
    freezecmd.unpause_nodes(k8s.kube(), [paused])
    assert fleet.wait_for(lambda: fleet.slots[paused].reboots == 1, timeout=60), fleet.log_text(paused)
    # both agents watch the default policy ConfigMap: `pykured freeze` counts them
    capsys.readouterr()
    where = [f"--kubeconfig={k8s.admin_kubeconfig}", f"--ds-namespace={ns}"]
    assert cli.main(["freeze", "--reason", "INC-7", *where]) == 0
    printed = capsys.readouterr().out
    assert "frozen by pykured-admin at " in printed and "\nhonoured by 2 of " in printed, printed
    assert cli.main(["unfreeze", *where]) == 0


def rollout(k8s: TestEnv, *argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = rollout_main([*argv, "--interval=0.2", f"--kubeconfig={k8s.admin_kubeconfig}"], out=out, err=err)
    return code, out.getvalue() + err.getvalue()


def requested(k8s: TestEnv, node: str) -> bool:
    return "pykured.dev/reboot-request" in k8s.kube().get_node(node)["metadata"].get("annotations", {})


def test_a_canary_goes_alone_and_the_rest_follow_once_it_soaked(k8s: TestEnv, make_fleet: MakeFleet) -> None:
    pool = k8s.unique("pool")
    fleet, ns, nodes = make_fleet(3, args=("--lock-backend=lease",), labels={"pool": pool})
    first, *rest = sorted(nodes)  # none was ever rebooted: the roll's order is by name
    seen: dict[str, bool] = {}
    stop = threading.Event()

    def watch_rest() -> None:  # while the canary is on its way, the others carry no request
        while fleet.slots[first].reboots == 0 and not stop.wait(0.1):
            seen["early"] = seen.get("early", False) or any(requested(k8s, n) for n in rest)

    watcher = threading.Thread(target=watch_rest, daemon=True)
    watcher.start()
    code, text = rollout(
        k8s, "-l", f"pool={pool}", "--reason", "kernel", "--canary=1", "--canary-soak=2s",
        f"--ds-namespace={ns}", "--lease-prefix=kured-lock",
    )  # fmt: skip
    stop.set()
    watcher.join(timeout=10)
    assert code == 0, text
    assert f"{first}: reboot requested" in text and "(canary)" in text
    assert f"canaries passed ({first}); requesting the rest" in text
    assert seen == {"early": False}
    assert fleet.wait_for(lambda: all(fleet.slots[n].reboots == 1 for n in nodes), timeout=120), "\n".join(
        fleet.log_text(n)[-1500:] for n in nodes
    )


def test_a_failed_canary_halts_its_rollout(k8s: TestEnv, make_fleet: MakeFleet) -> None:
    pool = k8s.unique("pool")
    fleet, ns, nodes = make_fleet(3, args=("--lock-backend=lease",), labels={"pool": pool})
    first, *rest = sorted(nodes)
    fleet.paused.add(first)  # its reboot command does nothing: the request is never satisfied
    code, text = rollout(
        k8s, "-l", f"pool={pool}", "--reason", "kernel", "--canary=1", "--canary-timeout=5s",
        f"--ds-namespace={ns}", "--id=canary-fails",
    )  # fmt: skip
    assert code == 1, text
    assert f"rollout canary-fails: canary {first} failed: still waiting for its reboot after 5s" in text
    assert "the other 2 node(s) were not requested" in text
    record = halt_of(k8s, ns)  # a halt, as an agent's: only pykured unfreeze lifts it
    assert record is not None and record["reason"].startswith(f"rollout canary-fails: canary {first} failed")
    assert not any(requested(k8s, n) for n in rest)
    assert all(fleet.slots[n].reboots == 0 for n in nodes)
