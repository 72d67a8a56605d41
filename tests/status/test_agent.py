"""The agent's compact status annotation (pure)."""

from __future__ import annotations

import datetime
import json
from typing import Any

from pykured.status import agent as st

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
    return st.build(previous, st.AgentStatus(**fields), now=NOW)  # type: ignore[arg-type]


def test_round_trip_and_compact() -> None:
    status = build(
        sentinel=True,
        request="kernel 6.12",
        step="acquire",
        blocked="alerts",
        blocked_by="Reboot blocked: 1 active alerts: [X]",
        window_opens=NOW,
        lock_wait=True,
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
    second = st.build(first, st.AgentStatus(version="0.1.0", boot_id="boot-b", step="wait"), now=later)
    assert second.last_reboot == later and second.last_boot_id == "boot-a"
    third = st.build(second, st.AgentStatus(version="0.1.0", boot_id="boot-b", step="wait"), now=NOW)
    assert third.last_reboot == later, "carried over, not moved by time"


def test_decode_never_raises() -> None:
    for text in (None, "", "x", "[]", '{"lockHolders": 3, "request": 1}'):
        result = st.decode(text)
        assert result is None or not result.lock_wait


def test_a_wait_for_the_lock_does_not_name_the_holders_and_old_statuses_still_read() -> None:
    text = st.encode(build(step="acquire", lock_wait=True))
    assert '"lockWait":true' in text and "lockHolders" not in text  # no rewrite at each hand-over
    old = st.decode('{"bootID":"b","step":"acquire","lockHolders":["n1"],"v":"0.0.9"}')
    assert old is not None and old.lock_wait


def test_waiting_since_starts_when_a_reboot_is_needed_and_is_kept_until_the_boot_changes() -> None:
    t0 = datetime.datetime(2026, 11, 30, 21, 40, 5, 123, tzinfo=datetime.UTC)
    later = t0 + datetime.timedelta(minutes=5)
    args: dict[str, Any] = {"version": "v", "step": "acquire", "reason": "", "request": None}
    idle = st.build(None, st.AgentStatus(boot_id="b1", sentinel=False, **args), now=t0)
    assert idle.waiting_since is None and "waitingSince" not in st.encode(idle)
    first = st.build(idle, st.AgentStatus(boot_id="b1", sentinel=True, **args), now=t0)
    assert first.waiting_since == t0.replace(microsecond=0)
    kept = st.build(
        st.decode(st.encode(first)), st.AgentStatus(boot_id="b1", sentinel=True, **args), now=later
    )
    assert kept.waiting_since == first.waiting_since and st.encode(kept) == st.encode(first)
    # rebooted, and still needs a reboot
    again = st.build(kept, st.AgentStatus(boot_id="b2", sentinel=True, **args), now=later)
    assert again.waiting_since == later.replace(microsecond=0) and again.last_boot_id == "b1"
    done = st.build(again, st.AgentStatus(boot_id="b2", sentinel=False, **args), now=later)
    assert done.waiting_since is None


def test_an_agent_that_follows_the_rolls_order_says_so() -> None:
    now = datetime.datetime(2026, 11, 30, 21, 40, tzinfo=datetime.UTC)
    status = st.build(None, st.AgentStatus(version="v", boot_id="b", step="wait", resume_rolls=True), now=now)
    assert '"resumeRolls":true' in st.encode(status) and st.decode(st.encode(status)) == status
    plain = st.build(None, st.AgentStatus(version="v", boot_id="b", step="wait"), now=now)
    assert "resumeRolls" not in st.encode(plain) and not plain.resume_rolls


def test_freeze_state_policy_and_last_cycle_round_trip_and_carry_over() -> None:
    now = datetime.datetime(2026, 12, 1, 3, 0, tzinfo=datetime.UTC)
    first = st.build(
        None,
        st.AgentStatus(
            version="0.1.0",
            boot_id="b1",
            step="wait",
            freeze="on",
            policy="kube-system/kured-policy",
            last_cycle_s=610,
        ),
        now=now,
    )
    text = st.encode(first)
    assert '"freeze":"on"' in text and '"policy":"kube-system/kured-policy"' in text
    assert '"lastCycle":610' in text
    assert st.decode(text) == first
    later = st.build(
        first, st.AgentStatus(version="0.1.0", boot_id="b2", step="wait", freeze="forbidden"), now=now
    )
    assert later.last_cycle_s == 610 and later.freeze == "forbidden" and later.policy == ""
    odd = st.decode('{"v":"0.0.9","bootID":"b","step":"wait","lastCycle":true}')
    assert odd is not None and odd.last_cycle_s is None


def test_the_drains_blocker_round_trips_and_is_left_out_when_none() -> None:
    blocked = build(step="drain-and-reboot", sentinel=True, drain_blocked_by="eviction of pod a/b refused: x")
    text = st.encode(blocked)
    assert '"drainBlockedBy":"eviction of pod a/b refused: x"' in text
    assert st.decode(text) == blocked
    assert "drainBlockedBy" not in st.encode(build())


def test_the_drains_record_round_trips_and_a_bad_one_is_absent(caplog: Any) -> None:
    from pykured.drain import progress as dp

    drain = dp.progress([dp.PodHold("apps", "web", dp.PDB, NOW, "web-pdb")], started=NOW)
    status = build(step="drain-and-reboot", sentinel=True, drain=drain)
    assert st.decode(st.encode(status)) == status
    alone = st.AgentStatus(drain=drain)  # a FleetLock server's drain of a node no agent runs on
    assert set(json.loads(st.encode(alone))) == {"drain"}
    assert st.parse(st.encode(alone)) == alone and not alone.from_agent
    data = json.loads(st.encode(status))
    data["drain"] = {"since": "never", "pods": "x"}
    caplog.set_level("WARNING")
    assert st.parse(json.dumps(data)) == build(step="drain-and-reboot", sentinel=True)
    assert [r.getMessage() for r in caplog.records] == [
        f"The drain record in {st.STATUS_ANNOTATION} cannot be read: ignored"
    ]
