"""``pykured freeze`` and ``unfreeze`` as operators run them: a process, a kubeconfig, the real API server."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from pykured.metrics import Metrics
from tests.testenv import TestEnv

pytestmark = pytest.mark.k8s


def run(*args: str, kubeconfig: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KURED_")}
    return subprocess.run(
        [sys.executable, "-m", "pykured", *args, f"--kubeconfig={kubeconfig}"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_freeze_status_unfreeze(k8s: TestEnv) -> None:
    ns = k8s.new_namespace("freeze")
    kubeconfig = k8s.kubeconfig_for("carol", ["system:masters"])
    where = (f"--ds-namespace={ns}", "--policy-configmap=kured-policy")
    done = run("freeze", "--reason", "INC-123", "--until", "+2h", *where, kubeconfig=kubeconfig)
    # no agent watches this namespace's ConfigMap: the freeze is written, and the command says so
    assert done.returncode == 3, done.stderr
    assert done.stdout.startswith("frozen by carol at ") and ": INC-123" in done.stdout
    assert "\nhonoured by 0 of " in done.stdout
    assert done.stderr.startswith("warning: no agent honours this freeze: reboots go on.")
    status = run("freeze", "--status", "--json", *where, kubeconfig=kubeconfig)
    record = json.loads(status.stdout)
    assert record["frozen"] is True and record["by"] == "carol" and record["reason"] == "INC-123"
    assert "until" in record
    assert run("unfreeze", *where, kubeconfig=kubeconfig).returncode == 0
    assert run("freeze", "--status", *where, kubeconfig=kubeconfig).stdout == "not frozen\n"


def test_bad_input_is_one_line(k8s: TestEnv) -> None:
    kubeconfig = k8s.kubeconfig_for("carol", ["system:masters"])
    bad = run("freeze", "--reason", "x", "--until", "yesterday", kubeconfig=kubeconfig)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "invalid --until" in bad.stderr
    missing = run("freeze", kubeconfig=kubeconfig)
    assert missing.returncode == 2 and "--reason is required" in missing.stderr


def test_freeze_metric_is_computed_at_scrape_time() -> None:
    frozen = [False]
    metrics = Metrics(process_collectors=False)
    metrics.watch_freeze(lambda: frozen[0])
    assert "pykured_freeze_active 0.0" in metrics.render()[0].decode()
    frozen[0] = True
    assert "pykured_freeze_active 1.0" in metrics.render()[0].decode()


def test_pause_and_unpause_nodes(k8s: TestEnv) -> None:
    ns = k8s.new_namespace("pause")
    node, other = k8s.add_nodes(k8s.unique("pause"), k8s.unique("pause"))
    kubeconfig = k8s.kubeconfig_for("carol", ["system:masters"])
    where = (f"--ds-namespace={ns}",)
    done = run("freeze", node, "--reason", "disk", *where, kubeconfig=kubeconfig)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{node}: paused by carol at ") and done.stdout.endswith(": disk\n")
    annotations = k8s.kube().get_node(node)["metadata"]["annotations"]
    assert json.loads(annotations["pykured.dev/paused"])["reason"] == "disk"
    assert "pykured.dev/paused" not in k8s.kube().get_node(other)["metadata"].get("annotations", {})
    status = run("freeze", "--status", *where, kubeconfig=kubeconfig)
    assert status.stdout.startswith("not frozen\n") and f"node {node}: paused by carol" in status.stdout
    assert run("unfreeze", node, *where, kubeconfig=kubeconfig).returncode == 0
    assert "pykured.dev/paused" not in k8s.kube().get_node(node)["metadata"].get("annotations", {})
    unknown = run("freeze", "no-such-node-x", "--reason", "r", *where, kubeconfig=kubeconfig)
    assert unknown.returncode == 1 and unknown.stderr.count("\n") == 1
