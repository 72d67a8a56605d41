"""Metrics: scrape the real /metrics endpoint over HTTP (port 0) and check names, values and routing."""

from __future__ import annotations

import json
import re
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from pykured.metrics import BLOCK_REASONS, Metrics


@pytest.fixture
def metrics() -> Iterator[Metrics]:
    instance = Metrics(version="9.9.9")
    yield instance
    instance.close()


def _scrape(port: int, host: str = "127.0.0.1", path: str = "/metrics") -> str:
    with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=5) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return str(response.read().decode())


def _samples(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def test_kured_gauge_exactly_as_kured(metrics: Metrics) -> None:
    port = metrics.serve("127.0.0.1", 0)
    metrics.set_reboot_required("n1", True)
    metrics.set_reboot_required("n2", False)
    text = _scrape(port)
    assert 'kured_reboot_required{node="n1"} 1.0' in text.splitlines()
    assert 'kured_reboot_required{node="n2"} 0.0' in text.splitlines()
    assert "# HELP kured_reboot_required OS requires reboot due to software updates." in text
    assert "# TYPE kured_reboot_required gauge" in text


@pytest.mark.parametrize(
    "path", ["/", "/metric", "/healthz", "/metrics/x"], ids=["root", "typo", "healthz", "sub"]
)
def test_only_metrics_path_is_served(metrics: Metrics, path: str) -> None:
    port = metrics.serve("127.0.0.1", 0)
    with pytest.raises(urllib.error.HTTPError) as excinfo:
        urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5)
    assert excinfo.value.code == 404
    assert excinfo.value.read() == b"404 page not found\n"
    excinfo.value.close()


def test_metrics_with_query_string_is_served(metrics: Metrics) -> None:
    port = metrics.serve("127.0.0.1", 0)
    assert "kured_reboot_required" in _scrape(port, path="/metrics?x=1")


def _ipv6_available() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
            sock.bind(("::1", 0))
    except OSError:
        return False
    return True


def test_empty_host_listens_on_ipv4_and_ipv6(metrics: Metrics) -> None:
    port = metrics.serve("", 0)
    metrics.set_reboot_required("n1", True)
    assert 'kured_reboot_required{node="n1"} 1.0' in _scrape(port, "127.0.0.1")
    if not _ipv6_available():
        pytest.skip("IPv6 is not available here; IPv4 was checked")
    assert 'kured_reboot_required{node="n1"} 1.0' in _scrape(port, "[::1]")


def test_explicit_loopback_ipv6(metrics: Metrics) -> None:
    if not _ipv6_available():
        pytest.skip("IPv6 is not available here")
    port = metrics.serve("::1", 0)
    assert "pykured_build_info" in _scrape(port, "[::1]")


def test_process_collectors_without_gc_noise(metrics: Metrics) -> None:
    text = _scrape(metrics.serve("127.0.0.1", 0))
    assert "process_resident_memory_bytes" in text
    assert "process_start_time_seconds" in text
    assert "python_info" in text
    assert "python_gc_" not in text
    assert "_created" not in text


@pytest.mark.parametrize(
    ("reason", "expected"),
    [(None, "none"), ("window", "window"), ("pods", "pods"), ("custom-blocker", "custom-blocker")],
    ids=["none", "window", "pods", "new-reason"],
)
def test_blocked_is_one_hot(metrics: Metrics, reason: str | None, expected: str) -> None:
    metrics.set_blocked("lock")
    metrics.set_blocked(reason)
    samples = _samples(_scrape(metrics.serve("127.0.0.1", 0)))
    blocked = {k: v for k, v in samples.items() if k.startswith("pykured_blocked{")}
    assert blocked[f'pykured_blocked{{reason="{expected}"}}'] == 1.0
    assert sum(blocked.values()) == 1.0
    assert set(BLOCK_REASONS) <= {k.split('"')[1] for k in blocked}


def test_pykured_metrics_values(metrics: Metrics) -> None:
    metrics.lock_holders("annotation", 2)
    metrics.lock_freed_gone_node()
    metrics.observe_drain(42.0)
    metrics.reboot("triggered")
    metrics.reboot("completed")
    metrics.reboot("completed")
    metrics.notify_failed("slack")
    metrics.set_handoff("offered")
    metrics.fleetlock_request("v1", "pre-reboot")
    metrics.silence_expiry_failed()
    metrics.silence_expiry_failed()
    metrics.set_silence_expiry_pending("n1", True)
    metrics.set_silence_expiry_pending("n2", True)
    metrics.set_silence_expiry_pending("n2", False)
    samples = _samples(_scrape(metrics.serve("127.0.0.1", 0)))
    assert samples['pykured_lock_holders{backend="annotation"}'] == 2.0
    assert samples["pykured_lock_freed_gone_node_total"] == 1.0
    assert samples["pykured_drain_duration_seconds_count"] == 1.0
    assert samples["pykured_drain_duration_seconds_sum"] == 42.0
    assert samples['pykured_drain_duration_seconds_bucket{le="60.0"}'] == 1.0
    assert samples['pykured_drain_duration_seconds_bucket{le="30.0"}'] == 0.0
    assert samples['pykured_reboots_total{outcome="triggered"}'] == 1.0
    assert samples['pykured_reboots_total{outcome="completed"}'] == 2.0
    assert samples['pykured_reboots_total{outcome="failed"}'] == 0.0
    assert samples['pykured_notification_failures_total{service="slack"}'] == 1.0
    assert samples['pykured_handoff_state{state="offered"}'] == 1.0
    assert samples['pykured_handoff_state{state="none"}'] == 0.0
    assert samples['pykured_fleetlock_requests_total{api="v1",kind="pre-reboot"}'] == 1.0
    assert samples['pykured_build_info{kured_version="1.23.0",version="9.9.9"}'] == 1.0
    assert samples["pykured_silence_expiry_failures_total"] == 2.0
    assert samples['pykured_silence_expiry_pending{node="n1"}'] == 1.0
    assert samples['pykured_silence_expiry_pending{node="n2"}'] == 0.0


