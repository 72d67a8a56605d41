"""PodBlocker against the real kube-apiserver; NodeMarkBlocker with real agents; PrometheusAlertBlocker with
real agents and a real Prometheus whose rules fire on a metric the test sets."""

from __future__ import annotations

import contextlib
import datetime
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pykured.alerts.filters import compile_alert_filter
from pykured.blockers.pods import PodBlocker
from pykured.blockers.prometheus import PrometheusAlertBlocker
from pykured.cli import agent as agentcli
from pykured.core.errors import ConfigError
from pykured.core.model import Reason
from pykured.status.agent import STATUS_ANNOTATION
from pykured_dev.eventually import eventually
from pykured_dev.testenv.prometheus import SEEN_WITHIN, Exporter, Prometheus
from tests.fleets import MakeFleet, fleet_factory
from tests.testenv import TestEnv

NOW = datetime.datetime(2026, 1, 1, 0, 0, 0, 500000, tzinfo=datetime.UTC)

pytestmark = pytest.mark.timeout(600)  # Prometheus's waits are SEEN_WITHIN each


# -- PodBlocker: the query, without a cluster ---------------------------------------------------------------


def pods(*names: str, more: bool = False) -> dict[str, Any]:
    return {
        "items": [{"metadata": {"name": n}} for n in names],
        "metadata": {"continue": "t" if more else ""},
    }


# -- PodBlocker against the real apiserver ----------------------------------------------------------------


def _set_phase(k8s: TestEnv, namespace: str, name: str, phase: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/pods/{name}/status"
    k8s.kube().request(
        "PATCH", path, body={"status": {"phase": phase}}, content_type="application/merge-patch+json"
    )


@pytest.mark.k8s
@pytest.mark.parametrize(
    ("where", "phase", "labels", "selectors", "blocked"),
    [
        ("this", "Running", {"app": "blocker"}, ["app=blocker"], True),
        ("this", "Pending", {"app": "blocker"}, ["app=blocker"], True),
        ("other", "Running", {"app": "blocker"}, ["app=blocker"], False),
        ("this", "Succeeded", {"app": "blocker"}, ["app=blocker"], False),
        ("this", "Failed", {"app": "blocker"}, ["app=blocker"], False),
        ("this", "Running", {"app": "other"}, ["app=blocker"], False),
        ("this", "Running", {"app": "b"}, ["app=a", "app=b"], True),
        ("this", "Running", {"app": "a", "tier": "db"}, ["app=a,tier=db"], True),
        ("this", "Running", {"app": "a", "tier": "web"}, ["app=a,tier=db"], False),
    ],
    ids=[
        "running-here",
        "pending-here",
        "other-node",
        "succeeded",
        "failed",
        "label-mismatch",
        "or-of-selectors",
        "comma-and-match",
        "comma-and-mismatch",
    ],
)
def test_pod_blocker_on_the_apiserver(
    k8s: TestEnv,
    where: str,
    phase: str,
    labels: dict[str, str],
    selectors: list[str],
    blocked: bool,
) -> None:
    namespace = k8s.new_namespace()
    here, there = k8s.add_nodes(k8s.unique("node"), k8s.unique("node"))
    node = here if where == "this" else there
    k8s.create_pod(namespace, "blocker-pod", node=node, labels=labels, phase_running=phase == "Running")
    if phase not in ("Running", "Pending"):
        _set_phase(k8s, namespace, "blocker-pod", phase)
    reason = PodBlocker(k8s.kube(), node=here, selectors=selectors).check(now=NOW)
    assert reason == (Reason("pods", "matching pods: [blocker-pod]") if blocked else None)


@pytest.mark.k8s
def test_pod_blocker_lists_ten_then_dots(k8s: TestEnv) -> None:
    namespace = k8s.new_namespace()
    (node,) = k8s.add_nodes(k8s.unique("node"))
    for i in range(11):
        k8s.create_pod(namespace, f"p{i:02d}", node=node, labels={"app": "many"}, phase_running=False)
    reason = PodBlocker(k8s.kube(), node=node, selectors=["app=many"]).check(now=NOW)
    assert reason is not None
    names = reason.message.removeprefix("matching pods: [").removesuffix("]").split(" ")
    assert len(names) == 11
    assert names[-1] == "..."


# -- NodeMarkBlocker: real agents on simulated nodes --------------------------------------------------------


@pytest.fixture
def make_fleet(k8s: TestEnv, tmp_path: Path) -> Iterator[MakeFleet]:
    with fleet_factory(k8s, tmp_path, period="10s") as make:
        yield make


def _cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = agentcli.main(list(argv))
    return code, out.getvalue()


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["daemonset", "lease"])
def test_a_node_with_a_blocking_label_waits_while_another_reboots(
    k8s: TestEnv, make_fleet: MakeFleet, backend: str
) -> None:
    """``--blocking-node-label``: the labelled node takes no lock (its status and ``pykured plan`` say why)
    while the other node reboots; once the label is removed it reboots too."""
    args = (f"--lock-backend={backend}", "--blocking-node-label=example.com/hold")
    fleet, ns, (held, other) = make_fleet(2, args=args, labels=[{"example.com/hold": "disk-swap"}, {}])
    fleet.touch(held)
    fleet.touch(other)
    assert fleet.wait_for(lambda: fleet.slots[other].reboots == 1, timeout=60), fleet.log_text(other)
    assert fleet.wait_for(
        lambda: "Reboot blocked: node has blocking label example.com/hold" in fleet.log_text(held), timeout=90
    ), fleet.log_text(held)
    assert fleet.slots[held].reboots == 0
    assert not k8s.kube().get_node(held)["spec"].get("unschedulable")

    def published() -> bool:
        text = k8s.kube().get_node(held)["metadata"].get("annotations", {}).get(STATUS_ANNOTATION, "")
        return '"blocked":"node"' in text.replace(" ", "")

    assert fleet.wait_for(published, timeout=90)
    where = (f"--kubeconfig={k8s.admin_kubeconfig}", f"--ds-namespace={ns}")
    code, text = _cli("plan", held, *where)
    assert code == 0 and "node has blocking label example.com/hold" in text, text
    code, text = _cli("status", *where)
    assert code == 0 and "node has blocking label example.com/hold" in text, text

    k8s.kube().patch_node(
        held, {"metadata": {"labels": {"example.com/hold": None}}}, patch_type="application/merge-patch+json"
    )
    assert fleet.wait_for(lambda: fleet.slots[held].reboots == 1, timeout=60), fleet.log_text(held)


