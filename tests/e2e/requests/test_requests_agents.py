"""Reboot requests bound to a boot, end to end: ``pykured request-reboot``/``rollout`` against the real API
server, real agents on simulated nodes (``pykured.testenv.fleet``), and what the API server recorded.
"""

from __future__ import annotations

import datetime
import io
import json
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pykured.cli.request_reboot import request_reboot_main
from pykured.cli.rollout import rollout_main
from pykured.requests import record as rebootrequest
from pykured.status import agent as agentstatus
from pykured_dev.testenv.fleet import Fleet
from pykured_dev.testenv.procs import free_port
from tests.fleets import MakeFleet, fleet_factory, since_last_start
from tests.receivers import serve_receiver
from tests.testenv import TestEnv

pytestmark = [pytest.mark.k8s, pytest.mark.slow]
LOCK = "weave.works/kured-node-lock"
REQ = rebootrequest.REQUEST_ANNOTATION
DONE = rebootrequest.SATISFIED_ANNOTATION


@pytest.fixture
def make_fleet(k8s: TestEnv, tmp_path: Path) -> Iterator[MakeFleet]:
    with fleet_factory(k8s, tmp_path, period="2s") as make:
        yield make


def decided_no_reboot(fleet: Fleet, node: str) -> Callable[[], bool]:
    """The latest agent's own decision, logged: nothing to do (the signal to check that nothing happened)."""
    return lambda: "Reboot not required" in since_last_start(fleet, node)


def node_annotations(k8s: TestEnv, node: str) -> dict[str, str]:
    return dict(k8s.kube().get_node(node)["metadata"].get("annotations", {}))


