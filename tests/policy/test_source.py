"""The policy source's handling of hostile versions, in process (the watch itself: tests/e2e/policy)."""

from __future__ import annotations

import datetime
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from pykured.blockers.freeze import FreezeBlocker
from pykured.core.errors import ForbiddenError
from pykured.policy import source as policysource
from pykured.policy.freeze import FreezeRecord
from pykured.policy.source import PolicySource
from pykured_dev.eventually import eventually

UTC = datetime.UTC
NOW = datetime.datetime(2026, 11, 30, 21, 0, tzinfo=UTC)
RECORD = FreezeRecord("INC-1", "alice", NOW)


def make(kube: Any = None) -> PolicySource:
    return PolicySource(kube, namespace="kube-system", name="kured-policy", zone=UTC, retry_interval=0.01)


@pytest.mark.parametrize(
    "text", ["{", "[" * 5000, '{"at": 1}', "\ud800"], ids=["open", "deep", "type", "surrogate"]
)
def test_a_garbled_freeze_blocks_every_new_reboot(text: str, caplog: pytest.LogCaptureFixture) -> None:
    src = make()
    assert src.apply({}) and FreezeBlocker(src).check(now=NOW) is None
    assert src.apply({"freeze": text})
    reason = FreezeBlocker(src).check(now=NOW)
    assert reason is not None and reason.kind == "freeze"
    assert reason.message.startswith("frozen: the freeze record cannot be read")
    assert FreezeBlocker(src).frozen(NOW + datetime.timedelta(days=3650))
    said = [r for r in caplog.records if "the freeze record cannot be read" in r.getMessage()]
    assert len(said) == 1 and "treating the fleet as frozen" in said[0].getMessage()
    src.apply({"freeze": text})  # the same version again: said once
    assert len([r for r in caplog.records if "treating the fleet as frozen" in r.getMessage()]) == 1


def test_a_refused_version_keeps_the_blackouts_but_honours_its_freeze(
    caplog: pytest.LogCaptureFixture,
) -> None:
    src = make()
    assert src.apply({"blackouts": "2026-12-23/2026-12-24 holidays"})
    assert not src.apply(
        {"blackouts": "2026-12-23/2026-12-24 holidays", "freez": "typo", "freeze": RECORD.to_json()}
    )
    doc = src.doc
    assert doc is not None and doc.freeze == RECORD and len(doc.blackouts) == 1
    assert src.refused is not None and "unknown key" in src.refused
    assert "honouring the freeze it sets (frozen by alice" in caplog.text
    assert not src.apply({"blackouts": "garbage", "freeze": "[[["})
    assert src.doc is not None and src.doc.freeze is not None and src.doc.freeze.unreadable


def test_a_refused_version_without_a_freeze_keeps_the_last_good_freeze() -> None:
    src = make()
    assert src.apply({"freeze": RECORD.to_json()})
    assert not src.apply({"blackouts": "garbage"})
    assert src.doc is not None and src.doc.freeze == RECORD


def test_a_parser_that_raises_anything_refuses_the_version(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    src = make()
    assert src.apply({"freeze": RECORD.to_json()})

    def broken(data: Any, *, zone: datetime.tzinfo) -> Any:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(policysource, "parse_policy_map", broken)
    assert not src.apply({})
    assert src.doc is not None and src.doc.freeze == RECORD  # the freeze held
    assert src.refused == "unreadable (RecursionError)" and "Traceback" in caplog.text


class Kube:
    """Answers the list; the first list raises a surprise, the watch ends at once."""

    def __init__(self, stop: threading.Event) -> None:
        self.lists = 0
        self.stop = stop

    def request(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        self.lists += 1
        if self.lists == 2:
            raise TypeError("a surprise")
        if self.lists >= 4:
            self.stop.set()
            raise ForbiddenError("enough")
        return {"metadata": {"resourceVersion": "1"}, "items": [{"data": {"freeze": RECORD.to_json()}}]}

    def watch(self, path: str, **kw: Any) -> Iterator[dict[str, Any]]:
        yield {"type": "ERROR", "object": {}}  # 410 Gone: list again


def test_the_watch_thread_survives_a_surprise_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    stop = threading.Event()
    kube = Kube(stop)
    src = make(kube)
    src._forbidden_interval = 0.01
    src.start()
    assert eventually(lambda: kube.lists >= 4, timeout=10)
    src.stop()
    assert src.restarts == 1
    assert "The watch of policy ConfigMap kube-system/kured-policy failed; starting it again" in caplog.text
    assert src.doc is not None and src.doc.freeze is None  # forbidden at the end: the empty policy
