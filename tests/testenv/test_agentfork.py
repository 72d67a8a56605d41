"""Forked agents behave as exec'd ones: the same output and exit code, the environment given, signals, and
no agent outliving the test process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pykured_dev.eventually import eventually
from pykured_dev.testenv import agentfork

BASE_ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYKURED_SAFE_MODE": "1"}


def _exec(args: list[str], env: dict[str, str], log: Path) -> int:
    with open(log, "ab") as out:
        return subprocess.run(
            [sys.executable, "-m", "pykured", *args],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            check=False,
            timeout=60,
        ).returncode


def _fork(args: list[str], env: dict[str, str], log: Path) -> int:
    return agentfork.spawn(args, env=env, log=str(log)).wait(timeout=60)


def _unreachable_kubeconfig(tmp_path: Path) -> Path:
    """A kubeconfig whose API server never answers: the agent starts and keeps trying."""
    path = tmp_path / "kubeconfig.json"
    cluster = {"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}
    context = {"name": "x", "context": {"cluster": "c", "user": "u"}}
    users = [{"name": "u", "user": {"token": "t"}}]
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "x", "users": users}
    path.write_text(json.dumps({**config, "clusters": [cluster], "contexts": [context]}))
    return path


def _without_times(text: str) -> str:
    return "\n".join(
        line.split(" ", 1)[-1] if line.startswith("time=") else line for line in text.splitlines()
    )


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["--period=bogus"], {}),  # kured's flag error, exit 2
        ([], {"KURED_PERIOD": "bogus"}),  # the environment is the one given: a KURED_* variable is read
        (["--node-id=n1", "--kubeconfig=/nonexistent"], {"TZ": "Europe/Berlin"}),  # a start-up failure
        (["--help"], {}),
    ],
    ids=["bad-flag", "bad-env", "no-kubeconfig", "help"],
)
def test_a_forked_agent_prints_and_exits_as_an_execd_one(
    tmp_path: Path, args: list[str], env: dict[str, str]
) -> None:
    full = {**BASE_ENV, **env}
    execd, forked = tmp_path / "exec.log", tmp_path / "fork.log"
    code = _exec(args, full, execd)
    assert _fork(args, full, forked) == code
    assert _without_times(forked.read_text()) == _without_times(execd.read_text())
    assert forked.read_text()


def test_a_forked_agent_has_only_the_environment_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "KURED_PERIOD", "bogus"
    )  # this process's (and perhaps the fork server's): not the agent's
    log = tmp_path / "agent.log"
    args = ["--node-id=n1", "--kubeconfig=/nonexistent"]
    assert agentfork.spawn(args, env=BASE_ENV, log=str(log)).wait(timeout=60) == 1
    assert "kubeconfig /nonexistent" in log.read_text()
    assert "KURED_PERIOD" not in log.read_text()


def test_signals_poll_and_wait(tmp_path: Path) -> None:
    kubeconfig = _unreachable_kubeconfig(tmp_path)
    log = tmp_path / "agent.log"
    args = [
        "--node-id=n1",
        f"--kubeconfig={kubeconfig}",
        "--metrics-port=0",
        f"--reboot-sentinel={tmp_path}/s",
    ]
    first = agentfork.spawn(args, env=BASE_ENV, log=str(log))
    assert eventually(lambda: log.exists() and "Node ID: n1" in log.read_text(), timeout=30)
    assert first.poll() is None and first.returncode is None
    with pytest.raises(subprocess.TimeoutExpired):
        first.wait(timeout=0.2)
    first.kill()
    assert first.wait(timeout=30) == -signal.SIGKILL
    first.kill()  # gone already: nothing is signalled

    second = agentfork.spawn(args, env=BASE_ENV, log=str(log))

    def in_its_loop() -> bool:  # its SIGTERM handler is set just before; earlier, SIGTERM's default action
        before, _, since = log.read_text().rpartition("Node ID: n1")
        return "Node ID: n1" in before and "Cannot observe node n1" in since

    assert eventually(in_its_loop, timeout=60), log.read_text()
    second.terminate()  # the agent's own SIGTERM handling: a clean exit
    assert second.wait(timeout=60) == 0, log.read_text()


def test_agents_die_with_the_process_that_forked_them(tmp_path: Path) -> None:
    pid_file = tmp_path / "agent.pid"
    kubeconfig = _unreachable_kubeconfig(tmp_path)
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
                import os, time
                from pykured_dev.testenv import agentfork
                agent = agentfork.spawn(
                    ["--node-id=n1", "--kubeconfig={kubeconfig}", "--metrics-port=0"],
                    env={{"PATH": os.environ["PATH"], "PYKURED_SAFE_MODE": "1"}},
                    log="{tmp_path / "agent.log"}",
                )
                open("{pid_file}", "w").write(str(agent.pid))
                time.sleep(600)
            """),
        ]
    )
    try:
        assert eventually(lambda: pid_file.exists() and pid_file.read_text() != "", timeout=60)
        agent = int(pid_file.read_text())
        assert Path(f"/proc/{agent}").exists()
    finally:
        parent.kill()
        parent.wait(timeout=30)

    def gone() -> bool:
        try:
            state = Path(f"/proc/{agent}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        return state == "Z"

    assert eventually(gone, timeout=30)
