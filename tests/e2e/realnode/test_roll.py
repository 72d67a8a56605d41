"""A roll of 3 real nodes by sentinel: the pykured image from ``kustomize/base`` as a real DaemonSet.

The DaemonSet controller schedules the agent pods on real kubelets; a Deployment's pods under a
PodDisruptionBudget are really evicted (their containers stopped) and rescheduled by kube-scheduler; each
node reboots through its own PID 1 (``nsenter -m/proc/1/ns/mnt -- /bin/systemctl reboot`` from the hostPID
pod) and comes back with a new boot id.
"""

from __future__ import annotations

import pytest

from pykured_dev.testenv.history import History, Roll
from pykured_dev.testenv.realnode import RealNodes
from tests.e2e.realnode import support as s

pytestmark = [
    pytest.mark.k8s,
    pytest.mark.slow,
    pytest.mark.realnode,
    pytest.mark.timeout(1500),  # with INOTIFY_WAIT: the first test starts the fleet
]


def test_roll_of_three_real_nodes_by_sentinel(realnodes: RealNodes) -> None:
    fleet = realnodes
    s.reset(fleet)
    names = [n.name for n in fleet.nodes]
    ns = fleet.cluster.unique("work")
    s.workload(fleet, ns)
    s.wait_for("the workload", lambda: s.workload_available(fleet, ns), fleet)
    s.apply(fleet, s.kustomize_base(fleet.pykured_image))
    s.wait_for("the agents on every node", lambda: s.ds_rolled_out(fleet, fleet.pykured_image), fleet)
    for pod in s.agent_pods(fleet).values():  # the token came through the projected volume
        volumes = [v["name"] for v in pod["spec"]["volumes"]]
        assert any(v.startswith("kube-api-access-") for v in volumes), volumes
    originals = set(s.workload_pods(fleet, ns))
    before = s.boot_ids(fleet)
    own_reboots = {n.name: n.reboots for n in fleet.nodes}
    with History(fleet.cluster.kube()) as history:
        for node in fleet.nodes:
            (node.run_dir / "reboot-required").touch()
        s.wait_for("all three nodes rebooted and settled", lambda: s.settled(fleet, before, names), fleet)
        s.wait_for("the workload again", lambda: s.workload_available(fleet, ns), fleet)
        roll = Roll.of(
            history.changes(), daemonset=f"{s.NS}/{s.DS}", annotation=s.KURED_ANNOTATION, nodes=names
        )
    assert roll.max_cordoned == 1, roll
    assert roll.reboots() == dict.fromkeys(names, 1), roll.boot_ids
    assert {n.name: n.reboots - own_reboots[n.name] for n in fleet.nodes} == dict.fromkeys(names, 1)
    assert not originals & set(s.workload_pods(fleet, ns)), "every original workload pod was evicted"
    for where, pod in s.agent_pods(fleet).items():  # the agents came back with their nodes
        statuses = pod["status"].get("containerStatuses") or []
        assert statuses and statuses[0]["restartCount"] >= 1, (where, statuses)
