"""The Grafana dashboard (dashboards/pykured-grafana.json) and the shipped alerting rules on a real Prometheus
that scrapes real agents on the real API server: every panel's query returns series, once the agents have
done what the panels show (a reboot with its drain and lock wait, a settle gate holding the lock, a failed
notification, a FleetLock request, a pending reboot request in a closed window, a drain a
PodDisruptionBudget holds)."""

from __future__ import annotations

import datetime
import io
import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pykured.cli.request_reboot import request_reboot_main
from pykured_dev.eventually import eventually
from pykured_dev.testenv.procs import free_port
from pykured_dev.testenv.prometheus import SEEN_WITHIN, Exporter, Prometheus
from tests.fleets import MakeFleet, fleet_factory
from tests.testenv import TestEnv

pytestmark = [pytest.mark.k8s, pytest.mark.slow, pytest.mark.prometheus, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "dashboards" / "pykured-grafana.json"
RULES = ROOT / "charts" / "pykured" / "rules" / "pykured.rules.yaml"
JOB = "pykured"
RS_REF = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "r1", "controller": True}
# Grafana's variables as a dashboard viewer has them: "All" for job and node (their allValue), a rate
# interval and a range that cover what the agents did during the test.
VARIABLES = {"$__rate_interval": "5m", "$__range": "1h", "$job": ".*", "$node": ".*"}


def panels(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in items:
        yield panel
        yield from panels(panel.get("panels", []))


def queries() -> list[tuple[str, str]]:
    """``(panel title, expression)`` of every panel target of the dashboard."""
    board = json.loads(DASHBOARD.read_text())
    return [
        (str(panel.get("title")), str(target["expr"]))
        for panel in panels(board["panels"])
        for target in panel.get("targets", [])
    ]


def substitute(expr: str) -> str:
    for name, value in sorted(VARIABLES.items(), key=lambda kv: -len(kv[0])):
        expr = expr.replace(name, value)
    assert "$" not in expr, f"a Grafana variable the test does not know: {expr}"
    return expr


@pytest.fixture
def make_fleet(k8s: TestEnv, tmp_path: Path) -> Iterator[MakeFleet]:
    with fleet_factory(k8s, tmp_path, period="2s") as make:
        yield make


def _fleetlock_steady_state(port: int) -> int:
    """One FleetLock request (Zincati's steady-state report) to an agent's FleetLock server: its status."""
    body = json.dumps({"client_params": {"id": "dashboard-test", "group": "default"}}).encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/steady-state",
        data=body,
        method="POST",
        headers={"fleet-lock-protocol": "true", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as refused:
        return int(refused.code)


def test_every_panel_query_returns_series_from_real_agents(
    k8s: TestEnv, make_fleet: MakeFleet, tmp_path: Path
) -> None:
    with Exporter() as hold, Prometheus(tmp_path / "prometheus", rule_files=[RULES]) as prom:
        hold.set("dashboard_settle_hold", 1)
        prom.scrape("hold", hold.address)
        fleetlock = free_port()
        # A node that reboots: drained, the lock waited for and taken, notifications that fail (nothing
        # listens at the URL), a FleetLock server, and after the reboot a settle gate on Prometheus (the query
        # is non-empty while the test holds it) that keeps the lock.
        fleet, _ns, (rebooting,) = make_fleet(
            args=(
                f"--prometheus-url={prom.url}",
                "--settle-prometheus-query=dashboard_settle_hold == 1",
                "--settle-timeout=10m",
                f"--notify-url=generic+http://127.0.0.1:{free_port()}/hook",
                f"--fleetlock-listen=127.0.0.1:{fleetlock}",
            ),
            metrics=True,
        )
        # A node whose reboot request waits for its maintenance window (open only on tomorrow's weekday).
        waiting_fleet, _ns2, (waiting,) = make_fleet(args=_closed_window(), metrics=True)
        # A node whose drain waits on a pod its PodDisruptionBudget allows no disruption of.
        draining_fleet, _ns3, (draining,) = make_fleet(args=("--drain-timeout=1h",), metrics=True)
        workloads = k8s.new_namespace("dw")
        k8s.create_pod(workloads, "guarded", node=draining, labels={"app": "guarded"}, owner=RS_REF)
        k8s.create_pdb(workloads, "guarded-pdb", {"app": "guarded"}, min_available=1)
        k8s.set_pdb_status(workloads, "guarded-pdb", disruptions_allowed=0)
        scraped = ((fleet, rebooting), (waiting_fleet, waiting), (draining_fleet, draining))
        for f, node in scraped:
            prom.scrape(JOB, f.slots[node].metrics_address, {"node": node})
        assert eventually(lambda: prom.targets_up(JOB) == len(scraped), timeout=60)
        assert _request_reboot(k8s, waiting) == 0
        draining_fleet.touch(draining)

        fleet.touch(rebooting)
        rebooted = fleet.wait_for(lambda: fleet.slots[rebooting].reboots == 1, timeout=90)
        assert rebooted, fleet.log_text(rebooting)
        held = 'pykured_lock_held_by_gate{gate!="none"} == 1'
        assert eventually(lambda: bool(prom.query(held)), timeout=SEEN_WITHIN), fleet.log_text(rebooting)
        assert _fleetlock_steady_state(fleetlock) in (200, 400, 403, 404, 409, 412, 500)
        hold.set("dashboard_settle_hold", 0)
        assert eventually(lambda: not prom.query(held), timeout=SEEN_WITHIN), fleet.log_text(rebooting)
        assert eventually(
            lambda: bool(prom.query("pykured_reboot_request_pending == 1")), timeout=SEEN_WITHIN
        )
        assert eventually(
            lambda: bool(prom.query(f'sum(pykured_fleetlock_requests_total{{job="{JOB}"}})')),
            timeout=SEEN_WITHIN,
        )
        held_by_budget = f'pykured_drain_pods_waiting{{node="{draining}", reason="pdb"}} == 1'
        assert eventually(lambda: bool(prom.query(held_by_budget)), timeout=SEEN_WITHIN), (
            draining_fleet.log_text(draining)
        )

        empty = []
        for title, expr in queries():
            query = substitute(expr)
            if not eventually(lambda q=query: bool(prom.query(q)), timeout=SEEN_WITHIN):  # type: ignore[misc]
                empty.append(f"{title}: {query}")
        assert not empty, "panels whose query returns no series:\n" + "\n".join(empty)

        # the dashboard's variables: label_values(kured_reboot_required, job) and (…{job=~"$job"}, node)
        jobs = prom.api("label/job/values", **{"match[]": "kured_reboot_required"})
        assert JOB in jobs
        nodes = prom.api("label/node/values", **{"match[]": 'kured_reboot_required{job=~".*"}'})
        assert {rebooting, waiting} <= set(nodes)

        # the shipped rules load and evaluate on these series without error
        groups = prom.api("rules")["groups"]
        rules = [rule for group in groups for rule in group["rules"]]
        assert len(rules) == len(re.findall(r"^\s+- alert: ", RULES.read_text(), re.MULTILINE))
        assert all(rule["health"] == "ok" for rule in rules), rules


def _closed_window() -> tuple[str, ...]:
    tomorrow = (datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=1)).strftime("%a")[:2].lower()
    return (f"--reboot-days={tomorrow}", "--time-zone=UTC")


def _request_reboot(k8s: TestEnv, node: str) -> int:
    out, err = io.StringIO(), io.StringIO()
    return request_reboot_main(
        [node, "--reason", "dashboard", f"--kubeconfig={k8s.admin_kubeconfig}"], out=out, err=err
    )
