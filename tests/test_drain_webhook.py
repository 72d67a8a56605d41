"""Which eviction refusals are an admission webhook's (retried by the drain; the webhook itself on the real
API server: tests/e2e/test_drain_webhook.py)."""

from __future__ import annotations

from pykured.core.errors import KubeError
from pykured.drain.drainer import denied_by_webhook


def test_only_webhook_refusals_are_retryable() -> None:
    assert denied_by_webhook(KubeError('admission webhook "x" denied the request: no (HTTP 500)'))
    assert denied_by_webhook(KubeError('Internal error: failed calling webhook "x": timeout (HTTP 500)'))
    assert not denied_by_webhook(KubeError("pods is forbidden: User cannot create (HTTP 403)"))
