"""The simulated kubelet against the real API server: what it does to the pods of the nodes it serves."""

from __future__ import annotations

import pytest

from pykured.core import errors
from pykured.drain import Drainer
from tests.testenv import TestEnv

pytestmark = pytest.mark.k8s


def _gone(k8s: TestEnv, namespace: str, name: str) -> bool:
    try:
        k8s.kube().get_pod(namespace, name)
    except errors.NotFoundError:
        return True
    return False


def test_a_node_created_again_finishes_the_pods_evicted_while_it_was_gone(k8s: TestEnv) -> None:
    """A pod whose eviction failed, its Node deleted, the eviction going through late (the budget gone
    meanwhile), the Node created again: its kubelet finishes the deletion, as a kubelet starting on a node
    does with the terminating pods bound to it, and a drain of the node completes. Evicting a pod that is
    terminating already changes nothing, so no watch event would ever tell the kubelet about it again."""
    ns = k8s.new_namespace()
    node = k8s.add_nodes(k8s.unique("node"))[0]
    labels = {"app": "stuck"}
    k8s.create_pod(ns, "stuck", node=node, labels=labels, grace=1)
    k8s.create_pdb(ns, "guard", labels, min_available=1)
    k8s.set_pdb_status(ns, "guard", disruptions_allowed=0)
    with pytest.raises(errors.TooManyRequestsError):
        k8s.kube().evict_pod(ns, "stuck")

    k8s.delete_node(node)
    k8s.kube().request("DELETE", f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/guard")
    k8s.kube().evict_pod(ns, "stuck")
    assert k8s.kube().get_pod(ns, "stuck")["metadata"].get("deletionTimestamp")
    k8s.add_nodes(node)

    drainer = Drainer(k8s.kube(), node=node, timeout=10.0, poll_interval=0.2)
    drainer.cordon()
    drainer.drain()
    assert _gone(k8s, ns, "stuck")