def run(main: Callable[..., int], *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def request(k8s: TestEnv, *argv: str, kubeconfig: str | None = None) -> tuple[int, str, str]:
    return run(request_reboot_main, *argv, f"--kubeconfig={kubeconfig or k8s.admin_kubeconfig}")


def events(k8s: TestEnv, node: str) -> list[dict[str, Any]]:
    query = {"fieldSelector": f"involvedObject.name={node}"}
    return list(k8s.kube().get("/api/v1/namespaces/default/events", query=query)["items"])


def done_and_settled(k8s: TestEnv, fleet: Fleet, node: str) -> Callable[[], bool]:
    def check() -> bool:
        obj = k8s.kube().get_node(node)
        ann = obj["metadata"].get("annotations", {})
        return (
            fleet.slots[node].reboots >= 1
            and REQ not in ann
            and DONE in ann
            and not obj["spec"].get("unschedulable")
            and "pykured.dev/unschedulable-before" not in ann
            and "pykured.dev/release-after" not in ann
        )

    return check


@pytest.fixture
def webhook() -> Iterator[tuple[str, list[str]]]:
    """A real HTTP notification receiver on 127.0.0.1 (shoutrrr's generic service, JSON)."""
    receiver, stop = serve_receiver()
    yield receiver.json_url, receiver.bodies
    stop()


def test_a_request_leads_to_exactly_one_reboot_and_is_then_gone(
    k8s: TestEnv, make_fleet: MakeFleet, webhook: tuple[str, list[str]]
) -> None:
    url, seen = webhook
    fleet, ns, (node,) = make_fleet(args=(f"--notify-url={url}",))
    boot = k8s.boot_id(node)
    code, out, err = request(k8s, node, "--reason", "kernel 6.12")
    assert code == 0 and err == "", err
    assert f"{node}: reboot requested for bootID {boot}: kernel 6.12" in out
    stored = rebootrequest.parse_request(node_annotations(k8s, node)[REQ])
    assert (
        stored.boot_id == boot and stored.reason == "kernel 6.12" and stored.requested_by == "pykured-admin"
    )
    code, out, _ = request(k8s, node, "--reason", "kernel 6.12")  # idempotent
    assert code == 0 and "already requested" in out
    assert fleet.wait_for(done_and_settled(k8s, fleet, node), timeout=60), fleet.log_text(node)
    assert fleet.wait_for(decided_no_reboot(fleet, node), timeout=90), fleet.log_text(node)  # no second one
    assert fleet.slots[node].reboots == 1 and fleet.requests(node) == 1
    ann = node_annotations(k8s, node)
    assert REQ not in ann
    record = rebootrequest.parse_satisfied(ann[DONE])
    assert record.request.boot_id == boot and record.new_boot_id == k8s.boot_id(node) != boot
    assert lock_value(k8s, ns) is None
    satisfied = [e for e in events(k8s, node) if e["reason"] == "RebootRequestSatisfied"]
    assert len(satisfied) == 1 and "kernel 6.12" in satisfied[0]["message"]
    assert fleet.wait_for(lambda: any("rebooted as requested: kernel 6.12" in s for s in seen), timeout=60), (
        seen
    )
    log = fleet.log_text(node)
    assert "Reboot requested for node" in log and "Reboot request of node" in log and "satisfied" in log
    status = agentstatus.decode(ann.get(agentstatus.STATUS_ANNOTATION))
    assert status is not None and status.last_boot_id == boot and status.boot_id == k8s.boot_id(node)


def lock_value(k8s: TestEnv, ns: str) -> str | None:
    value = k8s.kube().get_daemonset(ns, "kured")["metadata"].get("annotations", {}).get(LOCK)
    return str(value) if value is not None else None


def put_request(k8s: TestEnv, node: str, *, boot_id: str, reason: str = "old") -> str:
    now = datetime.datetime.now(datetime.UTC)
    req = rebootrequest.make_request(boot_id=boot_id, reason=reason, requested_by="someone", now=now)
    text = rebootrequest.format_request(req)
    k8s.kube().patch_node(node, {"metadata": {"annotations": {REQ: text}}})
    return text


def test_a_request_for_an_old_boot_is_ignored_and_cleaned(k8s: TestEnv, make_fleet: MakeFleet) -> None:
    fleet, _ns, (node,) = make_fleet()
    put_request(k8s, node, boot_id="a-boot-this-node-never-had")
    assert fleet.wait_for(lambda: REQ not in node_annotations(k8s, node), timeout=60), fleet.log_text(node)
    # The pass that removed it classified it first: it never counted as a reason to reboot.
    assert fleet.wait_for(lambda: "Ignoring and removing" in fleet.log_text(node), timeout=60)
    assert fleet.slots[node].reboots == 0 and fleet.requests(node) == 0
    assert "Ignoring and removing the reboot request" in fleet.log_text(node)
    assert DONE not in node_annotations(k8s, node)
    assert any(e["reason"] == "RebootRequestStale" for e in events(k8s, node))


def test_an_unreadable_request_is_ignored_and_cleaned(k8s: TestEnv, make_fleet: MakeFleet) -> None:
    fleet, _ns, (node,) = make_fleet()
    k8s.kube().patch_node(node, {"metadata": {"annotations": {REQ: "please reboot"}}})
    assert fleet.wait_for(lambda: REQ not in node_annotations(k8s, node), timeout=60), fleet.log_text(node)
    assert fleet.slots[node].reboots == 0


def closed_window_args() -> tuple[str, ...]:
    tomorrow = (datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=1)).strftime("%a")[:2].lower()
    return (f"--reboot-days={tomorrow}", "--time-zone=UTC")


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return str(response.read().decode())


def test_a_request_in_a_closed_window_waits_for_it(k8s: TestEnv, make_fleet: MakeFleet) -> None:
    port = free_port()
    fleet, _ns, (node,) = make_fleet(args=(*closed_window_args(), f"--metrics-port={port}"))
    assert request(k8s, node, "--reason", "cve fix")[0] == 0

    def waiting() -> bool:
        status = agentstatus.decode(node_annotations(k8s, node).get(agentstatus.STATUS_ANNOTATION))
        return status is not None and status.request == "cve fix" and status.window_opens is not None

    assert fleet.wait_for(waiting, timeout=60), fleet.log_text(node)  # published after its decision
    assert fleet.slots[node].reboots == 0 and REQ in node_annotations(k8s, node)
    metrics = scrape(port)
    assert f'kured_reboot_required{{node="{node}"}} 1.0' in metrics
    assert 'pykured_reboot_request_info{reason="cve fix",rollout=""} 1.0' in metrics
    assert "pykured_reboot_request_pending 1.0" in metrics
    # The window opens (the operator widens it): the same request is then carried out, once.
    fleet.args = [a for a in fleet.args if not a.startswith(("--reboot-days", "--time-zone"))]
    fleet.restart(node)
    assert fleet.wait_for(done_and_settled(k8s, fleet, node), timeout=60), fleet.log_text(node)
    assert fleet.slots[node].reboots == 1


