"""Evictions denied by an admission webhook (Strimzi Drain Cleaner, Longhorn: kured #1269) are retried.

A real validating webhook, served over TLS on 127.0.0.1 by this process, is registered with the test
kube-apiserver for ``pods/eviction`` in one namespace only; it denies the first evictions, then allows them.
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from pykured.core.errors import DrainError, KubeError
from pykured.drain import Drainer
from pykured.drain.drainer import denied_by_webhook
from pykured_dev.testenv import pki

pytestmark = pytest.mark.k8s
RS_REF = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "r1", "controller": True}
MESSAGE = "the pod will be rolled by the cluster operator"
WEBHOOKS = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"


class Webhook:
    """Denies the first ``deny`` eviction reviews (HTTP 500 in the answer, as Strimzi's Drain Cleaner)."""

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


@pytest.fixture
def webhooked(k8s: Any, tmp_path: Path) -> Iterator[tuple[str, str, Webhook]]:
    """A namespace whose pod evictions go through the webhook, a Ready node, the webhook (denies 3)."""
    namespace = k8s.new_namespace("wh")
    node = k8s.unique("node")
    k8s.add_nodes(node)
    hook = Webhook(deny=3, tmp=tmp_path)
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
                # never let an eviction through unreviewed, or the counts below would be off)
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
        yield namespace, node, hook
    finally:
        kube.request("DELETE", f"{WEBHOOKS}/{name}")
        hook.close()


def test_a_denied_eviction_is_retried_until_the_webhook_allows_it(
    k8s: Any, webhooked: tuple[str, str, Webhook], caplog: pytest.LogCaptureFixture
) -> None:
    namespace, node, hook = webhooked
    k8s.create_pod(namespace, "broker-0", node=node, owner=RS_REF)
    told: list[str] = []
    drainer = Drainer(
        k8s.kube(), node=node, timeout=60.0, retry_delay=0.2, max_retry_delay=0.5, poll_interval=0.2,
        on_denied=told.append,
    )  # fmt: skip
    caplog.set_level("WARNING", logger="pykured.drain.drainer")
    result = drainer.drain()
    assert [ref.name for ref in result.evicted] == ["broker-0"]
    assert hook.reviews[:4] == ["broker-0"] * 4  # denied three times, then allowed
    retries = [r.getMessage() for r in caplog.records if "will retry after" in r.getMessage()]
    assert len(retries) >= 3 and all(MESSAGE in line for line in retries[:3]), retries
    assert len(told) == 1  # the same denial is told once (one Event), not at every retry
    assert told[0].startswith(f"eviction of pod {namespace}/broker-0 denied, retrying: admission webhook ")
    assert told[0].endswith(f"denied the request: {MESSAGE} (HTTP 500)")


def test_a_webhook_that_keeps_denying_fails_the_drain_at_the_timeout_with_its_message(
    k8s: Any, webhooked: tuple[str, str, Webhook]
) -> None:
    namespace, node, hook = webhooked
    hook.deny = 10_000
    k8s.create_pod(namespace, "broker-1", node=node, owner=RS_REF)
    drainer = Drainer(k8s.kube(), node=node, timeout=2.0, retry_delay=0.2, max_retry_delay=0.5)
    with pytest.raises(DrainError) as failed:
        drainer.drain()
    text = str(failed.value)
    assert f'error when evicting pods/"broker-1" -n "{namespace}": global timeout reached: 2s' in text
    assert "(eviction denied: admission webhook " in text and MESSAGE in text
    assert len(hook.reviews) >= 3


def test_only_webhook_refusals_are_retryable() -> None:
    assert denied_by_webhook(KubeError('admission webhook "x" denied the request: no (HTTP 500)'))
    assert denied_by_webhook(KubeError('Internal error: failed calling webhook "x": timeout (HTTP 500)'))
    assert not denied_by_webhook(KubeError("pods is forbidden: User cannot create (HTTP 403)"))