# -- PrometheusAlertBlocker: real agents, a real Prometheus and its rule evaluation ------------------------

GATE_RULES = """groups:
  - name: gate
    rules:
      - alert: DiskPressure
        expr: gate_disk_pressure == 1
        labels: {severity: critical}
      - alert: NoisyNeighbour
        expr: gate_noise == 1
        labels: {severity: info}
      - alert: SlowBurn
        expr: gate_slow_burn == 1
        for: 1h
        labels: {severity: warning}
"""


@pytest.fixture
def gate(tmp_path: Path) -> Iterator[tuple[Prometheus, Exporter]]:
    """A real Prometheus with :data:`GATE_RULES`, scraping a target whose values the test sets (all 0)."""
    rules = tmp_path / "gate.rules.yaml"
    rules.write_text(GATE_RULES)
    with Exporter() as target, Prometheus(tmp_path / "prometheus", rule_files=[rules]) as prom:
        for name in ("gate_disk_pressure", "gate_noise", "gate_slow_burn"):
            target.set(name, 0)
        prom.scrape("gate", target.address)
        assert eventually(lambda: len(prom.query("gate_noise")) == 1, timeout=SEEN_WITHIN)
        yield prom, target


@pytest.fixture
def quick_fleet(k8s: TestEnv, tmp_path: Path) -> Iterator[MakeFleet]:
    with fleet_factory(k8s, tmp_path, period="2s") as make:
        yield make


