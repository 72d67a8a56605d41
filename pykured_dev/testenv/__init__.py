"""A real Kubernetes control plane for tests, benchmarks and the demo (``tools/dev demo``).

etcd and kube-apiserver (and kube-controller-manager on demand) built from their published Go modules by
``tools/testenv-build``, run on 127.0.0.1 with their own PKI, plus a simulated kubelet that makes Nodes Ready,
runs pods and "reboots" nodes (Ready goes false, then true, with a new ``status.nodeInfo.bootID``).
Needs the ``cryptography`` package (the ``dev`` dependency group).
"""

from pykured_dev.testenv.cluster import Cluster

__all__ = ["Cluster"]
