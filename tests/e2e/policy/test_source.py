"""The policy ConfigMap on the real API server: watched, refused when bad, and the freeze switch."""

from __future__ import annotations

import datetime
import io
import json
import threading
from collections.abc import Iterator

import pytest

from pykured.blockers.freeze import FreezeBlocker
from pykured.core.errors import KubeError
from pykured.fleet import freeze as freezecmd
from pykured.policy.maintenance import MaintenancePolicy
from pykured.policy.source import PolicySource, PolicyWindow, configmaps_path
from pykured.policy.weekly import TimeWindow
from pykured_dev.eventually import eventually
from tests.testenv import TestEnv

pytestmark = pytest.mark.k8s
UTC = datetime.UTC
ALWAYS = TimeWindow.parse(("su", "mo", "tu", "we", "th", "fr", "sa"), "0:00", "23:59:59", "UTC")


@pytest.fixture
def source(k8s: TestEnv) -> Iterator[tuple[PolicySource, str, threading.Event]]:
    ns = k8s.new_namespace("policy")
    changed = threading.Event()
    src = PolicySource(
        k8s.kube(), namespace=ns, name="kured-policy", zone=UTC, on_change=changed.set, retry_interval=0.2
    )
    yield src, ns, changed
    src.stop()


def put(k8s: TestEnv, ns: str, data: dict[str, str]) -> None:
    kube = k8s.kube()
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kured-policy"}, "data": data}
    try:
        kube.request("PUT", configmaps_path(ns, "kured-policy"), body=obj)
    except KubeError:
        kube.request("POST", configmaps_path(ns), body=obj)


def test_missing_configmap_is_an_empty_policy_and_a_blackout_added_later_closes_the_window(
    k8s: TestEnv, source: tuple[PolicySource, str, threading.Event]
) -> None:
    src, ns, changed = source
    window = PolicyWindow(MaintenancePolicy.build(ALWAYS), src)
    now = datetime.datetime.now(UTC)
    assert not window.contains(now)  # not read yet: fail closed
    assert "not read yet" in window.why_closed(now)
    src.start()
    assert src.doc is not None and window.contains(now)
    changed.clear()
    start, end = (
        (now - datetime.timedelta(hours=1)).isoformat(),
        (now + datetime.timedelta(hours=1)).isoformat(),
    )
    put(k8s, ns, {"blackouts": f"{start}/{end} change freeze"})
    assert changed.wait(10)
    assert not window.contains(now)
    assert window.why_closed(now).startswith("in blackout ")
    assert window.next_open(now) == datetime.datetime.fromisoformat(end)


def test_a_configmap_that_does_not_parse_keeps_the_last_good_policy(
    k8s: TestEnv, source: tuple[PolicySource, str, threading.Event], caplog: pytest.LogCaptureFixture
) -> None:
    src, ns, _ = source
    now = datetime.datetime.now(UTC)
    hour = datetime.timedelta(hours=1)
    put(k8s, ns, {"blackouts": f"{(now - hour).isoformat()}/{(now + hour).isoformat()}"})
    src.start()
    assert src.doc is not None and len(src.doc.blackouts) == 1
    put(k8s, ns, {"blackouts": "23 Dec 16:00 - 2 Jan 10:00"})
    assert eventually(
        lambda: "keeping the last good policy" in caplog.text
    )  # the effect itself, not the state
    assert src.refused is not None and "Refusing policy ConfigMap" in caplog.text
    assert len(src.doc.blackouts) == 1  # still in force
    put(k8s, ns, {})
    assert eventually(lambda: src.refused is None and src.doc is not None and not src.doc.blackouts)