def _published(k8s: TestEnv, node: str) -> str:
    return str(k8s.kube().get_node(node)["metadata"].get("annotations", {}).get(STATUS_ANNOTATION, ""))


@pytest.mark.prometheus
@pytest.mark.slow
def test_a_firing_alert_blocks_the_reboot_until_it_resolves(
    k8s: TestEnv, quick_fleet: MakeFleet, gate: tuple[Prometheus, Exporter]
) -> None:
    """kured's ``--prometheus-url``: an alert Prometheus's rules fire holds the reboot back (the log, the
    published status, ``pykured status`` and ``pykured_blocked`` say so, naming the alert); once the rule
    stops firing the node reboots."""
    prom, target = gate
    target.set("gate_disk_pressure", 1)
    assert eventually(lambda: prom.alert_state("DiskPressure") == "firing", timeout=90)
    fleet, ns, (node,) = quick_fleet(args=(f"--prometheus-url={prom.url}",), metrics=True)
    prom.scrape("pykured", fleet.slots[node].metrics_address, {"node": node})
    fleet.touch(node)
    blocked = "Reboot blocked: 1 active alerts: [DiskPressure]"
    assert fleet.wait_for(lambda: blocked in fleet.log_text(node), timeout=60), fleet.log_text(node)
    published = lambda: '"blocked":"prometheus"' in _published(k8s, node).replace(" ", "")  # noqa: E731
    assert fleet.wait_for(published, timeout=90)
    code, text = _cli("status", f"--kubeconfig={k8s.admin_kubeconfig}", f"--ds-namespace={ns}")
    assert code == 0 and "DiskPressure" in text, text
    assert eventually(
        lambda: bool(prom.query('pykured_blocked{reason="prometheus"} == 1')), timeout=SEEN_WITHIN
    )
    assert fleet.slots[node].reboots == 0

    target.set("gate_disk_pressure", 0)
    assert eventually(lambda: prom.alert_state("DiskPressure") is None, timeout=90)
    assert fleet.wait_for(lambda: fleet.slots[node].reboots == 1, timeout=60), fleet.log_text(node)


@pytest.mark.prometheus
@pytest.mark.slow
@pytest.mark.parametrize("firing_only", [False, True], ids=["pending-blocks", "alert-firing-only"])
def test_a_pending_alert(
    k8s: TestEnv, quick_fleet: MakeFleet, gate: tuple[Prometheus, Exporter], firing_only: bool
) -> None:
    """An alert whose ``for:`` has not passed is pending: it blocks, as in kured, unless
    ``--alert-firing-only``."""
    prom, target = gate
    target.set("gate_slow_burn", 1)
    assert eventually(lambda: prom.alert_state("SlowBurn") == "pending", timeout=90)
    args = (f"--prometheus-url={prom.url}", *(("--alert-firing-only",) if firing_only else ()))
    fleet, _ns, (node,) = quick_fleet(args=args)
    fleet.touch(node)
    if firing_only:
        assert fleet.wait_for(lambda: fleet.slots[node].reboots == 1, timeout=60), fleet.log_text(node)
        assert "active alerts" not in fleet.log_text(node)
    else:
        blocked = "Reboot blocked: 1 active alerts: [SlowBurn]"
        assert fleet.wait_for(lambda: blocked in fleet.log_text(node), timeout=60), fleet.log_text(node)
        assert fleet.slots[node].reboots == 0
    assert prom.alert_state("SlowBurn") == "pending"  # still: the agent saw it pending, never firing