def test_cancel_before_the_lock_is_taken(k8s: TestEnv, make_fleet: MakeFleet) -> None:
    fleet, ns, (node,) = make_fleet()
    ds_patch = {"metadata": {"annotations": {LOCK: '{"nodeID":"manual"}'}}}
    k8s.kube().request("PATCH", f"/apis/apps/v1/namespaces/{ns}/daemonsets/kured", body=ds_patch,
                       content_type="application/merge-patch+json")  # fmt: skip
    assert request(k8s, node, "--reason", "kernel 6.12")[0] == 0
    assert fleet.wait_for(lambda: "Lock already held: manual" in fleet.log_text(node), timeout=60)
    code, out, _ = request(k8s, node, "--cancel")
    assert code == 0 and f"{node}: request withdrawn" in out
    assert REQ not in node_annotations(k8s, node)
    code, out, _ = request(k8s, node, "--cancel")
    assert code == 0 and f"{node}: no request" in out
    k8s.kube().request("PATCH", f"/apis/apps/v1/namespaces/{ns}/daemonsets/kured",
                       body={"metadata": {"annotations": {LOCK: None}}},
                       content_type="application/merge-patch+json")  # fmt: skip
    after_cancel = lambda: "Reboot not required" in fleet.log_text(node).split("Lock already held")[-1]  # noqa: E731
    assert fleet.wait_for(after_cancel, timeout=90), fleet.log_text(node)  # the agent's decision, logged
    assert fleet.slots[node].reboots == 0 and fleet.requests(node) == 0
    assert lock_value(k8s, ns) is None, "the node never took the lock"
    assert not k8s.kube().get_node(node)["spec"].get("unschedulable")


@pytest.mark.parametrize("step", ["requested", "locked", "rebooting", "rebooted"])
def test_agent_restarted_at_each_step_of_a_requested_cycle(
    k8s: TestEnv, make_fleet: MakeFleet, step: str
) -> None:
    args = {"locked": ("--drain-delay=4s",), "rebooted": ("--lock-release-delay=4s",)}.get(step, ())
    fleet, ns, (node,) = make_fleet(args=args, start=step != "requested")
    if step == "rebooting":
        fleet.paused.add(node)
    assert request(k8s, node, "--reason", f"restart at {step}")[0] == 0
    if step == "requested":
        fleet.start(node)
        assert fleet.wait_for(lambda: "Reboot requested for node" in fleet.log_text(node), timeout=60)
        fleet.restart(node)
    elif step == "locked":
        assert fleet.wait_for(lambda: node in (lock_value(k8s, ns) or ""), timeout=60), fleet.log_text(node)
        fleet.restart(node)
    elif step == "rebooting":
        assert fleet.wait_for(lambda: fleet.requests(node) == 1, timeout=60), fleet.log_text(node)
        fleet.restart(node)
        assert fleet.wait_for(lambda: "Waiting for reboot" in since_last_start(fleet, node), timeout=60)
        fleet.paused.discard(node)
    else:
        assert fleet.wait_for(lambda: "pykured.dev/release-after" in node_annotations(k8s, node), timeout=90)
        fleet.restart(node)
    assert fleet.wait_for(done_and_settled(k8s, fleet, node), timeout=60), fleet.log_text(node)
    assert fleet.wait_for(lambda: node not in (lock_value(k8s, ns) or ""), timeout=60)
    assert fleet.wait_for(decided_no_reboot(fleet, node), timeout=90), fleet.log_text(node)
    assert fleet.slots[node].reboots == 1, fleet.log_text(node)
    assert REQ not in node_annotations(k8s, node)


def test_zincati_hand_off(k8s: TestEnv, make_fleet: MakeFleet) -> None:
    fleet, _ns, (node,) = make_fleet(method="zincati")
    boot = k8s.boot_id(node)
    assert request(k8s, node, "--reason", "staged deployment")[0] == 0
    assert fleet.wait_for(done_and_settled(k8s, fleet, node), timeout=60), fleet.log_text(node)
    assert fleet.wait_for(decided_no_reboot(fleet, node), timeout=90), fleet.log_text(node)
    assert fleet.slots[node].reboots == 1
    assert not fleet.slots[node].marker.exists(), "the hand-off marker is removed after the reboot"
    done = rebootrequest.parse_satisfied(node_annotations(k8s, node)[DONE])
    assert done.request.boot_id == boot and done.new_boot_id != boot


