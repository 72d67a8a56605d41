"""A local etcd + kube-apiserver (+ kube-controller-manager on demand), identities, a simulated kubelet.

``Cluster(workdir).start()`` brings up etcd and kube-apiserver on free 127.0.0.1 ports with RBAC, the
standard admission chain (minus ServiceAccount and TaintNodesByCondition, which need controllers), waits for
``/readyz`` over mTLS, and writes an admin kubeconfig. Identities are client certificates
(``kube_as(user, groups)``), or real service-account tokens (``sa_token``, ``in_cluster_dir``) so the
in-cluster configuration path of pykured is exercised too.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pykured.core import errors
from pykured.kube.client import Kube, Obj
from pykured_dev.testenv import objects, pki
from pykured_dev.testenv.kubelet import SimulatedKubelet
from pykured_dev.testenv.procs import CORE, Proc, TestEnvError, find_binaries, free_port

READY_TIMEOUT = 90.0
SERVICE_IP = "10.0.0.1"
"""The ``kubernetes`` Service's ClusterIP (the first address of ``--service-cluster-ip-range``)."""


class Cluster(objects.ObjectHelpers):
    """The control plane and its helpers; see the module docstring."""

    __test__ = False  # not a pytest test class, even when imported as TestEnv

    def __init__(
        self,
        workdir: str | None = None,
        *,
        kubelet_max_grace: float = 2.0,
        apiserver_args: Sequence[str] = (),
        service_account_admission: bool = False,
    ) -> None:
        shm = "/dev/shm"  # noqa: S108 - etcd on tmpfs; mkdtemp makes a private directory in it
        base = shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="pykured-k8s-", dir=base))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.pki_dir = self.workdir / "pki"
        self.bindir = find_binaries(CORE)  # kube-controller-manager and kubectl only when used
        self.procs: dict[str, Proc] = {}
        self.host = "127.0.0.1"
        self.port = 0
        self._ids = itertools.count(1)
        self._kube: Kube | None = None
        self.kubelet_max_grace = kubelet_max_grace
        self._kubelet: SimulatedKubelet | None = None
        self.started_in = 0.0
        self.apiserver_args = list(apiserver_args)
        """Extra kube-apiserver flags (an audit policy for benchmarks, say)."""
        self.service_account_admission = service_account_admission
        """Keep the ServiceAccount admission plugin (pods get projected token volumes, as in a real
        cluster; needs kube-controller-manager's serviceaccount and root-ca-cert-publisher controllers)."""

    # -- lifecycle -------------------------------------------------------------------------------------

    def start(self) -> Cluster:
        """Start etcd and kube-apiserver and wait until the API server is ready (retrying port clashes)."""
        began = time.monotonic()
        self._write_pki()
        for attempt in range(3):
            try:
                self._start_etcd()
                self._start_apiserver()
                self._wait_ready()
                break
            except TestEnvError:
                logs = "\n".join(f"--- {p.name}.log ---\n{p.tail()}" for p in self.procs.values())
                self.stop_processes()
                if attempt == 2 or "address already in use" not in logs:
                    raise TestEnvError(f"control plane did not start:\n{logs}") from None
        self.started_in = time.monotonic() - began
        return self

    def stop(self) -> None:
        """Stop everything and remove the work directory.

        Nothing is kept, so nothing waits for a graceful shutdown: kube-apiserver drains its long-running
        requests (kube-controller-manager's watches, say) for 10 s or more after SIGTERM.
        """
        if self._kubelet:
            self._kubelet.stop()
        self.stop_processes(grace=1.0)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def stop_processes(self, *, grace: float = 10.0) -> None:
        """Stop the child processes, newest first: SIGTERM, and SIGKILL ``grace`` seconds later."""
        for proc in reversed(list(self.procs.values())):
            proc.stop(timeout=grace)
        self.procs.clear()

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _write_pki(self) -> None:
        self.pki_dir.mkdir(exist_ok=True)
        serving_ca = pki.CA("pykured-test-serving-ca")
        self.client_ca = pki.CA("pykured-test-client-ca")
        # 10.0.0.1: the ``kubernetes`` Service's address, which pods on real nodes connect to
        serving = serving_ca.issue("kube-apiserver", server=True, ips=(SERVICE_IP,))
        sa = pki.service_account_keys()
        d = self.pki_dir
        self.ca_file = pki.write(str(d / "serving-ca.crt"), serving_ca.cert_pem, mode=0o644)
        pki.write(str(d / "serving.crt"), serving.cert_pem)
        pki.write(str(d / "serving.key"), serving.key_pem)
        pki.write(str(d / "client-ca.crt"), self.client_ca.cert_pem)
        pki.write(str(d / "sa.pub"), sa.cert_pem)
        pki.write(str(d / "sa.key"), sa.key_pem)
        self.ca_pem = serving_ca.cert_pem

    def _start_etcd(self) -> None:
        self.etcd_port, peer = free_port(), free_port()
        data = self.workdir / f"etcd-{uuid.uuid4().hex[:6]}"
        client_url, peer_url = f"http://127.0.0.1:{self.etcd_port}", f"http://127.0.0.1:{peer}"
        self.procs["etcd"] = Proc(
            "etcd",
            [
                str(self.bindir / "etcd"),
                "--name=default",
                f"--data-dir={data}",
                f"--listen-client-urls={client_url}",
                f"--advertise-client-urls={client_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=default={peer_url}",
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
            log_dir=self.workdir,
        )

    def restart_apiserver(self, *, down_seconds: float = 0.0) -> float:
        """Stop kube-apiserver (SIGTERM) and start it again on the same port; etcd keeps its data.

        Returns how long the API server was unavailable (seconds). Clients keep their kubeconfigs: the
        address, the serving certificate and the client CA stay the same.
        """
        began = time.monotonic()
        self.procs.pop("kube-apiserver").stop()
        time.sleep(down_seconds)
        for attempt in range(20):
            self._start_apiserver(port=self.port)
            try:
                self._wait_ready(fresh_identity=False)
                break
            except TestEnvError:
                log = self.procs["kube-apiserver"].tail()
                self.procs.pop("kube-apiserver").stop()
                if attempt == 19 or "address already in use" not in log:
                    raise
                time.sleep(0.5)
        return time.monotonic() - began

    def _start_apiserver(self, *, port: int | None = None) -> None:
        self.port = port or free_port()
        d = self.pki_dir
        self.procs["kube-apiserver"] = Proc(
            "kube-apiserver",
            [
                str(self.bindir / "kube-apiserver"),
                f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={self.port}",
                f"--tls-cert-file={d / 'serving.crt'}",
                f"--tls-private-key-file={d / 'serving.key'}",
                f"--client-ca-file={d / 'client-ca.crt'}",
                f"--service-account-issuer=https://127.0.0.1:{self.port}",
                f"--service-account-key-file={d / 'sa.pub'}",
                f"--service-account-signing-key-file={d / 'sa.key'}",
                "--authorization-mode=RBAC",
                "--disable-admission-plugins="
                + ("" if self.service_account_admission else "ServiceAccount,")
                + "TaintNodesByCondition",
                "--allow-privileged=true",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--endpoint-reconciler-type=none",
                "--profiling=false",
                "--v=1",
                *self.apiserver_args,
            ],
            log_dir=self.workdir,
        )

    def _wait_ready(self, *, fresh_identity: bool = True) -> None:
        if fresh_identity:
            self.admin_kubeconfig = self.kubeconfig_for("pykured-admin", ("system:masters",))
        deadline = time.monotonic() + READY_TIMEOUT
        last = ""
        while time.monotonic() < deadline:
            if not all(p.alive() for p in self.procs.values()):
                raise TestEnvError("a control-plane process exited")
            try:
                kube = Kube.from_kubeconfig(self.admin_kubeconfig, timeout=5)
                kube.request("GET", "/readyz")
                if fresh_identity or self._kube is None:
                    self._kube = kube
                else:
                    kube.close()
                return
            except (errors.KubeError, json.JSONDecodeError) as exc:
                last = str(exc)
                time.sleep(0.25)
        raise TestEnvError(f"/readyz not ready after {READY_TIMEOUT:.0f} s: {last}")

    # -- identities ------------------------------------------------------------------------------------

    @property
    def server(self) -> str:
        """The API server URL."""
        return f"https://{self.host}:{self.port}"

    def kubeconfig_for(self, user: str, groups: tuple[str, ...] | list[str] = ()) -> str:
        """A kubeconfig authenticating as ``user`` in ``groups`` by client certificate."""
        pair = self.client_ca.issue(user, orgs=tuple(groups))
        import base64

        def b64(data: bytes) -> str:
            return base64.b64encode(data).decode()

        config: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "test",
            "clusters": [
                {
                    "name": "test",
                    "cluster": {"server": self.server, "certificate-authority-data": b64(self.ca_pem)},
                }
            ],
            "users": [
                {
                    "name": "u",
                    "user": {
                        "client-certificate-data": b64(pair.cert_pem),
                        "client-key-data": b64(pair.key_pem),
                    },
                }
            ],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "u"}}],
        }
        path = self.workdir / f"kubeconfig-{next(self._ids)}.json"
        pki.write(str(path), json.dumps(config).encode())
        return str(path)

    def kube(self) -> Kube:
        """The admin client."""
        if self._kube is None:
            raise TestEnvError("cluster not started")
        return self._kube

    def kube_as(self, user: str, groups: tuple[str, ...] | list[str] = ()) -> Kube:
        """A client authenticated as ``user`` in ``groups``."""
        return Kube.from_kubeconfig(self.kubeconfig_for(user, groups))

    def sa_token(self, namespace: str, name: str, *, create: bool = True) -> str:
        """A real token for ServiceAccount ``namespace/name`` from the TokenRequest API."""
        if create:
            self.ensure(
                f"/api/v1/namespaces/{namespace}/serviceaccounts",
                {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}},
            )
        answer = self.kube().create(
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": 3600},
            },
        )
        return str(answer["status"]["token"])

    def in_cluster_dir(self, namespace: str, name: str) -> dict[str, str]:
        """A service-account directory (token, ca.crt, namespace) plus the ``KUBERNETES_SERVICE_*`` values."""
        target = self.workdir / f"sa-{namespace}-{name}-{next(self._ids)}"
        target.mkdir()
        pki.write(str(target / "token"), self.sa_token(namespace, name).encode())
        pki.write(str(target / "ca.crt"), self.ca_pem, mode=0o644)
        pki.write(str(target / "namespace"), namespace.encode(), mode=0o644)
        return {
            "dir": str(target),
            "KUBERNETES_SERVICE_HOST": self.host,
            "KUBERNETES_SERVICE_PORT": str(self.port),
        }

    # -- extra components ----------------------------------------------------------------------------------

    def start_kcm(
        self,
        controllers: str = "garbage-collector-controller,disruption-controller,"
        "namespace-controller,replicaset-controller,serviceaccount-controller",
        *,
        extra_args: Sequence[str] = (),
    ) -> None:
        """Start kube-controller-manager (disruption controller, GC, namespaces) once."""
        if "kube-controller-manager" in self.procs:
            return
        bindir = find_binaries(("kube-controller-manager",))
        self.procs["kube-controller-manager"] = Proc(
            "kube-controller-manager",
            [
                str(bindir / "kube-controller-manager"),
                f"--kubeconfig={self.admin_kubeconfig}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
                f"--controllers={controllers}",
                f"--service-account-private-key-file={self.pki_dir / 'sa.key'}",
                f"--root-ca-file={self.ca_file}",
                *extra_args,
            ],
            log_dir=self.workdir,
        )

    def stop_kcm(self) -> None:
        """Stop kube-controller-manager, so that the session's later tests may set PDB status by hand."""
        proc = self.procs.pop("kube-controller-manager", None)
        if proc is not None:
            proc.stop()

    @property
    def kubelet(self) -> SimulatedKubelet:
        """The simulated kubelet, started on first use."""
        if self._kubelet is None:
            self._kubelet = SimulatedKubelet(self.kube(), max_grace=self.kubelet_max_grace)
            self._kubelet.start()
        return self._kubelet

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        """Run the kubectl built for the tests against this cluster as admin; returns stdout."""
        import subprocess

        result = subprocess.run(
            [str(find_binaries(("kubectl",)) / "kubectl"), f"--kubeconfig={self.admin_kubeconfig}", *args],
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
        )
        if check and result.returncode != 0:
            raise TestEnvError(f"kubectl {' '.join(args)} failed: {result.stderr}")
        return result.stdout

    def unique(self, prefix: str = "t") -> str:
        """A name unique in this cluster's lifetime."""
        return f"{prefix}-{uuid.uuid4().hex[:8]}"

    def ensure(self, collection: str, obj: Obj) -> Obj:
        """Create ``obj`` unless it already exists."""
        try:
            return self.kube().create(collection, obj)
        except errors.ConflictError:
            return self.kube().get(f"{collection}/{obj['metadata']['name']}")
