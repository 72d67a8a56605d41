"""A real validating admission webhook for ``pods/eviction``, served over TLS on 127.0.0.1 by this process.

It is registered with the test kube-apiserver for one namespace only and denies the first ``deny`` evictions
(HTTP 500 in the answer, as Strimzi's Drain Cleaner does), then allows them.
"""

from __future__ import annotations

import base64
import contextlib
import json
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from pykured_dev.testenv import pki

MESSAGE = "the pod will be rolled by the cluster operator"
WEBHOOKS = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"


class Webhook:
    """Denies the first ``deny`` eviction reviews; ``reviews`` names the pods it was asked about."""

    def __init__(self, deny: int, tmp: Path) -> None:
        self.deny = deny
        self.reviews: list[str] = []
        ca = pki.CA("pykured-test-webhook-ca")
        pair = ca.issue("127.0.0.1", server=True)
        self.ca_bundle = base64.b64encode(ca.cert_pem).decode()
        cert, key = tmp / "webhook.crt", tmp / "webhook.key"
        pki.write(str(cert), pair.cert_pem)
        pki.write(str(key), pair.key_pem)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                review = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
                request = review["request"]
                outer.reviews.append(request["name"])
                allowed = len(outer.reviews) > outer.deny
                response: dict[str, Any] = {"uid": request["uid"], "allowed": allowed}
                if not allowed:
                    response["status"] = {"code": 500, "message": MESSAGE}
                body = json.dumps(
                    {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, fmt: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(cert), str(key))
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.server.server_address[1]}/validate"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextlib.contextmanager
def evictions_webhook(k8s: Any, namespace: str, tmp: Path, *, deny: int) -> Iterator[Webhook]:
    """The webhook, registered for the evictions of ``namespace``'s pods while the block runs."""
    hook = Webhook(deny=deny, tmp=tmp)
    name = f"{namespace}.evictions.pykured.dev"
    config = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": name,
                "clientConfig": {"url": hook.url, "caBundle": hook.ca_bundle},
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods/eviction"],
                        "scope": "Namespaced",
                    }
                ],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                # only this test's namespace: a call that times out on a loaded machine denies (it must
                # never let an eviction through unreviewed, or the counts of the tests would be off)
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 10,
            }
        ],
    }
    kube = k8s.kube()
    kube.create(WEBHOOKS, config)
    try:
        yield hook
    finally:
        kube.request("DELETE", f"{WEBHOOKS}/{name}")
        hook.close()
