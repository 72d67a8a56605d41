"""The agent's compact status annotation (pure)."""

from __future__ import annotations

import datetime
import json

from pykured import agentstatus as st

NOW = datetime.datetime(2026, 11, 30, 21, 40, tzinfo=datetime.UTC)


def build(previous: st.AgentStatus | None = None, **kw: object) -> st.AgentStatus:
    fields: dict[str, object] = {
        "version": "0.1.0",
        "boot_id": "boot-a",
        "step": "wait",
        "reason": "Reboot not required",
        "sentinel": False,
        "request": None,
    }
    fields.update(kw)
    return st.build(previous, now=NOW, **fields)  # type: ignore[arg-type]


def test_round_trip_and_compact() -> None:
    status = build(
        sentinel=True,
        request="kernel 6.12",
        step="acquire",
        blocked="alerts",
        blocked_by="Reboot blocked: 1 active alerts: [X]",
        window_opens=NOW,
        lock_holders=("n1",),
    )
    text = st.encode(status)
    assert text == json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
    assert st.decode(text) == status


def test_idle_status_is_small_and_stable() -> None:
    a, b = build(), build()
    assert st.encode(a) == st.encode(b)
    assert st.encode(a) == '{"bootID":"boot-a","reason":"Reboot not required","step":"wait","v":"0.1.0"}'


def test_a_boot_id_change_is_recorded_as_the_last_reboot() -> None:
    first = build()
    later = NOW + datetime.timedelta(hours=1)
    second = st.build(
        first,
        version="0.1.0",
        boot_id="boot-b",
        step="wait",
        reason="",
        sentinel=False,
        request=None,
        now=later,
    )
    assert second.last_reboot == later and second.last_boot_id == "boot-a"
    third = st.build(
        second,
        version="0.1.0",
        boot_id="boot-b",
        step="wait",
        reason="",
        sentinel=False,
        request=None,
        now=NOW,
    )
    assert third.last_reboot == later, "carried over, not moved by time"


def test_decode_never_raises() -> None:
    for text in (None, "", "x", "[]", '{"lockHolders": 3, "request": 1}'):
        result = st.decode(text)
        assert result is None or result.lock_holders == ()
