"""The real-node tier's fixture: one control plane (ServiceAccount admission on) and 3 real nodes per worker's
run of the tier (package scope: the fleet ends with the worker's last real-node test, not with its session, so
the inotify instances and cores it holds go back to the machine's other test runs as soon as it is done).

A machine without what real nodes need fails the tier with one line naming what is missing (never a skip);
every process the fixture started is ended when the session ends, whatever happened.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pykured_dev.testenv import Cluster, images
from pykured_dev.testenv.realnode import RealNodeError, RealNodes, require
from tests.e2e.realnode.support import built


@pytest.fixture(scope="package")
def realnodes() -> Iterator[RealNodes]:
    try:
        require()
    except RealNodeError as exc:
        pytest.fail(str(exc), pytrace=False)
    kured = built("kured")
    cluster = Cluster(service_account_admission=True).start()
    nodes = RealNodes(cluster, 3)
    try:
        try:
            nodes.start(extra_images=[images.kured_image(kured)])
        except RealNodeError as exc:
            pytest.fail(str(exc), pytrace=False)
        yield nodes
    finally:
        nodes.stop()
        cluster.stop()
