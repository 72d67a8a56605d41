"""Reboots from Node conditions, end to end: conditions written as Node Problem Detector writes them (a
strategic-merge PATCH of the Node's ``status.conditions`` through the status subresource), real agents on
simulated nodes (``pykured_dev.testenv.fleet``, whose hosts tell each agent the simulated boot's time), and
what the API server recorded: the need named in ``pykured status``, ``pykured plan``, the Event and the
metric; FOR respected; a condition older than the boot not a need; the per-node breaker's quarantine; the
fleet breaker's halt under kustomize/base's RBAC and admission policies."""

from __future__ import annotations

import datetime
import io
import re
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pykured.cli.plan import plan_main
from pykured.cli.status import status_main
from pykured.conditions import record as rules
from pykured.conditions.fleet import FROZEN, read_fleet
from pykured.core.errors import ForbiddenError
from pykured.core.times import format_rfc3339, parse_rfc3339
from pykured.fleet.quarantine import unquarantine
from pykured.kube.client import Kube
from pykured.policy.quarantine import QUARANTINED_ANNOTATION, quarantine_record
from pykured.status import agent as agentstatus
from tests.e2e.test_halt_agents import halt_of, under_the_policies
from tests.fleets import MakeFleet, fleet_factory
from tests.testenv import TestEnv

pytestmark = [pytest.mark.k8s, pytest.mark.slow]
S = datetime.timedelta(seconds=1)
HOLD = "example.com/hold"


@pytest.fixture
def make_fleet(k8s: TestEnv, tmp_path: Path) -> Iterator[MakeFleet]:
    with fleet_factory(k8s, tmp_path, period="5s") as make:
        yield make


def write_condition(
    k8s: TestEnv, node: str, kind: str, since: datetime.datetime, status: str = "True"
) -> None:
    """As Node Problem Detector's exporter writes a condition: a strategic-merge PATCH of the status
    subresource (conditions merge by type), with every field it sets."""
    stamp = format_rfc3339(since)
    condition = {
        "type": kind,
        "status": status,
        "reason": f"{kind}Detected",
        "message": f"{kind} found by the test's health agent",
        "lastHeartbeatTime": format_rfc3339(datetime.datetime.now(datetime.UTC)),
        "lastTransitionTime": stamp,
    }
    k8s.kube().patch_node_status(node, {"status": {"conditions": [condition]}})


def marks(k8s: TestEnv, node: str) -> dict[str, str]:
    return dict(k8s.kube().get_node(node)["metadata"].get("annotations") or {})


def status_of(k8s: TestEnv, node: str) -> agentstatus.AgentStatus | None:
    return agentstatus.decode(marks(k8s, node).get(agentstatus.STATUS_ANNOTATION))


def status_is(k8s: TestEnv, node: str, test: Callable[[agentstatus.AgentStatus], bool]) -> Callable[[], bool]:
    def check() -> bool:
        status = status_of(k8s, node)
        return status is not None and test(status)

    return check


def events(k8s: TestEnv, node: str, reason: str) -> list[dict[str, Any]]:
    query = {"fieldSelector": f"involvedObject.name={node}"}
    items = k8s.kube().get("/api/v1/namespaces/default/events", query=query)["items"]
    return [e for e in items if e.get("reason") == reason]


