"""``pykured plan`` as a pure function of Nodes, lock holders and the freeze: goldens for each held state."""

from __future__ import annotations

import datetime
import json
import os
from pathlib import Path
from typing import Any

from pykured.cycle.state import NodeState
from pykured.fleet import plan
from pykured.fleet import view as fleetview
from pykured.lock.budget import Budget
from pykured.policy.blackout import Blackout
from pykured.policy.freeze import FreezeRecord
from pykured.policy.pause import PAUSED_ANNOTATION
from pykured.requests import record as rebootrequest
from pykured.status import agent as agentstatus

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
NOW = datetime.datetime(2026, 11, 30, 21, 40, tzinfo=datetime.UTC)
HOUR = datetime.timedelta(hours=1)
S = agentstatus.STATUS_ANNOTATION
R = rebootrequest.REQUEST_ANNOTATION


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("PYKURED_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text(), f"{name} differs:\n{text}"


def node(
    name: str, *, cordoned: bool = False, annotations: dict[str, str] | None = None, **st: Any
) -> NodeState:
    fields: dict[str, Any] = {"version": "0.1.0", "boot_id": f"boot-{name}", "step": "wait", "reason": ""}
    fields.update(st)
    ann = dict(annotations or {})
    if st.get("step") != "none":
        ann[S] = agentstatus.encode(agentstatus.AgentStatus(**fields))
    return NodeState.from_obj({
        "metadata": {"name": name, "annotations": ann},
        "spec": {"unschedulable": cordoned},
        "status": {"nodeInfo": {"bootID": f"boot-{name}"}},
    })  # fmt: skip


def fleet() -> list[NodeState]:
    """One node in each state the plan names."""
    ago = NOW - 3 * HOUR
    request = rebootrequest.format_request(
        rebootrequest.make_request(boot_id="boot-node-2", reason="kernel 6.12", requested_by="alice", now=ago)
    )
    pause = FreezeRecord(reason="disk swap", by="bob", at=ago).to_json()
    return [
        node("node-1", cordoned=True, sentinel=True, step="drain-and-reboot", waiting_since=ago,
             annotations={"pykured.dev/unschedulable-before": "false"}, last_cycle_s=600),
        node("node-2", step="acquire", lock_wait=True, waiting_since=ago + HOUR, annotations={
            rebootrequest.REQUEST_ANNOTATION: request}, last_cycle_s=540, request="kernel 6.12"),
        node("node-3", sentinel=True, window_opens=NOW + 4 * HOUR, waiting_since=ago, last_cycle_s=720),
        node("node-4", sentinel=True, step="blocked", blocked="pause", blocked_by="paused by bob",
             waiting_since=ago, annotations={PAUSED_ANNOTATION: pause}),
        node("node-5", sentinel=True, step="blocked", blocked="prometheus", waiting_since=ago + 2 * HOUR,
             blocked_by="Reboot blocked: 1 active alerts: [KubePodCrashLooping]"),
        node("node-6", last_reboot=NOW - HOUR, last_boot_id="old"),
        node("node-7", step="none"),
    ]  # fmt: skip


LOCKS = [fleetview.LockInfo("annotation", ()), fleetview.LockInfo("lease", ("node-1",))]


def test_plan_table_for_each_held_state() -> None:
    result = plan.build(fleet(), LOCKS, freeze=None, concurrency=1, now=NOW)
    text = plan.render_table(result)
    check_golden("plan_table.txt", text)
    by_node = {r.node: r for r in result.rows}
    assert by_node["node-1"].held_by == ("holds the lock (rebooting)",)
    assert by_node["node-2"].held_by == ("lock held by node-1",)
    assert by_node["node-4"].held_by[0] == "paused by bob at 2026-11-30T18:40:00Z: disk swap"
    assert by_node["node-6"].order is None and by_node["node-7"].needs == "?"
    # 5 waiting, one at a time, median of 540/600/720 s = 600 s
    assert result.estimate.end == NOW + datetime.timedelta(seconds=5 * 600)


def test_plan_when_halted_and_with_what_it_could_not_read() -> None:
    halt = FreezeRecord(reason="node node-9 did not come back within 1h0m0s", by="pykured on node-3",
                        at=NOW - HOUR, halted="node-9")  # fmt: skip
    locks = [fleetview.LockInfo("annotation", error="forbidden (403) for this user"), LOCKS[1]]
    result = plan.build(fleet(), locks, freeze=halt, concurrency=2, now=NOW)
    check_golden("plan_table_halted.txt", plan.render_table(result))
    assert plan.render_table(result).startswith("HALTED: halted by pykured on node-3 at ")
    assert result.estimate.end is None and result.estimate.note == "none while halted"
    unread = plan.build(fleet(), LOCKS, freeze=None, unreadable=["policy ConfigMap x/y: forbidden"], now=NOW)
    assert plan.render_table(unread).endswith("cannot read: policy ConfigMap x/y: forbidden\n")


def test_plan_json() -> None:
    result = plan.build(fleet(), LOCKS, freeze=None, concurrency=2, now=NOW)
    data = plan.to_json(result)
    check_golden("plan.json", json.dumps(data, indent=2, sort_keys=True) + "\n")
    assert data["estimate"]["end"] == "2026-11-30T22:10:00Z"  # ceil(5 / 2) = 3 cycles of 600 s
    # the roll's order: least recently rebooted, then longest waiting (node-2's request is the newest)
    assert [n["order"] for n in data["nodes"]] == [1, 4, 2, 3, 5, None, None]


def test_a_blackout_in_force_names_the_closed_window_and_the_holders_drain_blocker_shows() -> None:
    views = [
        node("node-1", sentinel=True, window_opens=NOW + 4 * HOUR, waiting_since=NOW - HOUR),
        node("node-2", cordoned=True, sentinel=True, step="drain-and-reboot", waiting_since=NOW - HOUR,
             drain_blocked_by="eviction of pod a/b refused: no (HTTP 429)"),
    ]  # fmt: skip
    locks = [fleetview.LockInfo("lease", ("node-2",))]
    week = Blackout(NOW - HOUR, NOW + 4 * HOUR, "release week")
    rows = {r.node: r for r in plan.build(views, locks, freeze=None, blackouts=[week], now=NOW).rows}
    assert rows["node-1"].held_by == ("blackout until 2026-12-01T01:40:00Z: release week",)
    early = Blackout(NOW - HOUR, NOW + 2 * HOUR)  # ends before the window opens: both are said
    rows = {r.node: r for r in plan.build(views, locks, freeze=None, blackouts=[early], now=NOW).rows}
    assert rows["node-1"].held_by == (
        "blackout until 2026-11-30T23:40:00Z; window closed until 2026-12-01T01:40:00Z",
    )
    assert rows["node-2"].held_by == (
        "holds the lock (rebooting)",
        "drain: eviction of pod a/b refused: no (HTTP 429)",
    )
    over = Blackout(NOW - 2 * HOUR, NOW - HOUR)  # past: the agent's own words stay
    rows = {r.node: r for r in plan.build(views, locks, freeze=None, blackouts=[over], now=NOW).rows}
    assert rows["node-1"].held_by == ("window closed until 2026-12-01T01:40:00Z",)


def test_a_node_with_an_unreadable_record_is_one_row_saying_so() -> None:
    bad = NodeState.from_obj({
        "metadata": {"name": "bad", "annotations": {S: "[" * 3000, R: "\x1b[2J"}},
        "status": {"nodeInfo": {"bootID": "boot-bad"}},
    })  # fmt: skip
    good = node("good", sentinel=True)
    result = plan.build([bad, good], [], freeze=None, now=NOW)
    rows = {r.node: r for r in result.rows}
    assert rows["bad"].why.startswith(
        "UNREADABLE: pykured.dev/status: unreadable status record: nested deeper"
    )
    assert "pykured.dev/reboot-request: unreadable reboot request" in rows["bad"].why
    assert rows["good"].needs == "sentinel" and rows["good"].why == "sentinel (as its agent last reported)"
    text = plan.render_table(result)
    assert "\x1b" not in text and len([line for line in text.splitlines() if "UNREADABLE" in line]) == 1


def test_a_garbled_freeze_holds_every_waiting_node() -> None:
    garbled = FreezeRecord.garbled("not JSON: Expecting value")
    result = plan.build([node("a", sentinel=True)], [], freeze=garbled, now=NOW)
    assert result.freeze is garbled
    assert result.rows[0].held_by == ("frozen: the freeze record cannot be read (not JSON: Expecting value); "
                                      "it holds until rewritten",)  # fmt: skip
    assert plan.render_table(result).startswith("FROZEN: frozen: the freeze record cannot be read")


def test_a_budget_sets_the_pace_and_its_limit_is_shown() -> None:
    """``--max-unavailable=25%`` of 12 nodes with ``--concurrency=5``: 3 at a time, and the plan says why."""
    limit = fleetview.LockLimit(5, Budget(25, percent=True), 12)
    result = plan.build(fleet(), LOCKS, freeze=None, concurrency=5, limit=limit, now=NOW)
    text = plan.render_table(result)
    assert "limit: 3 (--concurrency 5, --max-unavailable 25% of 12 nodes)\n" in text
    assert text.index("estimated end") < text.index("limit: 3") < text.index("lock (annotation)")
    assert result.estimate.concurrency == 3
    assert result.estimate.end == NOW + datetime.timedelta(seconds=2 * 600)  # ceil(5 / 3) = 2 cycles
    data = plan.to_json(result)
    assert data["limit"] == {"limit": 3, "concurrency": 5, "maxUnavailable": "25%", "nodes": 12}


def test_a_budget_of_an_unknown_count_shows_one() -> None:
    limit = fleetview.LockLimit(5, Budget(25, percent=True), None)
    result = plan.build(fleet(), LOCKS, freeze=None, concurrency=5, limit=limit, now=NOW)
    assert "limit: 1 (--concurrency 5, --max-unavailable 25% of an unknown number of nodes: 1)" in (
        plan.render_table(result)
    )
    assert result.estimate.concurrency == 1


def test_without_a_budget_the_plan_has_no_limit_line() -> None:
    result = plan.build(fleet(), LOCKS, freeze=None, concurrency=5, now=NOW)
    assert "limit:" not in plan.render_table(result) and "limit" not in plan.to_json(result)


def test_a_quarantined_node_is_held_by_its_quarantine() -> None:
    from pykured.policy.quarantine import QUARANTINED_ANNOTATION, QuarantineRecord

    record = QuarantineRecord.make(reason="drain timed out", at=NOW - HOUR, pods=["ns/a"], cordoned=True)
    marks = {QUARANTINED_ANNOTATION: record.to_json()}
    views = [node("node-q", cordoned=True, sentinel=True, step="blocked", blocked="quarantined",
                  blocked_by="quarantined …", annotations=marks)]  # fmt: skip
    result = plan.build(views, LOCKS, freeze=None, now=NOW)
    (row,) = result.rows
    assert row.held_by == (f"{record.describe()} (pykured unquarantine node-q ends it)",)
