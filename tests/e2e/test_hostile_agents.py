"""Hostile records written under live agents on the real API server: a deeply nested reboot request and
status on their Nodes, a garbage freeze in the policy ConfigMap. The agents keep running, the next real need
(the sentinel) still reboots, the freeze holds while it is garbled or set, and ``pykured status``/``plan``
show the unreadable node as one row, in terminal-safe text."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from pathlib import Path

import pytest

from pykured.cli import agent as cli
from pykured.core.errors import KubeError
from pykured.fleet import freeze as freezecmd
from pykured.policy.source import configmaps_path
from pykured.requests import record as rebootrequest
from pykured.status import agent as agentstatus
from pykured_dev.testenv.fleet import Fleet
from tests.fleets import MakeFleet, fleet_factory
from tests.testenv import TestEnv

pytestmark = [pytest.mark.k8s, pytest.mark.slow]
UTC = datetime.UTC
POLICY = "kured-policy"
REQ = rebootrequest.REQUEST_ANNOTATION
STATUS = agentstatus.STATUS_ANNOTATION
HOSTILE = "\x1b]0;owned\x07\x1b[2J\x9b31m\u202e"


@pytest.fixture
def make_fleet(k8s: TestEnv, tmp_path: Path) -> Iterator[MakeFleet]:
    with fleet_factory(k8s, tmp_path, period="2s") as make:
        yield make


def annotate(k8s: TestEnv, node: str, annotations: dict[str, str]) -> None:
    k8s.kube().patch_node(
        node, {"metadata": {"annotations": annotations}}, patch_type="application/merge-patch+json"
    )


def notes(k8s: TestEnv, node: str) -> dict[str, str]:
    return dict(k8s.kube().get_node(node)["metadata"].get("annotations") or {})


def logs(fleet: Fleet) -> str:
    return "\n".join(f"--- {n}\n{fleet.log_text(n)[-4000:]}" for n in fleet.slots)


def alive(fleet: Fleet) -> bool:
    return all(slot.proc is not None and slot.proc.poll() is None for slot in fleet.slots.values())


def put_policy(k8s: TestEnv, ns: str, data: dict[str, str]) -> None:
    kube = k8s.kube()
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": POLICY}, "data": data}
    try:
        kube.request("PUT", configmaps_path(ns, POLICY), body=obj)
    except KubeError:
        kube.request("POST", configmaps_path(ns), body=obj)


def test_deeply_nested_records_neither_crash_nor_blind_the_agents_and_status_shows_them(
    k8s: TestEnv, make_fleet: MakeFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet, ns, (asked, published) = make_fleet(2)
    (bystander,) = k8s.add_nodes(k8s.unique("node"))  # no agent: its garbage stays for `pykured status`
    annotate(k8s, asked, {REQ: "[" * 2000})
    annotate(k8s, published, {STATUS: "{" * 5000})
    now = datetime.datetime.now(UTC)
    forged = rebootrequest.RebootRequest(
        k8s.boot_id(bystander), f"kernel {HOSTILE}", now, f"mallory{HOSTILE}"
    )
    annotate(k8s, bystander, {STATUS: "[" * 3000, REQ: rebootrequest.format_request(forged)})
    # each agent read its garbage and went on: the invalid request removed, the status published again
    assert fleet.wait_for(lambda: REQ not in notes(k8s, asked), timeout=60), logs(fleet)
    assert fleet.wait_for(
        lambda: agentstatus.decode(notes(k8s, published).get(STATUS)) is not None, timeout=60
    ), logs(fleet)
    assert "Ignoring and removing the reboot request" in fleet.log_text(asked)
    assert alive(fleet), logs(fleet)
    # the next real need still reboots each node
    for node in (asked, published):
        fleet.touch(node)
    assert fleet.wait_for(lambda: all(s.reboots == 1 for s in fleet.slots.values()), timeout=90), logs(fleet)
    assert fleet.wait_for(lambda: alive(fleet), timeout=90), logs(fleet)  # the agents after the reboots
    assert "failed unexpectedly" not in logs(fleet), logs(fleet)
    # `pykured status` and `plan`: one row says the bystander is unreadable; nothing drives the terminal
    capsys.readouterr()
    common = [f"--kubeconfig={k8s.admin_kubeconfig}", f"--ds-namespace={ns}", asked, published, bystander]
    assert cli.main(["status", *common]) == 0
    status = capsys.readouterr()
    rows = [line for line in status.out.split("\n") if line.startswith(bystander)]
    assert (
        len(rows) == 1
        and "UNREADABLE: pykured.dev/status: unreadable status record: nested deeper" in rows[0]
    )
    assert sum(line.startswith((asked, published)) for line in status.out.split("\n")) == 2
    assert cli.main(["status", "-o", "json", *common]) == 0
    as_json = capsys.readouterr().out
    assert cli.main(["plan", *common]) == 0
    plan = capsys.readouterr().out
    for text in (status.out, status.err, as_json, plan):
        assert not set(text) & set("\x1b\x07\x9b\u202e"), text
    assert "kernel \\u001b]0;owned\\u0007" in status.out and "UNREADABLE" in plan


def test_a_garbled_freeze_holds_like_a_freeze_until_it_is_rewritten(
    k8s: TestEnv, make_fleet: MakeFleet
) -> None:
    fleet, ns, nodes = make_fleet(2, args=(f"--policy-configmap={POLICY}",))
    put_policy(k8s, ns, {})
    read = f"Policy ConfigMap {ns}/{POLICY} read"
    assert fleet.wait_for(lambda: all(read in fleet.log_text(n) for n in nodes), timeout=60), logs(fleet)
    # refused whole (an unknown key), with a garbled freeze: the freeze is honoured anyway
    put_policy(k8s, ns, {"bogus": "1", "freeze": "[" * 5000})
    garbled = "frozen: the freeze record cannot be read"
    honoured = f"honouring the freeze it sets ({garbled}"
    assert fleet.wait_for(lambda: all(honoured in fleet.log_text(n) for n in nodes), timeout=60), logs(fleet)
    for node in nodes:
        fleet.touch(node)
    blocked = "Reboot blocked: frozen: the freeze record cannot be read"
    assert fleet.wait_for(lambda: all(blocked in fleet.log_text(n) for n in nodes), timeout=60), logs(fleet)
    # accepted, with a garbled freeze: still frozen, and said so
    put_policy(k8s, ns, {"freeze": '{"at": 1, "by": ["x"]}'})  # JSON of the wrong types this time
    assert fleet.wait_for(
        lambda: all("treating the fleet as frozen" in fleet.log_text(n) for n in nodes), timeout=60
    ), logs(fleet)
    assert all(s.reboots == 0 for s in fleet.slots.values()), logs(fleet)
    # rewritten by an operator's freeze: still no reboot; unfrozen: the roll goes on
    alice = k8s.kube_as("alice", ["system:masters"])
    freezecmd.freeze(
        alice, namespace=ns, name=POLICY, reason="INC-9", until=None, now=datetime.datetime.now(UTC)
    )
    assert fleet.wait_for(
        lambda: all("Reboot blocked: frozen by alice" in fleet.log_text(n) for n in nodes), timeout=60
    ), logs(fleet)
    assert all(s.reboots == 0 for s in fleet.slots.values()) and alive(fleet), logs(fleet)
    freezecmd.unfreeze(alice, namespace=ns, name=POLICY)
    assert fleet.wait_for(lambda: all(s.reboots == 1 for s in fleet.slots.values()), timeout=120), logs(fleet)
    assert fleet.wait_for(lambda: alive(fleet), timeout=90), logs(fleet)  # the agents after the reboots
    assert "failed unexpectedly" not in logs(fleet), logs(fleet)