# -- errors: one line, nothing changed -----------------------------------------------------------------------


def requester_kubeconfig(k8s: TestEnv, *, verbs: list[str]) -> str:
    user = k8s.user_with_cluster_role("user", [{"apiGroups": [""], "resources": ["nodes"], "verbs": verbs}])
    return k8s.kubeconfig_for(user)


def one_clear_line(err: str) -> str:
    assert "Traceback" not in err and err.count("\n") == 1, err
    return err


def test_a_requester_without_nodes_patch_gets_a_clear_error_and_nothing_changes(k8s: TestEnv) -> None:
    pool = k8s.unique("pool")
    nodes = k8s.add_nodes(k8s.unique("node"), k8s.unique("node"), labels={"pool": pool})
    assert request(k8s, nodes[0], "--reason", "by an admin")[0] == 0
    before = {n: node_annotations(k8s, n) for n in nodes}
    config = requester_kubeconfig(k8s, verbs=["get", "list"])
    attempts = (
        [nodes[1], "--reason", "x"],
        ["--selector", f"pool={pool}", "--reason", "x"],
        [nodes[0], "--cancel"],
    )
    for argv in attempts:
        code, out, err = request(k8s, *argv, kubeconfig=config)
        assert code == 1 and out == ""
        line = one_clear_line(err)
        assert "forbidden" in line and "may not patch nodes" in line and "nothing was changed" in line
    assert {n: node_annotations(k8s, n) for n in nodes} == before


def test_clear_errors_for_a_missing_node_and_a_node_without_boot_id(k8s: TestEnv) -> None:
    code, _out, err = request(k8s, "no-such-node", "--reason", "x")
    assert code == 1 and 'node "no-such-node" not found' in one_clear_line(err)
    (node,) = k8s.add_nodes(k8s.unique("node"))
    k8s.kube().patch_node_status(node, {"status": {"nodeInfo": {"bootID": ""}}})
    code, _out, err = request(k8s, node, "--reason", "x")
    assert code == 1 and "report no status.nodeInfo.bootID" in one_clear_line(err)
    assert REQ not in node_annotations(k8s, node)
    with pytest.raises(SystemExit) as usage:  # neither NODE, --selector nor --all: a usage error, exit 2
        run(request_reboot_main, "--reason", "x")
    assert usage.value.code == 2


