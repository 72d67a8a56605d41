"""Real agent processes with a real Alertmanager: an alert holds the node, an operator's silence lets it go,
the node's own silence exists while it reboots and is expired by the agent that starts after the reboot (a
new process, which knows of the silence only from the Node); the URL's password is in no log line, Event or
annotation."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pykured.alertmanager.silence import SILENCE_ANNOTATION
from pykured.status.agent import STATUS_ANNOTATION
from pykured_dev.testenv.alertmanager import Alertmanager
from tests.fleets import MakeFleet, fleet_factory
from tests.testenv import TestEnv

pytestmark = pytest.mark.k8s


@pytest.fixture
def make_fleet(k8s: TestEnv, tmp_path: Path) -> Iterator[MakeFleet]:
    with fleet_factory(k8s, tmp_path, period="5s") as make:
        yield make


@pytest.mark.slow
def test_held_by_an_alert_then_silenced_while_it_reboots(
    k8s: TestEnv, make_fleet: MakeFleet, alertmanager: Alertmanager
) -> None:
    secret = "s3cret-am"
    url = alertmanager.url.replace("http://", f"http://pykured:{secret}@")
    args = ('--silence-during-reboot=node="{{.Node}}"', "--silence-max=30m")
    fleet, _ns, (node,) = make_fleet(1, args=args, start=False)
    fleet.env["KURED_ALERTMANAGER_URL"] = url  # from the environment, as the chart's env would set it
    alertmanager.fire("DiskPressure", node=node)
    fleet.start(node)
    fleet.touch(node)
    held = "Reboot blocked: 1 active alerts: [DiskPressure] in Alertmanager"
    assert fleet.wait_for(lambda: held in fleet.log_text(node), timeout=60), fleet.log_text(node)
    assert fleet.slots[node].reboots == 0

    def status() -> str:
        return str(k8s.kube().get_node(node)["metadata"].get("annotations", {}).get(STATUS_ANNOTATION, ""))

    assert fleet.wait_for(lambda: '"blocked":"alertmanager"' in status().replace(" ", ""), timeout=90)

    alertmanager.silence({"alertname": "DiskPressure"})  # the operator lets it go
    assert fleet.wait_for(lambda: fleet.slots[node].reboots == 1, timeout=90), fleet.log_text(node)

    def ours() -> list[dict[str, object]]:
        return [s for s in alertmanager.silences() if s["createdBy"] == "pykured"]

    def expired() -> bool:
        annotations = k8s.kube().get_node(node)["metadata"].get("annotations", {})
        states = [s["status"] for s in ours()]
        return SILENCE_ANNOTATION not in annotations and states == [{"state": "expired"}]

    assert fleet.wait_for(expired, timeout=90), (ours(), fleet.log_text(node))
    (silence,) = ours()
    assert silence["matchers"] == [{"name": "node", "value": node, "isRegex": False, "isEqual": True}]
    log = fleet.log_text(node)
    assert f"Expired silence {silence['id']} of node {node}" in log
    assert log.count("Silenced node=") == 1  # made once, by the agent that took the lock
    assert fleet.slots[node].starts >= 2  # the agent that expired it is not the one that made it
    query = {"fieldSelector": f"involvedObject.name={node}"}
    events = k8s.kube().get("/api/v1/namespaces/default/events", query=query)["items"]
    assert {"Silenced", "SilenceExpired"} <= {e["reason"] for e in events}
    seen = log + str(events) + str(k8s.kube().get_node(node)["metadata"])
    assert secret not in seen
