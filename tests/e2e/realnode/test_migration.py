"""kured → pykured as users migrate: kured's chart 6.1.0, then the same chart with only the image swapped.

The real kured 1.23.0 binary (``tools/kured-build``, packaged as an image over busybox) runs as the chart's
DaemonSet on 3 real nodes; every node needs a reboot; once kured holds its lock and has cordoned a node (mid
cycle), the chart is applied again with pykured's image and the real DaemonSet controller rolls the pods. The
lock and the cycle carry over: every node reboots exactly once, never two cordoned at once, none left
cordoned, the lock released.
"""

from __future__ import annotations

import pytest

from pykured_dev.testenv import images
from pykured_dev.testenv.history import History, Roll
from pykured_dev.testenv.realnode import RealNodes
from tests.e2e.realnode import support as s

pytestmark = [
    pytest.mark.k8s,
    pytest.mark.slow,
    pytest.mark.realnode,
    pytest.mark.timeout(1500),  # with INOTIFY_WAIT: the first test starts the fleet
]


def test_kured_chart_to_pykured_by_the_daemonsets_rolling_update(realnodes: RealNodes) -> None:
    fleet = realnodes
    s.reset(fleet)
    names = [n.name for n in fleet.nodes]
    kured_repo, kured_tag = images.KURED_IMAGE.rsplit(":", 1)
    repo, tag = fleet.pykured_image.rsplit(":", 1)
    s.apply(fleet, s.chart(kured_repo, kured_tag))
    s.wait_for("kured on every node", lambda: s.ds_rolled_out(fleet, images.KURED_IMAGE), fleet)
    before = s.boot_ids(fleet)
    own_reboots = {n.name: n.reboots for n in fleet.nodes}
    with History(fleet.cluster.kube()) as history:
        for node in fleet.nodes:
            (node.run_dir / "reboot-required").touch()
        s.wait_for(
            "kured to hold its lock and cordon a node",
            lambda: bool(s.annotation_holders(fleet)) and bool(s.cordoned(fleet)),
            fleet,
        )
        first = s.annotation_holders(fleet)
        s.apply(fleet, s.chart(repo, tag))
        s.wait_for("pykured on every node", lambda: s.ds_rolled_out(fleet, fleet.pykured_image), fleet)
        s.wait_for("every node rebooted and settled", lambda: s.settled(fleet, before, names), fleet)
        roll = Roll.of(
            history.changes(), daemonset=f"{s.NS}/{s.DS}", annotation=s.KURED_ANNOTATION, nodes=names
        )
    assert len(first) == 1 and first[0] in names
    assert roll.reboots() == dict.fromkeys(names, 1), roll.boot_ids
    assert {n.name: n.reboots - own_reboots[n.name] for n in fleet.nodes} == dict.fromkeys(names, 1)
    assert roll.max_cordoned == 1
    assert roll.max_holders == 1
    assert not roll.holders and not roll.cordoned
