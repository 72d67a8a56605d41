"""Reboot hooks on FakeKube's Node with an injected clock: the label and stamp they write, the answers they
wait for, their timeout, and what they clear."""

from __future__ import annotations

import datetime

from pykured.core.model import Verdict
from pykured.gates.hooks import RebootHook
from pykured.gates.phase import GatePhase, evaluate
from tests.fakes import FakeKube

UTC = datetime.UTC
HOUR = datetime.timedelta(hours=1)
NOW = datetime.datetime(2026, 11, 30, 21, 40, tzinfo=UTC)


def test_before_reboot_hook_that_answers() -> None:
    kube, node = FakeKube(), "hook-1"
    kube.add_node(node)
    hook = RebootHook(
        kube,
        node=node,
        phase="before",
        annotations=("lb.example.com/drained", "db.example.com/ok"),
    )
    kube.patch_node(node, {"metadata": {"annotations": {"db.example.com/ok": "true"}}})  # a stale answer
    now = NOW
    since = hook.begin(now)
    obj = kube.get_node(node)
    assert obj["metadata"]["labels"]["pykured.dev/before-reboot"] == "true"
    assert hook.since(obj) == since
    phase = GatePhase("before-reboot", [hook], HOUR)
    result = evaluate(phase, obj, since=since, now=now)
    assert result.verdict is Verdict.WAIT
    assert str(result.reason) == "waiting for before-reboot hooks: [lb.example.com/drained db.example.com/ok]"
    # the hook controllers answer
    kube.patch_node(
        node, {"metadata": {"annotations": {"lb.example.com/drained": "true", "db.example.com/ok": "true"}}}
    )
    assert evaluate(phase, kube.get_node(node), since=since, now=now).verdict is Verdict.OPEN
    hook.clear()
    obj = kube.get_node(node)
    assert "pykured.dev/before-reboot" not in obj["metadata"]["labels"]
    assert not {"lb.example.com/drained", "pykured.dev/before-reboot-since"} & set(
        obj["metadata"]["annotations"]
    )


def test_a_hook_that_never_answers_times_out() -> None:
    kube, node = FakeKube(), "hook-1"
    kube.add_node(node)
    hook = RebootHook(kube, node=node, phase="after", annotations=("lb.example.com/ready",))
    start = NOW
    since = hook.begin(start)
    phase = GatePhase("after-reboot", [hook], datetime.timedelta(minutes=10))
    obj = kube.get_node(node)
    assert (
        evaluate(phase, obj, since=since, now=since + datetime.timedelta(minutes=9)).verdict is Verdict.WAIT
    )
    result = evaluate(phase, obj, since=since, now=since + datetime.timedelta(minutes=10))
    assert result.verdict is Verdict.TIMED_OUT and result.reason is not None