def test_lock_wait_clock(metrics: Metrics, monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr("pykured.metrics.registry.time.monotonic", lambda: now[0])
    metrics.lock_waiting(True)
    now[0] = 130.0
    port = metrics.serve("127.0.0.1", 0)
    assert _samples(_scrape(port))["pykured_lock_wait_seconds"] == 30.0
    metrics.lock_waiting(False)
    samples = _samples(_scrape(port))
    assert samples["pykured_lock_wait_seconds"] == 0.0
    assert samples["pykured_lock_wait_duration_seconds_sum"] == 30.0


def test_unknown_reboot_outcome_rejected(metrics: Metrics) -> None:
    with pytest.raises(ValueError, match="unknown reboot outcome"):
        metrics.reboot("exploded")


def test_registries_are_independent() -> None:
    first, second = Metrics(process_collectors=False), Metrics(process_collectors=False)
    first.set_reboot_required("n1", True)
    assert b"n1" in first.render()[0]
    assert b"n1" not in second.render()[0]


def test_serve_twice_rejected_and_close_frees_port(metrics: Metrics) -> None:
    port = metrics.serve("127.0.0.1", 0)
    with pytest.raises(RuntimeError, match="already running"):
        metrics.serve("127.0.0.1", 0)
    metrics.close()
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
    assert metrics.serve("127.0.0.1", port) == port


def test_openmetrics_negotiation(metrics: Metrics) -> None:
    body, content_type = metrics.render("application/openmetrics-text; version=1.0.0")
    assert content_type.startswith("application/openmetrics-text")
    assert body.endswith(b"# EOF\n")


def test_grafana_dashboard_covers_every_metric() -> None:
    dashboard = json.loads(
        (Path(__file__).resolve().parents[2] / "dashboards/pykured-grafana.json").read_text()
    )
    assert dashboard["templating"]["list"][0]["name"] == "datasource"
    exprs = " ".join(t["expr"] for p in dashboard["panels"] for t in p["targets"])
    instance = Metrics(process_collectors=False)
    instance.lock_holders("annotation", 1)
    instance.notify_failed("slack")
    instance.fleetlock_request("v1", "pre-reboot")
    instance.set_reboot_required("n1", True)
    instance.set_quarantined("n1", True)
    names = {
        re.sub(r"_(bucket|sum|count)$", "", line.split("{")[0].split(" ")[0])
        for line in instance.render()[0].decode().splitlines()
        if line and not line.startswith("#")
    }
    assert len(names) >= 12
    assert sorted(name for name in names if name not in exprs) == []


def test_reboot_request_metrics_hold_at_most_one_series(metrics: Metrics) -> None:
    metrics.set_reboot_request("kernel 6.12", "r1")
    metrics.set_reboot_request("cve fix", "")
    text = metrics.render()[0].decode()
    assert "pykured_reboot_request_pending 1.0" in text
    assert 'pykured_reboot_request_info{reason="cve fix",rollout=""} 1.0' in text
    assert "kernel 6.12" not in text
    metrics.set_reboot_request(None)
    text = metrics.render()[0].decode()
    assert "pykured_reboot_request_pending 0.0" in text and "pykured_reboot_request_info{" not in text


@pytest.mark.parametrize("host", ["127.0.0.1", ""])
def test_close_does_not_wait_for_the_idle_servers_hourly_poll(host: str) -> None:
    instance = Metrics(version="9.9.9")
    instance.serve(host, 0)
    closing = threading.Thread(target=instance.close)
    closing.start()
    closing.join(timeout=30)  # without the wake-up connection it would take IDLE_POLL (an hour)
    assert not closing.is_alive()


def test_the_pods_a_drain_waits_on_by_reason_and_gone_with_the_drain() -> None:
    metrics = Metrics(process_collectors=False)
    metrics.set_drain_waiting("n1", {"pdb": 2, "webhook": 1, "a-pod-name": 9})
    value = metrics.registry.get_sample_value
    assert value("pykured_drain_pods_waiting", {"node": "n1", "reason": "pdb"}) == 2.0
    assert value("pykured_drain_pods_waiting", {"node": "n1", "reason": "evicting"}) == 0.0
    assert value("pykured_drain_pods_waiting", {"node": "n1", "reason": "a-pod-name"}) is None  # closed set
    metrics.drain_slow("n1")
    metrics.set_drain_waiting("n1", None)
    assert value("pykured_drain_pods_waiting", {"node": "n1", "reason": "pdb"}) is None
    assert value("pykured_drain_slow_total", {"node": "n1"}) == 1.0
