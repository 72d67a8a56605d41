"""``kubectl pykured``: the plugin executable reaches the cluster as kubectl does, and ``--help`` texts.

The k8s tests run the installed ``kubectl-pykured`` console script (and once the real kubectl, which finds it
on ``PATH``) against the test control plane with a kubeconfig holding two contexts: ``nobody`` (current; a
user without any permission) and ``admin``; so a command reaching the wrong context fails visibly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pykured.cli import kubectl
from pykured_dev.testenv.procs import find_binaries
from tests.testenv import TestEnv

BIN = Path(sys.executable).parent
PLUGIN = BIN / "kubectl-pykured"


# -- against the API server ----------------------------------------------------------------------------------


def two_contexts(k8s: TestEnv, path: Path) -> Path:
    """A kubeconfig with contexts ``nobody`` (current, no permissions) and ``admin`` (system:masters)."""
    merged: dict[str, Any] = {"apiVersion": "v1", "kind": "Config", "current-context": "nobody"}
    for name, user, groups in (("nobody", "nobody", ()), ("admin", "plugin-admin", ("system:masters",))):
        one = json.loads(Path(k8s.kubeconfig_for(user, groups)).read_text())
        merged.setdefault("clusters", []).append({"name": name, "cluster": one["clusters"][0]["cluster"]})
        merged.setdefault("users", []).append({"name": name, "user": one["users"][0]["user"]})
        merged.setdefault("contexts", []).append({"name": name, "context": {"cluster": name, "user": name}})
    path.write_text(json.dumps(merged))
    return path


def plugin(*argv: str, env: dict[str, str], exe: Path | None = None) -> subprocess.CompletedProcess[str]:
    base = {"PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "HOME": env.pop("HOME", "/nonexistent")}
    return subprocess.run(
        [str(exe or PLUGIN), *argv], env={**base, **env}, capture_output=True, text=True, timeout=120
    )


@pytest.mark.k8s
def test_commands_use_kubectl_s_context_namespace_and_kubeconfig(k8s: TestEnv, tmp_path: Path) -> None:
    config = two_contexts(k8s, tmp_path / "config")
    ns = k8s.new_namespace("plugin")
    k8s.create_daemonset(ns, "kured")
    (node,) = k8s.add_nodes(k8s.unique("plugin-node"))
    env = {"KUBECONFIG": str(config)}

    # the current context (nobody) is refused by the API server: the plugin did use it
    refused = plugin("status", node, env=dict(env))
    assert refused.returncode == 1, refused
    assert "forbidden" in refused.stderr.lower() or "403" in refused.stderr, refused.stderr

    shown = plugin("--context", "admin", "status", node, "-o", "json", "-n", ns, env=dict(env))
    assert shown.returncode == 0, shown.stderr
    assert [row["node"] for row in json.loads(shown.stdout)["nodes"]] == [node]

    asked = plugin("request-reboot", node, "--reason", "kernel args", "--context=admin", env=dict(env))
    assert asked.returncode == 0, asked.stderr
    annotations = k8s.kube().get_node(node)["metadata"]["annotations"]
    assert "kernel args" in annotations["pykured.dev/reboot-request"]

    frozen = plugin("freeze", "--reason", "INC-7", "--context", "admin", "--namespace", ns, env=dict(env))
    assert frozen.returncode == 3, frozen.stderr  # set, with the warning that no agent runs here to honour it
    assert "no agent honours this freeze" in frozen.stderr
    policy = k8s.kube().get(f"/api/v1/namespaces/{ns}/configmaps/kured-policy")
    assert "INC-7" in json.dumps(policy["data"])
    assert plugin("unfreeze", "--context", "admin", "-n", ns, env=dict(env)).returncode == 0

    locked = plugin("lock", "status", f"-n{ns}", "--context", "admin", env=dict(env))
    assert locked.returncode == 0, locked.stderr
    assert locked.stdout == "No lock holders.\n"  # it read the DaemonSet in ns (kube-system has none)

    # KUBECONFIG as a list (kubectl merges it; the first file's current context wins), and ~/.kube/config
    admin_only = Path(k8s.kubeconfig_for("plugin-admin", ("system:masters",)))
    listed = plugin("status", node, env={"KUBECONFIG": f"{admin_only}{os.pathsep}{config}"})
    assert listed.returncode == 0, listed.stderr
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    (home / ".kube" / "config").write_text(config.read_text())
    from_home = plugin("--context", "admin", "status", node, env={"HOME": str(home)})
    assert from_home.returncode == 0, from_home.stderr
    flagged = plugin("status", node, "--kubeconfig", str(admin_only), env=dict(env))
    assert flagged.returncode == 0, flagged.stderr


@pytest.mark.k8s
@pytest.mark.timeout(1800)  # kubectl is built on first use
def test_kubectl_finds_the_plugin_on_path(k8s: TestEnv, tmp_path: Path) -> None:
    config = two_contexts(k8s, tmp_path / "config")
    (node,) = k8s.add_nodes(k8s.unique("plugin-node"))
    kubectl_bin = find_binaries(("kubectl",)) / "kubectl"
    env = {"KUBECONFIG": str(config)}
    helped = plugin("pykured", "--help", env=dict(env), exe=kubectl_bin)
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout == kubectl.help_text()
    shown = plugin("pykured", "status", node, "--context", "admin", env=dict(env), exe=kubectl_bin)
    assert shown.returncode == 0, shown.stderr
    assert node in shown.stdout


@pytest.mark.k8s
def test_the_agent_does_not_read_kubeconfig_env(tmp_path: Path, k8s: TestEnv) -> None:
    """kured's rule: in-cluster unless --kubeconfig; $KUBECONFIG is not the agent's business."""
    done = subprocess.run(
        [BIN / "kured"],
        env={"PATH": os.environ.get("PATH", ""), "KURED_NODE_ID": "n", "KUBECONFIG": k8s.admin_kubeconfig},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "unable to load in-cluster configuration" in done.stderr