def test_inside_the_agents_pod_the_node_comes_from_kured_node_id_with_kureds_rbac(
    k8s: TestEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    (node,) = k8s.add_nodes(k8s.unique("node"))
    ns = k8s.new_namespace("kured")
    k8s.apply_rbac_kured(ns)  # the agent's own RBAC: get/patch on nodes, no list
    user, groups = k8s.kured_identity(ns)
    monkeypatch.setenv("KURED_NODE_ID", node)
    code, out, err = request(k8s, "--reason", "from the pod", kubeconfig=k8s.kubeconfig_for(user, groups))
    assert code == 0 and node in out, err
    stored = rebootrequest.parse_request(node_annotations(k8s, node)[REQ])
    assert stored.reason == "from the pod" and stored.requested_by == user


# -- a rollout ----------------------------------------------------------------------------------------------


def test_a_rollout_of_six_nodes_at_concurrency_two(k8s: TestEnv, make_fleet: MakeFleet) -> None:
    pool = k8s.unique("pool")
    fleet, _ns, nodes = make_fleet(6, args=("--concurrency=2",), labels={"pool": pool})
    boots = {n: k8s.boot_id(n) for n in nodes}
    start_rv = k8s.kube().list_nodes()["metadata"]["resourceVersion"]
    rid = "kernel-612-test"
    code, out, err = run(rollout_main, "--selector", f"pool={pool}", "--reason", "kernel 6.12",
                         "--id", rid, f"--kubeconfig={k8s.admin_kubeconfig}")  # fmt: skip
    assert code == 0 and f"rollout {rid}: reboot requested on 6 node(s)" in out, err

    def complete() -> bool:
        code, out, _ = run(rollout_main, "status", rid, "-o", "json",
                           f"--kubeconfig={k8s.admin_kubeconfig}")  # fmt: skip
        return code == 0 and json.loads(out)["complete"]

    assert fleet.wait_for(complete, timeout=150, interval=1), {n: fleet.log_text(n)[-2000:] for n in nodes}
    code, out, _ = run(rollout_main, "status", rid, f"--kubeconfig={k8s.admin_kubeconfig}")
    assert f"rollout {rid} (kernel 6.12): 6/6 rebooted" in out
    final = {n: k8s.boot_id(n) for n in nodes}
    assert all(final[n] != boots[n] for n in nodes)
    assert all(fleet.slots[n].reboots == 1 for n in nodes)
    # The API server's watch history, from before the fleet existed: never more than 2 nodes down.
    most, down, seen_boot = 0, set(), dict(boots)
    for event in k8s.kube().watch_nodes(resource_version=start_rv, timeout_seconds=3):
        obj = event.get("object", {})
        name = obj.get("metadata", {}).get("name")
        if name not in boots or event.get("type") not in ("ADDED", "MODIFIED"):
            continue
        ready = any(
            c["type"] == "Ready" and c["status"] == "True" for c in obj["status"].get("conditions", [])
        )
        is_down = bool(obj["spec"].get("unschedulable")) or not ready
        seen_boot[name] = obj["status"]["nodeInfo"]["bootID"]
        if is_down:
            down.add(name)
        else:
            down.discard(name)
        most = max(most, len(down))
        if seen_boot == final and not down:
            break
    assert seen_boot == final
    assert 1 <= most <= 2, most


@pytest.mark.parametrize("how", ["replace", "cancel"])
def test_a_request_the_node_rebooted_out_of_keeps_its_record_when_replaced_or_withdrawn(
    k8s: TestEnv, how: str
) -> None:
    """The node rebooted for its request (pykured's memory names the boot it left) and its agent has not
    settled it yet: a newer request, or ``--cancel``, writes its satisfied record in the same patch. A
    request for a boot the node was never known to be in is replaced without one."""
    (node,) = k8s.add_nodes(k8s.unique("node"))
    left = k8s.boot_id(node)
    first = put_request(k8s, node, boot_id=left, reason="first")
    k8s.reboot_node(node)
    k8s.kube().patch_node(node, {"metadata": {"annotations": {"pykured.dev/reboot-boot-id": left}}})
    argv = [node, "--reason", "second"] if how == "replace" else [node, "--cancel"]
    code, _out, err = request(k8s, *argv)
    assert code == 0, err
    ann = node_annotations(k8s, node)
    done = rebootrequest.parse_satisfied(ann[DONE])
    assert done.request == rebootrequest.parse_request(first)
    assert (done.request.boot_id, done.new_boot_id) == (left, k8s.boot_id(node))
    if how == "replace":
        assert rebootrequest.parse_request(ann[REQ]).boot_id == k8s.boot_id(node)
    else:
        assert REQ not in ann
    k8s.kube().patch_node(node, {"metadata": {"annotations": {DONE: None}}})
    put_request(k8s, node, boot_id="a-boot-this-node-never-had")
    assert request(k8s, *argv)[0] == 0
    assert DONE not in node_annotations(k8s, node)


# -- a request repeated while the first reboot completes ---------------------------------------------------


@pytest.fixture
def make_fleet_3s(k8s: TestEnv, tmp_path: Path) -> Iterator[MakeFleet]:
    with fleet_factory(k8s, tmp_path, period="3s") as make:
        yield make


def ask_again_while_rebooting(k8s: TestEnv, fleet: Fleet, node: str, reason: str) -> list[dict[str, str]]:
    """On ``node``'s first reboot, once its new bootID is posted and before its agent is back, run
    ``pykured request-reboot NODE --reason REASON`` again; returns the Node's annotations right after."""
    seen: list[dict[str, str]] = []

    def again(rebooted: str) -> None:
        if rebooted != node or seen:
            return
        code, _out, err = request(k8s, node, "--reason", reason)
        assert code == 0, err
        seen.append(node_annotations(k8s, node))

    fleet.on_reboot = again
    return seen


def test_a_request_repeated_while_the_first_reboot_completes_is_carried_out_and_both_are_recorded(
    k8s: TestEnv, make_fleet_3s: MakeFleet
) -> None:
    """``request-reboot r1 --reason X`` twice, the second landing as r1's first reboot completes: it is bound
    to the new boot and replaces the first, whose satisfied record is written in the same patch. There is no
    sentinel, so no loop back-off: r1 reboots again for the second request, at once, and that one is
    satisfied in turn."""
    fleet, _ns, nodes = make_fleet_3s(3, args=("--lock-backend=lease",))
    r1 = nodes[0]
    first_boot = k8s.boot_id(r1)
    seen = ask_again_while_rebooting(k8s, fleet, r1, "X")
    assert request(k8s, r1, "--reason", "X")[0] == 0
    assert fleet.wait_for(lambda: bool(seen), timeout=60), fleet.log_text(r1)
    second = rebootrequest.parse_request(seen[0][REQ])
    first_done = rebootrequest.parse_satisfied(seen[0][DONE])
    assert second.boot_id != first_boot and second.reason == "X"
    assert (first_done.request.boot_id, first_done.new_boot_id) == (first_boot, second.boot_id)

    def second_done() -> bool:
        ann = node_annotations(k8s, r1)
        if REQ in ann or DONE not in ann:
            return False
        return rebootrequest.parse_satisfied(ann[DONE]).request.boot_id == second.boot_id

    assert fleet.wait_for(second_done, timeout=60), fleet.log_text(r1)  # not --sentinel-loop-backoff (1h)
    assert fleet.wait_for(decided_no_reboot(fleet, r1), timeout=90), fleet.log_text(r1)
    assert fleet.slots[r1].reboots == 2 and all(fleet.slots[n].reboots == 0 for n in nodes[1:])
    log = fleet.log_text(r1)
    assert (
        "sentinel" not in log.split("Kubernetes Reboot Daemon", 2)[-1].lower() or "Reboot sentinel" not in log
    )
    assert "Reboot sentinel still present" not in log and "backoff-until" not in str(
        node_annotations(k8s, r1)
    )
    assert "RebootLoopBackoff" not in [e["reason"] for e in events(k8s, r1)]
    satisfied = [e["message"] for e in events(k8s, r1) if e["reason"] == "RebootRequestSatisfied"]
    assert len(satisfied) == 1 and second.boot_id in satisfied[0]  # the first's was settled by the requester


def test_a_rollout_started_meanwhile_reboots_every_node_and_counts_r1(
    k8s: TestEnv, make_fleet_3s: MakeFleet
) -> None:
    """The same repeated request, then a rollout of the three nodes while r1 still has it: r1 is not held
    back, so the rollout completes, r1 counted once, rebooted."""
    pool = k8s.unique("pool")
    fleet, _ns, nodes = make_fleet_3s(3, args=("--lock-backend=lease",), labels={"pool": pool})
    r1 = nodes[0]
    seen = ask_again_while_rebooting(k8s, fleet, r1, "X")
    assert request(k8s, r1, "--reason", "X")[0] == 0
    assert fleet.wait_for(lambda: bool(seen), timeout=60), fleet.log_text(r1)
    rid = "after-a-repeated-request"
    code, out, err = run(rollout_main, "--selector", f"pool={pool}", "--reason", "kernel 6.12",
                         "--id", rid, f"--kubeconfig={k8s.admin_kubeconfig}")  # fmt: skip
    assert code == 0 and f"rollout {rid}: reboot requested on 3 node(s)" in out, err

    def status() -> dict[str, Any]:
        code, out, _ = run(rollout_main, "status", rid, "-o", "json",
                           f"--kubeconfig={k8s.admin_kubeconfig}")  # fmt: skip
        return dict(json.loads(out)) if code == 0 else {}

    assert fleet.wait_for(lambda: status().get("complete") is True, timeout=120, interval=1), {
        n: fleet.log_text(n)[-2000:] for n in nodes
    }
    final = status()
    assert (final["done"], final["total"]) == (3, 3)
    assert {n["node"] for n in final["nodes"]} == set(nodes)
    assert fleet.slots[r1].reboots >= 2 and all(fleet.slots[n].reboots == 1 for n in nodes[1:])
    assert "Reboot sentinel still present" not in fleet.log_text(r1)