@pytest.mark.prometheus
@pytest.mark.slow
@pytest.mark.parametrize(
    ("firing", "match_only", "blocked_by"),
    [
        (("gate_disk_pressure", "gate_noise"), False, "DiskPressure"),
        (("gate_disk_pressure", "gate_noise"), True, "NoisyNeighbour"),
        (("gate_noise",), False, None),
    ],
    ids=["others-block", "match-only", "all-filtered-out"],
)
def test_the_alert_filter(
    quick_fleet: MakeFleet,
    gate: tuple[Prometheus, Exporter],
    firing: tuple[str, ...],
    match_only: bool,
    blocked_by: str | None,
) -> None:
    """``--alert-filter-regexp`` leaves out the alerts it matches; with ``--alert-filter-match-only`` it keeps
    only those (kured's semantics), on the real ``ALERTS`` series."""
    prom, target = gate
    for name in firing:
        target.set(name, 1)
    assert eventually(
        lambda: len(prom.query('ALERTS{alertstate="firing"}')) == len(firing), timeout=SEEN_WITHIN
    )
    args = (f"--prometheus-url={prom.url}", "--alert-filter-regexp=^Noisy")
    fleet, _ns, (node,) = quick_fleet(args=(*args, *(("--alert-filter-match-only",) if match_only else ())))
    fleet.touch(node)
    if blocked_by is None:
        assert fleet.wait_for(lambda: fleet.slots[node].reboots == 1, timeout=60), fleet.log_text(node)
        assert "active alerts" not in fleet.log_text(node)
    else:
        blocked = f"Reboot blocked: 1 active alerts: [{blocked_by}]"
        assert fleet.wait_for(lambda: blocked in fleet.log_text(node), timeout=60), fleet.log_text(node)
        assert fleet.slots[node].reboots == 0


# kured's TestActiveAlerts table, answered by a real Prometheus: each case's alerts come from its rules (one
# exporter value switches a case on), pending ones through a `for:` that never passes during the test.
KURED_TABLE_RULES = """groups:
  - name: kured-table
    rules:
      - {alert: GatekeeperViolations, expr: case_kured == 1}
      - {alert: PodCrashing-dev, expr: case_kured == 1}
      - {alert: PodRestart-dev, expr: case_kured == 1}
      - {alert: PrometheusTargetDown, expr: case_kured == 1}
      - {alert: ScheduledRebootFailing, expr: case_kured == 1, for: 1h}
      - {alert: PendingAlert, expr: case_pending == 1, for: 1h}
      - {alert: RebootRequired, expr: case_reboot_required == 1}
"""
KURED_FIVE = [
    "GatekeeperViolations",
    "PodCrashing-dev",
    "PodRestart-dev",
    "PrometheusTargetDown",
    "ScheduledRebootFailing",
]
KURED_TABLE: list[tuple[str, str, str | None, bool, bool, list[str]]] = [
    # (id, case, filter, match only, firing only, expected): kured's TestActiveAlerts
    ("empty-filter-ignores-all", "case_kured", "", False, False, []),
    ("filter-Pod-ignored", "case_kured", "Pod", False, False,
     ["GatekeeperViolations", "PrometheusTargetDown", "ScheduledRebootFailing"]),
    ("Gatekeeper-match-only", "case_kured", "Gatekeeper", True, False, ["GatekeeperViolations"]),
    ("invalid-regex-means-no-filter", "case_kured", "*", False, False, KURED_FIVE),
    ("firing-only", "case_kured", None, False, True, KURED_FIVE[:4]),
    ("single-pending-alert", "case_pending", None, False, False, ["PendingAlert"]),
    ("single-pending-alert-firing-only", "case_pending", None, False, True, []),
    ("RebootRequired-ignored", "case_reboot_required", "^RebootRequired$", False, False, []),
    ("RebootRequired-match-only", "case_reboot_required", "^RebootRequired$", True, False,
     ["RebootRequired"]),
]  # fmt: skip