def metrics_text(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return str(response.read().decode())


def run(main: Callable[..., int], *argv: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    assert main(list(argv), out=out, err=err) == 0, err.getvalue()
    return out.getvalue()


def test_a_condition_since_the_boot_is_a_need_once_then_the_breaker_quarantines(
    k8s: TestEnv, make_fleet: MakeFleet
) -> None:
    """Three conditions configured, first to last: ``Stale`` (older than the boot), ``Fresh`` (since the boot,
    held for 3 s) and ``Third``. The need is ``Fresh`` (were ``Stale`` one, it would be named: it comes
    first), named everywhere while a blocker holds the node; the node reboots once for it; on the new boot
    both are older than the boot and no need; a fresh ``Third`` then trips ``--reboot-condition-max=1``: the
    node is quarantined, not rebooted."""
    args = ("--reboot-condition=Stale", "--reboot-condition=Fresh=True:3s", "--reboot-condition=Third",
            "--reboot-condition-max=1", f"--blocking-node-label={HOLD}")  # fmt: skip
    fleet, ns, (node,) = make_fleet(1, args=args, labels={HOLD: "yes"}, metrics=True)
    slot = fleet.slots[node]
    first_boot = k8s.kube().get_node(node)["status"]["nodeInfo"]["bootID"]
    write_condition(k8s, node, "Stale", slot.booted - datetime.timedelta(hours=1))
    fresh_since = slot.booted + S
    write_condition(k8s, node, "Fresh", fresh_since)

    # the need, named while the blocker holds it
    named = status_is(
        k8s, node, lambda s: (s.condition or "").startswith("Fresh=True since") and s.step == "blocked"
    )
    assert fleet.wait_for(named, timeout=90), fleet.log_text(node)
    where = (f"--kubeconfig={k8s.admin_kubeconfig}", f"--ds-namespace={ns}")
    table = run(status_main, node, *where)
    row = next(line for line in table.splitlines() if line.startswith(node))
    assert "condition" in row and "condition Fresh=True since " + format_rfc3339(fresh_since) in row, table
    assert "Stale" not in table
    plan = run(plan_main, node, *where)
    assert "condition: Fresh=True since " + format_rfc3339(fresh_since) in plan, plan
    assert 'pykured_reboot_condition{condition="Fresh"} 1.0' in metrics_text(slot.metrics_port)
    assert "kured_reboot_required" in metrics_text(slot.metrics_port)
    held = events(k8s, node, "RebootConditionHeld")
    assert [e["message"].split(" since ")[0] for e in held] == [
        "reboot required by node condition Fresh=True"
    ]
    # FOR: the agent took the condition as its need no sooner than 3 s after its lastTransitionTime
    noticed = parse_rfc3339(held[0]["firstTimestamp"])
    assert noticed is not None and noticed >= fresh_since + 3 * S

    # the reboot, once the blocker is gone
    k8s.kube().patch_node(
        node, {"metadata": {"labels": {HOLD: None}}}, patch_type="application/merge-patch+json"
    )
    assert fleet.wait_for(lambda: slot.reboots == 1, timeout=120), fleet.log_text(node)
    count = rules.read_count(marks(k8s, node).get(rules.COUNT_ANNOTATION))
    assert [(e.boot, e.condition) for e in count.entries] == [(first_boot, "Fresh")]

    # the new boot: both conditions are older than it, and no need
    second_boot = k8s.kube().get_node(node)["status"]["nodeInfo"]["bootID"]
    assert second_boot != first_boot
    idle = status_is(
        k8s, node, lambda s: s.boot_id == second_boot and s.condition is None and s.step == "wait"
    )
    assert fleet.wait_for(idle, timeout=120), fleet.log_text(node)

    # a fresh condition on the new boot: one reboot for conditions within the day already, the breaker trips
    write_condition(k8s, node, "Third", slot.booted + S)
    assert fleet.wait_for(lambda: QUARANTINED_ANNOTATION in marks(k8s, node), timeout=90)
    record = quarantine_record(marks(k8s, node))
    assert record is not None and not record.cordoned
    reason = "node condition Third asked for a reboot again: 1 reboots for node conditions within 24h0m0s"
    assert record.reason.startswith(reason + " (--reboot-condition-max=1)"), record
    assert [e["reason"] for e in events(k8s, node, "Quarantined")] == ["Quarantined"]
    blocked = status_is(
        k8s, node, lambda s: s.blocked == "quarantined" and (s.condition or "").startswith("Third")
    )
    assert fleet.wait_for(blocked, timeout=60), fleet.log_text(node)
    assert slot.reboots == 1
    assert not k8s.kube().get_node(node)["spec"].get("unschedulable")

    # the operator's unquarantine clears the count with the quarantine: the node may reboot for Third again
    assert unquarantine(k8s.kube(), node).record is not None
    assert rules.COUNT_ANNOTATION not in marks(k8s, node)
    assert fleet.wait_for(lambda: slot.reboots == 2, timeout=120), fleet.log_text(node)


def test_too_many_nodes_with_a_condition_halt_the_fleet_and_none_reboots(
    k8s: TestEnv, make_fleet: MakeFleet, tmp_path: Path
) -> None:
    """Under kustomize/base's RBAC (nodes get, patch, watch: no list) and admission policies, with pod-bound
    tokens: two of three nodes show the condition at once (``--reboot-condition-fleet-max=1``), the agents
    read the fleet with their watch, one halts it, and no node reboots; while the halt stands, the agents hold
    the condition back without reading the fleet."""
    kind = "Broken" + k8s.unique("c").replace("-", "")  # other tests' nodes share the cluster
    kubeconfigs: dict[str, str] = {}
    args = ("--lock-backend=lease", f"--reboot-condition={kind}", "--reboot-condition-fleet-max=1")
    fleet, ns, nodes = make_fleet(3, args=args, start=False, kubeconfig=lambda n: kubeconfigs[n])
    kubeconfigs.update(under_the_policies(k8s, tmp_path / "rbac", ns, nodes))
    sick = nodes[:2]
    for node in sick:
        write_condition(k8s, node, kind, fleet.slots[node].booted + S)

    # what the agents' ServiceAccount may do: no list of the nodes, but a watch of all of them
    agent = Kube.from_kubeconfig(kubeconfigs[nodes[0]])
    with pytest.raises(ForbiddenError):
        agent.list_nodes()
    look = read_fleet(agent, (rules.parse_spec(kind),))
    assert look.unreadable == "" and look.showing == 2 and look.nodes >= 3

    for node in nodes:
        fleet.start(node)
    assert fleet.wait_for(lambda: halt_of(k8s, ns) is not None, timeout=90), fleet.log_text(sick[0])
    halt = halt_of(k8s, ns)
    assert halt is not None and halt["halted"] in sick
    assert re.fullmatch(
        r"2 of \d+ nodes show a node condition at once \(--reboot-condition-fleet-max=1\): a cause rebooting "
        r"does not cure",
        halt["reason"],
    ), halt
    for node in sick:  # each names its condition, held back by the fleet breaker; none took a slot
        held = status_is(
            k8s, node, lambda s: s.blocked == "conditions" and (s.condition or "").startswith(f"{kind}=True")
        )
        assert fleet.wait_for(held, timeout=90), fleet.log_text(node)
    for node in sick:  # the halt's news woke them: while it stands, no agent reads every Node again
        frozen = status_is(k8s, node, lambda s: s.blocked == "conditions" and s.blocked_by == FROZEN)
        assert fleet.wait_for(frozen, timeout=90), fleet.log_text(node)
    assert sum(len(events(k8s, n, "RebootHalted")) for n in sick) == 1
    assert [fleet.slots[n].reboots for n in nodes] == [0, 0, 0]
    assert not any(e for n in sick for e in events(k8s, n, "LockAcquired"))