def test_freeze_and_unfreeze_record_who_when_why(
    k8s: TestEnv, source: tuple[PolicySource, str, threading.Event]
) -> None:
    src, ns, _ = source
    put(k8s, ns, {"blackouts": "# none yet\n"})
    src.start()
    blocker = FreezeBlocker(src)
    now = datetime.datetime.now(UTC).replace(microsecond=0)
    assert blocker.check(now=now) is None
    alice = k8s.kube_as("alice", ["system:masters"])
    record = freezecmd.freeze(
        alice,
        namespace=ns,
        name="kured-policy",
        reason="INC-123",
        until=now + datetime.timedelta(hours=2),
        now=now,
    )
    assert record.by == "alice"
    assert eventually(lambda: blocker.check(now=now) is not None)
    reason = blocker.check(now=now)
    assert reason is not None and reason.kind == "freeze"
    assert str(reason).startswith("frozen by alice at ") and str(reason).endswith(": INC-123")
    assert blocker.check(now=now + datetime.timedelta(hours=3)) is None  # expired
    # the other keys are kept
    cm = k8s.kube().request("GET", configmaps_path(ns, "kured-policy"))
    assert cm["data"]["blackouts"] == "# none yet\n"
    out = io.StringIO()
    assert (
        freezecmd.print_status(alice, namespace=ns, name="kured-policy", now=now, out=out, as_json=True) == 0
    )
    status = json.loads(out.getvalue())
    assert status["frozen"] and status["by"] == "alice" and status["reason"] == "INC-123"
    freezecmd.unfreeze(alice, namespace=ns, name="kured-policy")
    assert eventually(lambda: blocker.check(now=now) is None)
    out = io.StringIO()
    freezecmd.print_status(alice, namespace=ns, name="kured-policy", now=now, out=out)
    assert out.getvalue() == "not frozen\n"


def test_freeze_creates_the_configmap_and_unfreeze_of_nothing_is_fine(k8s: TestEnv) -> None:
    ns = k8s.new_namespace("policy")
    kube = k8s.kube_as("bob", ["system:masters"])
    freezecmd.unfreeze(kube, namespace=ns, name="p")
    now = datetime.datetime.now(UTC)
    freezecmd.freeze(kube, namespace=ns, name="p", reason="", until=None, now=now)
    record = freezecmd.read_freeze(kube, namespace=ns, name="p")
    assert record is not None and record.by == "bob" and record.until is None


def test_forbidden_is_one_line_and_the_agent_runs_without_the_freeze(
    k8s: TestEnv, caplog: pytest.LogCaptureFixture
) -> None:
    ns = k8s.new_namespace("policy")
    put(k8s, ns, {"freeze": json.dumps({"reason": "INC-9", "by": "alice", "at": "2026-01-01T00:00:00Z"})})
    nobody = k8s.kube_as(k8s.unique("nobody"))  # no RBAC at all: 403 on configmaps, as kured's
    changed = threading.Event()
    src = PolicySource(
        nobody, namespace=ns, name="kured-policy", zone=UTC, on_change=changed.set, forbidden_interval=0.1
    )
    assert src.honours == "pending"
    caplog.set_level("INFO", logger="pykured.policy.source")
    src.start()
    try:
        assert src.honours == "forbidden" and src.forbidden is not None
        assert changed.is_set()
        now = datetime.datetime.now(UTC)
        assert FreezeBlocker(src).check(now=now) is None  # the freeze is unavailable, not fail-closed
        assert PolicyWindow(MaintenancePolicy.build(ALWAYS), src).contains(now)
        assert eventually(lambda: src.denials >= 4)  # the watch loop retried, quietly
        lines = [r.getMessage() for r in caplog.records if "cannot be read" in r.getMessage()]
        assert len(lines) == 1, lines
        assert lines[0] == (
            f"Policy ConfigMap {ns}/kured-policy cannot be read (forbidden: the agent's RBAC grants no "
            f"get/list/watch on configmaps in {ns}): blackouts from it and the freeze (pykured freeze) are "
            "unavailable; continuing without them"
        )
    finally:
        src.stop()
    admin = PolicySource(k8s.kube(), namespace=ns, name="kured-policy", zone=UTC)
    admin.refresh()
    assert admin.honours == "on" and FreezeBlocker(admin).check(now=datetime.datetime.now(UTC)) is not None
