"""pykured's development kit: the test control plane and the demo. Not shipped in the wheel or the image.

* :mod:`pykured_dev.testenv` — real etcd + kube-apiserver (built by ``tools/testenv-build``), simulated
  nodes and real pykured agents, for the integration tests, the benchmarks and the demo;
* :mod:`pykured_dev.demo` — ``tools/dev demo``: a local fleet rolling its reboots.

``tools/dev setup`` makes it importable in the development virtualenv.
"""
