"""The reboot cycle end to end: real pykured agent processes on simulated nodes of the real apiserver.

Each agent is ``python -m pykured`` in safe mode with a shim nsenter; "reboots" are done by the fleet
supervisor (agent killed, sentinel gone, new bootID, agent restarted). Nothing touches this machine.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pykured_dev.eventually import eventually
from pykured_dev.testenv.fleet import Fleet
from tests.fleets import MakeFleet, fleet_factory, since_last_start
from tests.revisions import flips, lock_freed, version_of
from tests.testenv import TestEnv

pytestmark = [pytest.mark.k8s, pytest.mark.slow]
LOCK = "weave.works/kured-node-lock"
BACKING_OFF = "backing off after a reboot that did not clear the sentinel"  # the loop's decision (debug log)
GAVE_UP = "backing off after a reboot that never happened"  # the decision after giving up (debug log)


@pytest.fixture
def make_fleet(k8s: TestEnv, tmp_path: Path) -> Iterator[MakeFleet]:
    with fleet_factory(k8s, tmp_path, period="10s") as make:
        yield make


def node_obj(k8s: TestEnv, node: str) -> dict[str, Any]:
    obj: dict[str, Any] = k8s.kube().get_node(node)
    return obj


def pykured_annotations(k8s: TestEnv, node: str) -> dict[str, str]:
    """The cycle's memory on the Node (not the simulated node's mark, the agent's status or the roll's record,
    which stay after a cycle)."""
    annotations = node_obj(k8s, node)["metadata"].get("annotations", {})
    return {
        k: v
        for k, v in annotations.items()
        if k.startswith("pykured.dev/")
        and k not in ("pykured.dev/simulated", "pykured.dev/status", "pykured.dev/roll")
    }


def settled(k8s: TestEnv, fleet: Fleet, node: str, reboots: int = 1) -> Callable[[], bool]:
    def check() -> bool:
        obj = node_obj(k8s, node)
        return (
            fleet.slots[node].reboots >= reboots
            and not obj["spec"].get("unschedulable")
            and not pykured_annotations(k8s, node)
        )

    return check


def lock_value(k8s: TestEnv, ns: str) -> str | None:
    value = k8s.kube().get_daemonset(ns, "kured")["metadata"].get("annotations", {}).get(LOCK)
    return None if value is None else str(value)


@pytest.mark.parametrize("method", ["command", "signal", "zincati"])
def test_full_cycle_for_each_reboot_method(k8s: TestEnv, make_fleet: MakeFleet, method: str) -> None:
    fleet, ns, (node,) = make_fleet(
        method=method, args=("--annotate-nodes", "--post-reboot-node-labels=rebooted=yes")
    )
    k8s.create_pod(k8s.new_namespace(), "app", node=node)
    fleet.touch(node)
    assert fleet.wait_for(settled(k8s, fleet, node), timeout=60), fleet.log_text(node)
    obj = node_obj(k8s, node)
    assert fleet.slots[node].reboots == 1
    assert obj["metadata"]["labels"]["rebooted"] == "yes"
    assert "weave.works/kured-reboot-in-progress" not in obj["metadata"]["annotations"]
    assert "weave.works/kured-most-recent-reboot-needed" in obj["metadata"]["annotations"]
    assert lock_value(k8s, ns) is None
    log = fleet.log_text(node)
    assert "Triggering reboot for node" in log and "Uncordoned node" in log
    if method == "zincati":
        assert not fleet.slots[node].marker.exists(), "the hand-off marker is removed after the reboot"
    events = k8s.kube().get(
        "/api/v1/namespaces/default/events", query={"fieldSelector": f"involvedObject.name={node}"}
    )["items"]
    reasons = {e["reason"] for e in events}
    assert {"LockAcquired", "Draining", "Rebooting", "Uncordoned"} <= reasons, reasons


def test_prefer_no_schedule_taint_while_waiting_for_the_lock(k8s: TestEnv, make_fleet: MakeFleet) -> None:
    key = "weave.works/kured-node-reboot"
    fleet, _ns, (first, second) = make_fleet(2, args=(f"--prefer-no-schedule-taint={key}",))

    def tainted(node: str) -> bool:
        taints = node_obj(k8s, node)["spec"].get("taints") or []
        return any(t["key"] == key and t["effect"] == "PreferNoSchedule" for t in taints)

    fleet.paused.add(first)
    fleet.touch(first)
    assert fleet.wait_for(lambda: fleet.requests(first) == 1, timeout=90), fleet.log_text(first)
    fleet.touch(second)
    assert fleet.wait_for(lambda: tainted(second), timeout=90), fleet.log_text(second)
    assert "Lock already held: " + first in fleet.log_text(second)
    fleet.paused.discard(first)
    assert fleet.wait_for(settled(k8s, fleet, second), timeout=60), fleet.log_text(second)
    assert not tainted(second)
    assert not tainted(first)


def test_an_administrators_cordon_is_kept(k8s: TestEnv, make_fleet: MakeFleet) -> None:
    fleet, _ns, (node,) = make_fleet()
    k8s.kube().patch_node(node, {"spec": {"unschedulable": True}})
    fleet.touch(node)
    assert fleet.wait_for(
        lambda: fleet.slots[node].reboots == 1 and not pykured_annotations(k8s, node), timeout=60
    ), fleet.log_text(node)
    fleet.wait_for(lambda: "Leaving node" in fleet.log_text(node), timeout=90)  # its decision, logged
    assert node_obj(k8s, node)["spec"]["unschedulable"] is True
    assert "Leaving node" in fleet.log_text(node)


def test_concurrency_one_never_drains_two_nodes_at_once(k8s: TestEnv, make_fleet: MakeFleet) -> None:
    fleet, _ns, nodes = make_fleet(3, args=("--lock-backend=lease",))
    most = 0
    for node in nodes:
        fleet.touch(node)

    def all_rebooted() -> bool:  # and, on the way, the most nodes ever cordoned at once
        nonlocal most
        most = max(most, sum(1 for n in nodes if node_obj(k8s, n)["spec"].get("unschedulable")))
        return all(s.reboots for s in fleet.slots.values())

    eventually(all_rebooted, timeout=90)
    assert all(fleet.slots[n].reboots == 1 for n in nodes)
    assert most == 1


def test_pod_restart_while_waiting_for_the_reboot_does_not_reboot_twice(
    k8s: TestEnv, make_fleet: MakeFleet
) -> None:
    fleet, _ns, (node,) = make_fleet(args=("--reboot-retry-delay=30s",))
    fleet.paused.add(node)  # the host takes its time to go down
    fleet.touch(node)
    assert fleet.wait_for(lambda: fleet.requests(node) == 1, timeout=90), fleet.log_text(node)
    fleet.restart(node)
    fleet.wait_for(lambda: "Waiting for reboot" in since_last_start(fleet, node), timeout=90)
    assert fleet.requests(node) == 1, "a restarted agent must not trigger the reboot again at once"
    assert "Waiting for reboot" in fleet.log_text(node).split("Kubernetes Reboot Daemon")[-1]
    fleet.paused.discard(node)
    assert fleet.wait_for(settled(k8s, fleet, node), timeout=90), fleet.log_text(node)
    assert fleet.requests(node) == 1


def test_pod_restart_during_a_blocked_drain_finishes_the_cycle(k8s: TestEnv, make_fleet: MakeFleet) -> None:
    fleet, _ns, (node,) = make_fleet()
    apps = k8s.new_namespace()
    k8s.create_pod(apps, "guarded", node=node, labels={"app": "guarded"})
    k8s.create_pdb(apps, "guard", {"app": "guarded"}, min_available=1)
    k8s.set_pdb_status(apps, "guard", disruptions_allowed=0)
    fleet.touch(node)
    assert fleet.wait_for(lambda: node_obj(k8s, node)["spec"].get("unschedulable") is True, timeout=90)
    fleet.restart(node)
    # The restarted agent resumes the drain and meets the PodDisruptionBudget.
    fleet.wait_for(lambda: "error when evicting pods" in since_last_start(fleet, node), timeout=90)
    assert fleet.slots[node].reboots == 0
    k8s.set_pdb_status(apps, "guard", disruptions_allowed=1)
    assert fleet.wait_for(settled(k8s, fleet, node), timeout=60), fleet.log_text(node)
    assert fleet.slots[node].reboots == 1


def test_pod_restart_during_the_release_delay_keeps_the_release_time(
    k8s: TestEnv, make_fleet: MakeFleet
) -> None:
    fleet, ns, (node,) = make_fleet(args=("--lock-release-delay=6s",))
    fleet.touch(node)
    assert fleet.wait_for(lambda: "pykured.dev/release-after" in pykured_annotations(k8s, node), timeout=60)
    release_after = pykured_annotations(k8s, node)["pykured.dev/release-after"]
    assert lock_value(k8s, ns) is not None
    fleet.restart(node)
    assert fleet.wait_for(lambda: lock_value(k8s, ns) is None, timeout=90), fleet.log_text(node)
    assert node_obj(k8s, node)["spec"].get("unschedulable") is not True
    assert release_after  # the stored time, not a delay restarted in memory, decided the release
    assert fleet.slots[node].reboots == 1


@pytest.mark.parametrize("force", [False, True], ids=["no-force", "force-reboot"])
def test_pdb_blocked_drain(k8s: TestEnv, make_fleet: MakeFleet, force: bool) -> None:
    args = ("--drain-timeout=3s", *(("--force-reboot",) if force else ()))
    fleet, ns, (node,) = make_fleet(args=args)
    apps = k8s.new_namespace()
    k8s.create_pod(apps, "guarded", node=node, labels={"app": "guarded"})
    k8s.create_pdb(apps, "guard", {"app": "guarded"}, min_available=1)
    k8s.set_pdb_status(apps, "guard", disruptions_allowed=0)
    fleet.touch(node)
    if force:
        assert fleet.wait_for(lambda: fleet.slots[node].reboots == 1, timeout=60), fleet.log_text(node)
        assert fleet.wait_for(settled(k8s, fleet, node), timeout=90)
    else:
        assert fleet.wait_for(lambda: "Unable to cordon or drain" in fleet.log_text(node), timeout=60)
        assert fleet.wait_for(
            lambda: lock_value(k8s, ns) is None and not node_obj(k8s, node)["spec"].get("unschedulable"),
            timeout=90,
        )
        assert fleet.slots[node].reboots == 0


def test_pod_blocker_blocks(k8s: TestEnv, make_fleet: MakeFleet) -> None:
    fleet, ns, (node,) = make_fleet(args=("--blocking-pod-selector=app=blocker",))
    k8s.create_pod(k8s.new_namespace(), "blocker", node=node, labels={"app": "blocker"})
    fleet.touch(node)
    assert fleet.wait_for(
        lambda: "Reboot blocked: matching pods: [blocker]" in fleet.log_text(node), timeout=90
    )
    assert lock_value(k8s, ns) is None
    assert fleet.slots[node].reboots == 0


def test_sentinel_still_present_after_reboot_backs_off(k8s: TestEnv, make_fleet: MakeFleet) -> None:
    fleet, ns, (node,) = make_fleet(args=("--log-level=debug",))
    fleet.keep_sentinel = True  # kured #976: `! needs-restarting` without the binary stays true forever
    fleet.touch(node)
    assert fleet.wait_for(lambda: "kured #976" in fleet.log_text(node), timeout=60), fleet.log_text(node)
    fleet.wait_for(lambda: BACKING_OFF in fleet.log_text(node), timeout=90)  # the next pass decided to wait
    assert fleet.slots[node].reboots == 1
    assert lock_value(k8s, ns) is None
    notes = node_obj(k8s, node)["metadata"]["annotations"]
    assert "pykured.dev/backoff-until" in notes and notes.get("pykured.dev/backoff-reason") == "sentinel"


def test_reboot_that_never_happens_is_retried_once_then_given_up(k8s: TestEnv, make_fleet: MakeFleet) -> None:
    fleet, ns, (node,) = make_fleet(args=("--log-level=debug",))
    fleet.paused.add(node)  # the reboot command "succeeds" but the host never reboots
    fleet.touch(node)
    assert fleet.wait_for(lambda: "giving up this cycle" in fleet.log_text(node), timeout=60), fleet.log_text(
        node
    )
    assert fleet.requests(node) == 2
    assert fleet.wait_for(
        lambda: lock_value(k8s, ns) is None and not node_obj(k8s, node)["spec"].get("unschedulable"),
        timeout=60,
    )
    # the next pass decided to wait, naming the back-off it waits for (not the sentinel's loop guard)
    assert fleet.wait_for(lambda: GAVE_UP in fleet.log_text(node), timeout=90), fleet.log_text(node)
    assert BACKING_OFF not in fleet.log_text(node)
    assert node_obj(k8s, node)["metadata"]["annotations"].get("pykured.dev/backoff-reason") == "no-reboot"
    assert fleet.requests(node) == 2, "backing off: no third attempt"


def test_kured_rbac_with_the_charts_default_arguments(k8s: TestEnv, make_fleet: MakeFleet) -> None:
    """The "swap the image in kured's Helm chart" path: kured's RBAC, the chart's default render."""
    holder: dict[str, str] = {}

    def kubeconfig(_node: str) -> str:
        return holder["path"]

    fleet, ns, (node,) = make_fleet(
        kubeconfig=kubeconfig,
        start=False,
        args=(
            "--ds-name=kured",
            "--metrics-port=0",
            "--reboot-command=/bin/systemctl reboot",
            "--log-format=text",
            "--concurrency=1",
        ),
    )
    k8s.apply_rbac_kured(ns)
    holder["path"] = k8s.kubeconfig_for(*k8s.kured_identity(ns))
    fleet.start(node)
    fleet.touch(node)
    # The fleet's reboot command comes after the chart's on the command line, so it wins (last value wins, as
    # in pflag); everything else is the chart's default render, and only kured's RBAC is granted.
    assert fleet.wait_for(settled(k8s, fleet, node), timeout=60), fleet.log_text(node)
    assert fleet.slots[node].reboots == 1
    assert lock_value(k8s, ns) is None


def test_api_server_outage_mid_cycle_resumes_without_a_second_reboot(
    k8s: TestEnv, make_fleet: MakeFleet
) -> None:
    import os
    import signal

    fleet, ns, (node,) = make_fleet(args=("--reboot-retry-delay=2m",))
    fleet.paused.add(node)
    fleet.touch(node)
    assert fleet.wait_for(lambda: fleet.requests(node) == 1, timeout=90), fleet.log_text(node)
    apiserver = k8s.procs["kube-apiserver"].popen.pid  # our own child process, never this machine's
    seen = len(fleet.log_text(node))
    os.kill(apiserver, signal.SIGSTOP)
    try:
        # Until the agent's next request has timed out (the client's 30 s read timeout) and it logged so:
        # it sees errors, not a hang.
        fleet.wait_for(lambda: "Read timed out" in fleet.log_text(node)[seen:], timeout=90)
    finally:
        os.kill(apiserver, signal.SIGCONT)
    fleet.paused.discard(node)
    assert fleet.wait_for(settled(k8s, fleet, node), timeout=90), fleet.log_text(node)
    assert fleet.requests(node) == 1
    assert fleet.slots[node].starts == 2, "the agent never crashed: one start before the reboot, one after"
    assert lock_value(k8s, ns) is None


def test_a_corrupt_lock_annotation_blocks_safely_and_does_not_crash(
    k8s: TestEnv, make_fleet: MakeFleet
) -> None:
    fleet, ns, (node,) = make_fleet(start=False)
    ds = k8s.kube().get_daemonset(ns, "kured")
    ds["metadata"]["annotations"][LOCK] = '{"nodeID": 42, broken'
    k8s.kube().replace_daemonset(ns, "kured", ds)
    fleet.start(node)
    fleet.touch(node)
    assert fleet.wait_for(lambda: "Lock already held" in fleet.log_text(node), timeout=90), fleet.log_text(
        node
    )
    # Its next attempt (after waiting for a lock change, at most --period): it lived through the first.
    fleet.wait_for(lambda: fleet.log_text(node).count("Lock already held") >= 2, timeout=90)
    assert fleet.requests(node) == 0
    assert not node_obj(k8s, node)["spec"].get("unschedulable")
    proc = fleet.slots[node].proc
    assert proc is not None and proc.poll() is None, "still running"
    assert lock_value(k8s, ns) == '{"nodeID": 42, broken', "never overwritten"


@pytest.mark.parametrize("backend", ["daemonset", "lease"])
def test_sigterm_while_waiting_for_the_lock_exits_within_the_grace_period(
    k8s: TestEnv, make_fleet: MakeFleet, backend: str
) -> None:
    # Found by the soak: the lock wait (up to min(--period, 60 s)) ran in the loop's thread, so a pod deleted
    # while its agent waited for the lock outlived the 30 s grace period and was killed.
    fleet, _ns, (first, second) = make_fleet(2, args=(f"--lock-backend={backend}", "--period=1h"))
    fleet.paused.add(first)
    fleet.touch(first)
    assert fleet.wait_for(lambda: fleet.requests(first) == 1, timeout=90), fleet.log_text(first)
    fleet.touch(second)
    assert fleet.wait_for(lambda: "Lock already held" in since_last_start(fleet, second), timeout=90)
    proc = fleet.signal(second, signal.SIGTERM)
    assert proc is not None
    began = time.monotonic()
    proc.wait(timeout=60)
    # the pod's grace period (30 s); a lock wait lasts up to 60 s
    assert time.monotonic() - began < 30, "the agent waited for the lock instead of stopping"


def test_a_failed_drain_uncordons_before_it_releases_the_lock(k8s: TestEnv, make_fleet: MakeFleet) -> None:
    # Found by the soak: releasing first let another node cordon while this one still was (three nodes
    # unschedulable at --concurrency=2). The API server's revisions order the two writes.
    fleet, ns, (node,) = make_fleet(args=("--drain-timeout=3s",))
    apps = k8s.new_namespace()
    k8s.create_pod(apps, "guarded", node=node, labels={"app": "guarded"})
    k8s.create_pdb(apps, "guard", {"app": "guarded"}, min_available=1)
    k8s.set_pdb_status(apps, "guard", disruptions_allowed=0)
    start = k8s.kube().get_node(node)
    fleet.touch(node)
    assert fleet.wait_for(
        lambda: (
            "Unable to cordon or drain" in fleet.log_text(node)
            and lock_value(k8s, ns) is None
            and not node_obj(k8s, node)["spec"].get("unschedulable")
        ),
        timeout=90,
    ), fleet.log_text(node)
    kube = k8s.kube()
    seen = flips(kube, start)
    released = lock_freed(kube, "daemonset", ns, node, version_of(start))
    # exactly one cordon and one uncordon while it held the slot, the uncordon before the release
    assert [r for r in seen.cordons if r < released] == seen.cordons[:1], (released, seen)
    assert [r for r in seen.uncordons if r < released] == seen.uncordons[:1], (released, seen)
    assert seen.cordons[0] < seen.uncordons[0] < released, (released, seen)
