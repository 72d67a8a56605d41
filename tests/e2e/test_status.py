"""``pykured status`` against real cluster states: real agents publish their status on simulated nodes, the
fleet view is read back from the API server and compared with golden output (node names, bootIDs and times
normalised). Regenerate the golden files with ``PYKURED_UPDATE_GOLDEN=1``.
"""

from __future__ import annotations

import datetime
import io
import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from pykured.cli.request_reboot import request_reboot_main
from pykured.cli.status import status_main
from pykured.fleet import requester
from pykured.kube.client import Kube
from pykured.status import agent as agentstatus
from pykured_dev.eventually import eventually
from pykured_dev.testenv.fleet import Fleet
from tests.testenv import TestEnv

pytestmark = [pytest.mark.k8s, pytest.mark.slow]
GOLDEN = Path(__file__).resolve().parents[1] / "golden"
ROOT = Path(__file__).resolve().parents[2]
LOCK = "weave.works/kured-node-lock"
NOW = datetime.datetime(2026, 11, 30, 21, 40, tzinfo=datetime.UTC)


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("PYKURED_UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert text == path.read_text(), f"{name} differs:\n{text}"


def status(k8s: TestEnv, kubeconfig: str, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = status_main([*argv, f"--kubeconfig={kubeconfig}"], out=out, err=err, now=lambda: NOW)
    return code, out.getvalue(), err.getvalue()


def agent_status(k8s: TestEnv, node: str) -> agentstatus.AgentStatus | None:
    annotations = k8s.kube().get_node(node)["metadata"].get("annotations", {})
    return agentstatus.decode(annotations.get(agentstatus.STATUS_ANNOTATION))


@pytest.fixture(scope="module")
def fleet_states(k8s: TestEnv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Five nodes in five states, with real agents (n1-n4) and a lock held by kured's ``manual`` holder.

    n1 rebooted for a request and is idle; n2 has a request and waits for the lock; n3 has its sentinel and
    waits for the lock; n4 has a request but its maintenance window is closed; n5 has no agent and was
    cordoned by an administrator.
    """
    ns = k8s.new_namespace("ds")
    k8s.create_daemonset(ns, "kured")
    pool = k8s.unique("pool")
    prefix = k8s.unique("st")
    names = [f"{prefix}-{i + 1}" for i in range(5)]  # sorted as numbered, like the golden rows
    k8s.add_nodes(*names, labels={"pool": pool})
    fleet = Fleet(
        k8s,
        workdir=tmp_path_factory.mktemp("status-fleet"),
        args=[f"--ds-namespace={ns}", "--period=2s", "--reboot-retry-delay=3s"],
    )
    fleet.__enter__()
    try:
        for node in names[:3]:
            fleet.add(node)
        admin = k8s.admin_kubeconfig

        def request(node: str, reason: str) -> None:
            out, err = io.StringIO(), io.StringIO()
            argv = [node, "--reason", reason, f"--kubeconfig={admin}"]
            assert request_reboot_main(argv, out=out, err=err) == 0, err.getvalue()

        request(names[0], "kernel args")
        assert fleet.wait_for(lambda: fleet.slots[names[0]].reboots == 1, timeout=60), fleet.log_text(
            names[0]
        )

        def idle(node: str) -> Callable[[], bool]:
            def check() -> bool:
                st = agent_status(k8s, node)
                obj = k8s.kube().get_node(node)
                return (
                    st is not None
                    and st.step == "wait"
                    and st.last_reboot is not None  # its status names the new boot
                    and not obj["spec"].get("unschedulable")
                )

            return check

        assert fleet.wait_for(idle(names[0]), timeout=90), fleet.log_text(names[0])
        first = agent_status(k8s, names[0])
        rebooted = first.last_reboot if first else None
        assert rebooted is not None, fleet.log_text(names[0])
        # The roll below must begin after n1's reboot, so that n1 is not in it. The times have second
        # precision, and a waiter's waitingSince is the time its pass began, which can be a second or two
        # before the pass reads the need on a loaded machine: wait until the clock is 3 s past the reboot.
        past = rebooted + datetime.timedelta(seconds=3)
        assert eventually(lambda: datetime.datetime.now(datetime.UTC) > past, timeout=10)
        k8s.kube().request(
            "PATCH",
            f"/apis/apps/v1/namespaces/{ns}/daemonsets/kured",
            body={"metadata": {"annotations": {LOCK: '{"nodeID":"manual"}'}}},
            content_type="application/merge-patch+json",
        )
        request(names[1], "kernel 6.12")
        fleet.touch(names[2])
        tomorrow = (
            (datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=1)).strftime("%a")[:2].lower()
        )
        fleet.args += [f"--reboot-days={tomorrow}", "--time-zone=UTC"]
        fleet.add(names[3])
        request(names[3], "cve fix")
        k8s.kube().patch_node(names[4], {"spec": {"unschedulable": True}})

        def waiting(node: str) -> Callable[[], bool]:
            return lambda: (st := agent_status(k8s, node)) is not None and st.lock_wait

        assert fleet.wait_for(waiting(names[1]), timeout=90), fleet.log_text(names[1])
        assert fleet.wait_for(waiting(names[2]), timeout=90), fleet.log_text(names[2])
        closed = lambda: (st := agent_status(k8s, names[3])) is not None and st.window_opens is not None  # noqa: E731
        assert fleet.wait_for(closed, timeout=90), fleet.log_text(names[3])
        yield {"ns": ns, "pool": pool, "names": names, "fleet": fleet}
    finally:
        fleet.close()


def normalise(text: str, names: list[str], k8s: TestEnv) -> str:
    for i, name in enumerate(names):
        text = text.replace(name, f"node-{i + 1}")
        boot = k8s.boot_id(name)
        if boot:
            text = text.replace(boot, f"<boot-{i + 1}>")
    text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "<time>", text)
    return re.sub(r"\b\d+[smhd] ago\b", "<ago>", text)


def realign(text: str) -> str:
    """Normalising changes cell widths: re-align the table on two-space column gaps."""
    lines = text.splitlines()
    below = [line for line in lines if line.startswith(("lock (", "roll"))]
    table = [re.split(r"\s{2,}", line) for line in lines if line not in below]
    widths = [max(len(row[i]) for row in table if i < len(row)) for i in range(max(map(len, table)))]
    out = ["  ".join(c.ljust(widths[i]) for i, c in enumerate(row)).rstrip() for row in table]
    return "\n".join(out + below) + "\n"


def test_status_table_for_five_states(k8s: TestEnv, fleet_states: dict[str, Any]) -> None:
    code, out, err = status(k8s, k8s.admin_kubeconfig, "-l", f"pool={fleet_states['pool']}",
                            f"--ds-namespace={fleet_states['ns']}")  # fmt: skip
    assert code == 0, err
    check_golden("status_table.txt", realign(normalise(out, fleet_states["names"], k8s)))


def test_status_json(k8s: TestEnv, fleet_states: dict[str, Any]) -> None:
    code, out, err = status(k8s, k8s.admin_kubeconfig, "-l", f"pool={fleet_states['pool']}",
                            f"--ds-namespace={fleet_states['ns']}", "-o", "json")  # fmt: skip
    assert code == 0, err
    data = json.loads(normalise(out, fleet_states["names"], k8s))
    data["roll"]["waiting"].sort()
    check_golden("status.json", json.dumps(data, indent=2, sort_keys=True) + "\n")


def requester_kubeconfig(k8s: TestEnv) -> str:
    """A user bound to kustomize/requester's ClusterRole (created under a unique name)."""
    (role,) = [
        d for d in yaml.safe_load_all((ROOT / "kustomize/requester/clusterrole.yaml").read_text()) if d
    ]
    assert set(role) == {"apiVersion", "kind", "metadata", "rules"}
    config = k8s.kubeconfig_for(k8s.user_with_cluster_role("requester", role["rules"]))
    client = Kube.from_kubeconfig(config)
    assert eventually(lambda: requester.may_patch(client, "any") is True), "the binding never took effect"
    return config


def test_status_with_the_requester_role_says_what_it_cannot_read(
    k8s: TestEnv, fleet_states: dict[str, Any]
) -> None:
    code, out, err = status(k8s, requester_kubeconfig(k8s), "-l", f"pool={fleet_states['pool']}",
                            f"--ds-namespace={fleet_states['ns']}")  # fmt: skip
    assert code == 0, err
    check_golden("status_table_requester.txt", realign(normalise(out, fleet_states["names"], k8s)))


def test_status_with_kureds_agent_rbac_reads_what_it_may_and_says_what_it_cannot(
    k8s: TestEnv, fleet_states: dict[str, Any]
) -> None:
    ns = fleet_states["ns"]
    k8s.apply_rbac_kured(ns)  # get/patch nodes (no list), get daemonsets, no leases
    config = k8s.kubeconfig_for(*k8s.kured_identity(ns))
    code, out, err = status(k8s, config, f"--ds-namespace={ns}")
    assert code == 1 and out == ""
    assert "Traceback" not in err and err.count("\n") == 1
    assert "forbidden" in err and "name the nodes: pykured status NODE..." in err
    code, out, err = status(k8s, config, *fleet_states["names"], f"--ds-namespace={ns}")
    assert code == 0, err
    check_golden("status_table_kured_rbac.txt", realign(normalise(out, fleet_states["names"], k8s)))
