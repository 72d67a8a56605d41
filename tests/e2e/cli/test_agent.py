"""The agent's process: SIGTERM ends it within the pod's grace period even when a step is blocked."""

from __future__ import annotations

import json
import signal
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from pykured.agent.start import STOP_DEADLINE
from pykured_dev.eventually import eventually
from pykured_dev.soak.proxy import FaultProxy
from pykured_dev.testenv.fleet import Fleet
from pykured_dev.testenv.procs import free_port
from tests.testenv import TestEnv

pytestmark = pytest.mark.k8s


@pytest.fixture
def proxy(k8s: TestEnv) -> Iterator[FaultProxy]:
    proxy = FaultProxy((k8s.host, k8s.port)).start()
    yield proxy
    proxy.close()


def test_sigterm_exits_within_the_grace_period_while_the_api_server_hangs(
    k8s: TestEnv, proxy: FaultProxy, tmp_path: Path
) -> None:
    # Found by the soak: an agent cut off from the API server (requests hang until their 30 s timeout, on
    # every retry) outlived the 30 s grace period after SIGTERM and was killed.
    config = json.loads(Path(k8s.admin_kubeconfig).read_text())
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{proxy.port}"
    kubeconfig = tmp_path / "kubeconfig.json"
    kubeconfig.write_text(json.dumps(config))
    ns = k8s.new_namespace("ds")
    k8s.create_daemonset(ns, "kured")
    (node,) = k8s.add_nodes(k8s.unique("node"))
    port = free_port()
    args = [f"--ds-namespace={ns}", f"--metrics-port={port}", "--metrics-host=127.0.0.1"]
    # exec'd, not forked: the whole process's exit within the grace period, interpreter shutdown included
    with Fleet(
        k8s, workdir=tmp_path / "fleet", args=args, kubeconfig=lambda _n: str(kubeconfig), spawn="exec"
    ) as fleet:
        fleet.add(node)
        assert fleet.wait_for(lambda: "Reboot not required" in fleet.log_text(node), timeout=180), (
            fleet.log_text(node)
        )
        proxy.set_mode("stall")
        fleet.touch(node)  # the next pass blocks on the API server
        # The pass has begun: it read the sentinel (the metric says so) and asks the API server next.
        required = f'kured_reboot_required{{node="{node}"}} 1.0'
        assert eventually(lambda: required in metrics(port), timeout=60), fleet.log_text(node)
        proc = fleet.signal(node, signal.SIGTERM)
        assert proc is not None
        began = time.monotonic()
        proc.wait(timeout=120)
        took = time.monotonic() - began
        assert took < STOP_DEADLINE + 5 < 30, fleet.log_text(node)
        assert "exiting now" in fleet.log_text(node)


def metrics(port: int) -> list[str]:
    """The agent's ``/metrics`` lines (none while it does not answer)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            return str(reply.read().decode()).splitlines()
    except OSError:
        return []
