"""Evictions denied by an admission webhook (Strimzi Drain Cleaner, Longhorn: kured #1269) are retried.

A real validating webhook (:mod:`tests.webhooks`), served over TLS on 127.0.0.1 by this process, is registered
with the test kube-apiserver for ``pods/eviction`` in one namespace only; it denies the first evictions, then
allows them.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pykured.cli.status import status_main
from pykured.core.errors import DrainError
from pykured.drain import Drainer
from pykured.status import agent as agentstatus
from pykured_dev.testenv.fleet import Fleet
from tests.webhooks import MESSAGE, Webhook, evictions_webhook

pytestmark = pytest.mark.k8s
RS_REF = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "r1", "controller": True}


@pytest.fixture
def webhooked(k8s: Any, tmp_path: Path) -> Iterator[tuple[str, str, Webhook]]:
    """A namespace whose pod evictions go through the webhook, a Ready node, the webhook (denies 3)."""
    namespace = k8s.new_namespace("wh")
    node = k8s.unique("node")
    k8s.add_nodes(node)
    with evictions_webhook(k8s, namespace, tmp_path, deny=3) as hook:
        yield namespace, node, hook


def test_a_denied_eviction_is_retried_until_the_webhook_allows_it(
    k8s: Any, webhooked: tuple[str, str, Webhook], caplog: pytest.LogCaptureFixture
) -> None:
    namespace, node, hook = webhooked
    k8s.create_pod(namespace, "broker-0", node=node, owner=RS_REF)
    told: list[str] = []
    blockers: list[str] = []
    drainer = Drainer(
        k8s.kube(), node=node, timeout=60.0, retry_delay=0.2, max_retry_delay=0.5, poll_interval=0.2,
        on_denied=told.append, on_blocked=blockers.append,
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
    # the drain's blocker for the agent's status: the same denial once, then cleared by the completed drain
    assert blockers == [told[0].replace("denied, retrying:", "refused:"), ""], blockers


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


@pytest.mark.slow
def test_an_agent_publishes_the_webhooks_denial_and_pykured_status_shows_it(k8s: Any, tmp_path: Path) -> None:
    """A real agent drains its node; the webhook denies: ``pykured status`` (table and JSON) shows its message
    while the drain retries it; once allowed, the node reboots and the blocker is gone from the status."""
    ns = k8s.new_namespace("ds")
    k8s.create_daemonset(ns, "kured")
    workloads = k8s.new_namespace("wh")
    node = k8s.unique("node")
    k8s.add_nodes(node)
    k8s.create_pod(workloads, "broker-0", node=node, owner=RS_REF)

    def published() -> str:
        annotations = k8s.kube().get_node(node)["metadata"].get("annotations", {})
        status = agentstatus.decode(annotations.get(agentstatus.STATUS_ANNOTATION))
        return status.drain_blocked_by if status is not None else "?"

    with (
        evictions_webhook(k8s, workloads, tmp_path, deny=10_000) as hook,
        Fleet(k8s, workdir=tmp_path / "fleet", args=[f"--ds-namespace={ns}", "--period=2s"]) as fleet,
    ):
        fleet.add(node)
        fleet.touch(node)
        assert fleet.wait_for(lambda: MESSAGE in published(), timeout=60), fleet.log_text(node)
        expected = (
            f'drain: eviction of pod {workloads}/broker-0 refused: admission webhook "{workloads}.evictions'
            f'.pykured.dev" denied the request: {MESSAGE} (HTTP 500)'
        )
        out, err = io.StringIO(), io.StringIO()
        argv = [node, f"--ds-namespace={ns}", f"--kubeconfig={k8s.admin_kubeconfig}"]
        assert status_main(argv, out=out, err=err) == 0, err.getvalue()
        (row,) = [line for line in out.getvalue().splitlines() if line.startswith(node)]
        assert expected in row and "draining" in row, out.getvalue()
        out = io.StringIO()
        assert status_main([*argv, "-o", "json"], out=out, err=err) == 0, err.getvalue()
        (data,) = json.loads(out.getvalue())["nodes"]
        assert data["drainBlockedBy"] == expected.removeprefix("drain: ")
        assert data["blockedBy"] == expected
        assert fleet.slots[node].reboots == 0
        hook.deny = 0  # the webhook lets the eviction through: the drain completes, the node reboots
        assert fleet.wait_for(lambda: fleet.slots[node].reboots == 1, timeout=60), fleet.log_text(node)
        assert fleet.wait_for(lambda: published() == "", timeout=90), fleet.log_text(node)