@pytest.mark.prometheus
def test_kured_s_active_alerts_table_on_a_real_prometheus(tmp_path: Path) -> None:
    """``active_alerts`` and the blocking reason on the ``ALERTS`` series a real Prometheus's rules make,
    pending and firing, case by case; its API behind a path prefix (with and without the trailing slash)."""
    rules = tmp_path / "kured-table.rules.yaml"
    rules.write_text(KURED_TABLE_RULES)
    cases = ("case_kured", "case_pending", "case_reboot_required")
    prefix = "/prometheus/path"
    with Exporter() as target, Prometheus(tmp_path / "p", rule_files=[rules], route_prefix=prefix) as prom:
        for case in cases:
            target.set(case, 0)
        prom.scrape("table", target.address)
        assert eventually(lambda: len(prom.query("case_kured")) == 1, timeout=SEEN_WITHIN)
        quiet = PrometheusAlertBlocker(prom.url).check(now=datetime.datetime.now(datetime.UTC))
        assert quiet is None
        states = {
            "case_kured": {(n, "firing") for n in KURED_FIVE[:4]} | {("ScheduledRebootFailing", "pending")},
            "case_pending": {("PendingAlert", "pending")},
            "case_reboot_required": {("RebootRequired", "firing")},
        }
        for case in cases:
            for other in cases:
                target.set(other, 1 if other == case else 0)

            def shown(want: set[tuple[str, str]] = states[case]) -> bool:
                got = {(s["metric"]["alertname"], s["metric"]["alertstate"]) for s in prom.query("ALERTS")}
                return got == want

            assert eventually(shown, timeout=SEEN_WITHIN), (case, prom.query("ALERTS"))
            for name, of, regexp, match_only, firing_only, expected in KURED_TABLE:
                if of != case:
                    continue
                try:  # kured's test compiles the filter and passes nil when it does not compile
                    compile_alert_filter(regexp or "")
                except ConfigError:
                    regexp = None
                blocker = PrometheusAlertBlocker(
                    prom.url, filter_regexp=regexp, match_only=match_only, firing_only=firing_only
                )
                now = datetime.datetime.now(datetime.UTC)
                assert blocker.active_alerts(now=now) == expected, name
                reason = blocker.check(now=now)
                message = f"{len(expected)} active alerts: [{' '.join(expected)}]"
                assert reason == (Reason("prometheus", message) if expected else None), name
        # the URL's path is kept, with or without a trailing slash (and without it nothing answers)
        now = datetime.datetime.now(datetime.UTC)
        assert PrometheusAlertBlocker(prom.url + "/").active_alerts(now=now) == ["RebootRequired"]
        bare = PrometheusAlertBlocker(prom.url.removesuffix(prefix)).check(now=now)
        assert bare is not None and bare.message.startswith("prometheus query error"), bare


# A bcrypt hash (cost 4) of the test password below, as Prometheus's web configuration takes it.
PASSWORD = "correct horse"
PASSWORD_BCRYPT = "$2b$04$Fv2pXzT82ZbFhfLae0uMuuRYJ95K9CeK1K39aM7dSvenr9Zn6CDKu"


@pytest.mark.prometheus
def test_credentials_in_the_url_pass_a_real_prometheus_s_basic_auth(tmp_path: Path) -> None:
    """``--prometheus-url`` with user:password: the real server (``basic_auth_users``) answers; a wrong
    password or none is its 401, and no message carries the password."""
    rules = tmp_path / "guarded.rules.yaml"
    rules.write_text("groups:\n  - name: g\n    rules:\n      - {alert: Guarded, expr: vector(1)}\n")
    auth = ("alice", PASSWORD, PASSWORD_BCRYPT)
    with Prometheus(tmp_path / "p", rule_files=[rules], basic_auth=auth) as prom:
        firing = 'ALERTS{alertname="Guarded",alertstate="firing"}'  # what the agent's query will see
        assert eventually(lambda: bool(prom.query(firing)), timeout=SEEN_WITHIN)
        host = prom.url.removeprefix("http://")
        now = datetime.datetime.now(datetime.UTC)
        good = PrometheusAlertBlocker(f"http://alice:{PASSWORD.replace(' ', '%20')}@{host}")
        assert good.check(now=now) == Reason("prometheus", "1 active alerts: [Guarded]")
        status = "prometheus query error: server returned HTTP status 401 Unauthorized"
        unauthorized = Reason("prometheus", status)
        for url in (f"http://alice:wrong@{host}", f"http://{host}"):
            assert PrometheusAlertBlocker(url).check(now=now) == unauthorized
