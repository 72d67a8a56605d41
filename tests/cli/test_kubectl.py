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

from pykured.cli import agent as cli
from pykured.cli import kubectl
from pykured.config.flags import usage
from pykured.core import errors
from pykured.kube.client import Kube
from pykured_dev.testenv.procs import find_binaries
from tests.testenv import TestEnv

BIN = Path(sys.executable).parent
PLUGIN = BIN / "kubectl-pykured"


# -- the command line (pure) --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["status"], ["status", "--kubeconfig", "/home/u/.kube/config"]),
        (
            ["--context", "prod", "status", "-n", "kured", "-o", "json"],
            ["status", "-o", "json", "--kubeconfig", "/home/u/.kube/config", "--context", "prod",
             "--ds-namespace", "kured"],
        ),
        (
            ["freeze", "--reason", "INC-1", "--namespace=ops", "--context=c", "--kubeconfig=/k"],
            ["freeze", "--reason", "INC-1", "--kubeconfig", "/k", "--context", "c", "--ds-namespace", "ops"],
        ),
        (
            ["request-reboot", "node-1", "--reason", "kernel", "-nkured"],
            ["request-reboot", "node-1", "--reason", "kernel", "--kubeconfig", "/home/u/.kube/config"],
        ),
        (
            ["lock", "release", "node-1", "-n", "x", "--", "-n"],
            ["lock", "release", "node-1", "--kubeconfig", "/home/u/.kube/config", "--ds-namespace", "x",
             "--", "-n"],
        ),
        (["notify-test", "--notify-url", "x://y", "--context", "c"], ["notify-test", "--notify-url", "x://y"]),
    ],
    ids=["defaults", "context-namespace", "equals-forms", "cluster-scoped", "double-dash", "no-cluster"],
)  # fmt: skip
def test_command_line(argv: list[str], expected: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/u")
    assert kubectl.command_line(argv, {}) == expected


def test_a_kubeconfig_list_s_current_context_is_the_first_file_s(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.write_text("apiVersion: v1\nkind: Config\n")
    second.write_text('{"current-context": "two"}')
    (tmp_path / "c").write_text("current-context: three\n")
    listed = os.pathsep.join(str(tmp_path / n) for n in ("missing", "a", "b", "c"))
    assert kubectl.command_line(["status"], {"KUBECONFIG": listed})[-2:] == ["--context", "two"]
    assert kubectl.command_line(["status", "--context", "x"], {"KUBECONFIG": listed})[-2:] == [
        "--context",
        "x",
    ]


def test_a_context_needs_a_kubeconfig(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    with pytest.raises(errors.KubeError, match="--context prod: no kubeconfig"):
        Kube.auto(context="prod")


def test_kubeconfig_follows_kubectl() -> None:
    assert kubectl.kubeconfig_path("/flag", {"KUBECONFIG": "/a:/b"}) == "/flag"
    assert kubectl.kubeconfig_path(None, {"KUBECONFIG": "/a:/b"}) == "/a:/b"
    assert kubectl.kubeconfig_path(None, {}).endswith("/.kube/config")


@pytest.mark.parametrize(
    ("argv", "message"),
    [([], "a command is required"), (["reboot"], "unknown command 'reboot'"), (["status", "-n"], "-n")],
)
def test_command_line_errors(argv: list[str], message: str) -> None:
    with pytest.raises(kubectl.UsageError, match=message):
        kubectl.command_line(argv, {})


def test_plugin_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert kubectl.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Usage: kubectl pykured COMMAND")
    for name, text in cli.COMMANDS:
        assert f"  {name.ljust(14)}   {text}\n" in out
    assert kubectl.main([]) == 2
    assert capsys.readouterr().err == out


# -- --help under each name ----------------------------------------------------------------------------------


def _help(name: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([BIN / name, "--help"], capture_output=True, text=True, timeout=60, check=False)


def test_kured_help_is_kured_s_usage_only() -> None:
    done = _help("kured")
    assert (done.returncode, done.stdout) == (0, "")
    assert done.stderr == usage()
    assert done.stderr.startswith("Usage of kured:\n")
    assert "Commands" not in done.stderr and "request-reboot" not in done.stderr


def test_pykured_help_lists_the_commands_after_the_flags() -> None:
    done = _help("pykured")
    assert (done.returncode, done.stdout) == (0, "")
    flags, _, commands = done.stderr.partition("\nCommands (")
    assert flags == usage("pykured")
    listed = [line.split()[0] for line in commands.splitlines() if line.startswith("  ")]
    assert listed == [
        "status",
        "plan",
        "request-reboot",
        "rollout",
        "freeze",
        "unfreeze",
        "lock",
        "notify-test",
    ]
    assert set(listed) == set(cli._SUBCOMMANDS)


def test_pykured_flag_error_shows_the_commands_too() -> None:
    done = subprocess.run([BIN / "pykured", "--frobnicate"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "\nCommands (" in done.stderr
    assert done.stderr.endswith("unknown flag: --frobnicate\n")


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
