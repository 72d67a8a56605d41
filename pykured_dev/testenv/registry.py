"""A real OCI registry for the tests: the CNCF distribution registry on 127.0.0.1, over TLS from a test CA.

``Registry().start()`` runs the registry built by ``tools/release-build registry`` with filesystem storage in
a temporary directory and a serving certificate from its own :class:`~pykured_dev.testenv.pki.CA` (for
localhost, 127.0.0.1 and any ``ips`` given: the address real nodes reach it at), and returns once
``GET /v2/`` answers 200 over TLS with that CA. ``host`` is ``127.0.0.1:<port>``; ``ca_file`` is the CA's
PEM for clients (podman, cosign, helm, containerd). The registry keeps no credentials (no ``auth``
section): anyone on loopback may push, as on a developer's local registry. Its log (the access log included)
is ``log_path``.

Configuration: https://distribution.github.io/distribution/about/configuration/ (``storage.filesystem``,
``http.tls``, ``storage.delete``). Tracing is off (``OTEL_TRACES_EXPORTER=none``): the registry would
otherwise try to export to a collector.
"""

from __future__ import annotations

import shutil
import ssl
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from pykured_dev.testenv import pki
from pykured_dev.testenv.procs import Proc, TestEnvError, cache_dir, free_port, run_build

READY_TIMEOUT = 60.0


def registry_binary() -> Path:
    """``tools/release-build registry``'s binary, built when missing."""
    path = cache_dir() / "bin" / "current" / "registry"
    if not path.exists():
        run_build("release-build", ["registry"], missing="the registry (tools/release-build registry)")
    return path


def _config(*, port: int, storage: Path, cert: Path, key: Path) -> str:
    return f"""version: 0.1
log:
  level: info
  accesslog:
    disabled: false
storage:
  filesystem:
    rootdirectory: {storage}
  delete:
    enabled: true
  maintenance:
    uploadpurging:
      enabled: false
http:
  addr: 127.0.0.1:{port}
  tls:
    certificate: {cert}
    key: {key}
"""


class Registry:
    """One distribution registry on 127.0.0.1 with TLS; :meth:`stop` ends it and removes its storage."""

    def __init__(self, *, ips: tuple[str, ...] = ()) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="pykured-registry-"))
        self.ca = pki.CA("pykured test registry CA")
        self.port = free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.ca_file = Path(pki.write(str(self.dir / "ca.crt"), self.ca.cert_pem, mode=0o644))
        pair = self.ca.issue("registry", server=True, ips=ips)
        self._cert = Path(pki.write(str(self.dir / "tls.crt"), pair.cert_pem, mode=0o644))
        self._key = Path(pki.write(str(self.dir / "tls.key"), pair.key_pem))
        self.proc: Proc | None = None

    @property
    def log_path(self) -> Path:
        return self.dir / "registry.log"

    def start(self) -> Registry:
        binary = registry_binary()
        storage = self.dir / "storage"
        storage.mkdir()
        config = self.dir / "config.yml"
        config.write_text(_config(port=self.port, storage=storage, cert=self._cert, key=self._key))
        self.proc = Proc(
            "registry",
            [str(binary), "serve", str(config)],
            log_dir=self.dir,
            env={"PATH": "/usr/bin:/bin", "OTEL_TRACES_EXPORTER": "none"},
        )
        deadline = time.monotonic() + READY_TIMEOUT
        while not self.ready():
            if not self.proc.alive() or time.monotonic() > deadline:
                tail = self.proc.tail(20)
                self.stop()
                raise TestEnvError(f"the registry did not become ready:\n{tail}")
            time.sleep(0.1)
        return self

    def ready(self) -> bool:
        """``GET /v2/`` answers 200 over TLS, the server's certificate checked against the test CA."""
        context = ssl.create_default_context(cafile=str(self.ca_file))
        try:
            with urllib.request.urlopen(f"https://{self.host}/v2/", timeout=2, context=context) as resp:
                return int(resp.status) == 200
        except (OSError, urllib.error.URLError):
            return False

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop(timeout=5)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> Registry:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
