"""The fleet view and rollout progress as pure functions of Node objects."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from pykured.cycle.state import NodeState
from pykured.fleet import rollout
from pykured.fleet import view as fleetview
from pykured.lock.budget import Budget
from pykured.requests import record as rebootrequest
from pykured.status import agent as agentstatus

NOW = datetime.datetime(2026, 11, 30, 21, 40, tzinfo=datetime.UTC)


def status(**kw: Any) -> str:
    fields: dict[str, Any] = {
        "version": "0.1.0",
        "boot_id": "b1",
        "step": "wait",
        "reason": "",
        "sentinel": False,
    }
    fields.update(kw)
    fields.setdefault("request", None)
    return agentstatus.encode(agentstatus.AgentStatus(**fields))


def req(boot: str = "b1", reason: str = "kernel 6.12", rollout_id: str = "") -> str:
    r = rebootrequest.make_request(
        boot_id=boot, reason=reason, requested_by="alice", now=NOW, rollout=rollout_id
    )
    return rebootrequest.format_request(r)


S = agentstatus.STATUS_ANNOTATION
R = rebootrequest.REQUEST_ANNOTATION


def row(view: NodeState, holders: tuple[str, ...] = ()) -> fleetview.Row:
    return fleetview.node_row(view, holders=holders, now=NOW)


def test_blocked_by_alerts_names_them() -> None:
    text = status(
        sentinel=True, step="blocked", blocked="prometheus", blocked_by="Reboot blocked: 1 active alerts: [X]"
    )
    view = NodeState.from_obj(
        {"metadata": {"name": "n", "annotations": {S: text}}, "status": {"nodeInfo": {"bootID": "b1"}}}
    )
    r = row(view)
    assert r.needs_reboot == "sentinel" and r.blocked_by == "Reboot blocked: 1 active alerts: [X]"


def test_cycle_steps_from_pykureds_memory() -> None:
    base = {S: status(step="drain-and-reboot", sentinel=True)}
    draining = NodeState.from_obj({
        "metadata": {"name": "n", "annotations": {**base, "pykured.dev/unschedulable-before": "false"}},
        "spec": {"unschedulable": True}, "status": {"nodeInfo": {"bootID": "b1"}},
    })  # fmt: skip
    assert row(draining).step == "draining" and row(draining).cordoned == "pykured"
    rebooting = NodeState.from_obj({
        "metadata": {"name": "n", "annotations": {**base, "pykured.dev/unschedulable-before": "false",
                                                  "pykured.dev/reboot-boot-id": "b1"}},
        "spec": {"unschedulable": True}, "status": {"nodeInfo": {"bootID": "b1"}},
    })  # fmt: skip
    assert row(rebooting).step == "rebooting"
    fleetlock = NodeState.from_obj(
        {"metadata": {"name": "n", "annotations": {"pykured.dev/fleetlock-id": "z"}}}
    )
    assert row(fleetlock).step == "fleetlock (zincati)"


def test_a_silenced_node_says_until_when() -> None:
    record = '{"id":"6f9b4e2a-0b1c-4d5e-8f90-123456789abc","until":"2026-11-30T23:40:00Z"}'
    annotations = {S: status(step="drain-and-reboot", sentinel=True), "pykured.dev/silence": record,
                   "pykured.dev/unschedulable-before": "false",
                   "pykured.dev/reboot-boot-id": "b1"}  # fmt: skip
    view = NodeState.from_obj({
        "metadata": {"name": "n", "annotations": annotations},
        "spec": {"unschedulable": True}, "status": {"nodeInfo": {"bootID": "b1"}},
    })  # fmt: skip
    r = row(view)
    assert r.silenced_until == datetime.datetime(2026, 11, 30, 23, 40, tzinfo=datetime.UTC)
    assert r.cells(NOW)[5] == "rebooting, silenced until 2026-11-30T23:40:00Z"
    assert fleetview.to_json([r], [])["nodes"][0]["silencedUntil"] == "2026-11-30T23:40:00Z"
    garbled = NodeState.from_obj({"metadata": {"name": "n", "annotations": {"pykured.dev/silence": "{"}}})
    assert row(garbled).silenced_until is None and "silenced" not in row(garbled).cells(NOW)[5]
    assert "silencedUntil" not in fleetview.to_json([row(garbled)], [])["nodes"][0]


def test_a_silence_whose_expiry_failed_says_since_when() -> None:
    """The slot was freed, the silence's expiry failed and is being retried: ``pykured status`` says so."""
    record = ('{"id":"6f9b4e2a-0b1c-4d5e-8f90-123456789abc","until":"2026-11-30T23:40:00Z",'
              '"expireDue":"2026-11-30T22:05:00Z"}')  # fmt: skip
    annotations = {S: status(step="wait", reason="Reboot not required"), "pykured.dev/silence": record}
    r = row(NodeState.from_obj({"metadata": {"name": "n", "annotations": annotations}}))
    assert r.silence_due == datetime.datetime(2026, 11, 30, 22, 5, tzinfo=datetime.UTC)
    assert r.cells(NOW)[5].endswith(", silence not expired since 2026-11-30T22:05:00Z (retrying)")
    shown = fleetview.to_json([r], [])["nodes"][0]
    assert (
        shown["silenceExpiryDue"] == "2026-11-30T22:05:00Z"
        and shown["silencedUntil"] == "2026-11-30T23:40:00Z"
    )


def test_a_request_naming_another_boot_is_not_shown_as_pending() -> None:
    view = NodeState.from_obj({
        "metadata": {"name": "n", "annotations": {S: status(), R: req(boot="old")}},
        "status": {"nodeInfo": {"bootID": "b1"}},
    })  # fmt: skip
    r = row(view)
    assert r.needs_reboot == "no" and r.reason == ""


def test_table_and_lock_lines() -> None:
    view = NodeState.from_obj({
        "metadata": {"name": "n", "annotations": {S: status(step="acquire", lock_wait=True), R: req()}},
        "status": {"nodeInfo": {"bootID": "b1"}},
    })  # fmt: skip
    locks = [fleetview.LockInfo("annotation", ("m",)), fleetview.LockInfo("lease", error="forbidden (403)")]
    text = fleetview.render_table(fleetview.rows([view], locks, now=NOW), locks, now=NOW)
    assert text.splitlines()[1].split() == ["n", "request", "kernel", "6.12", "lock", "held", "by", "m", "no",
                                            "waiting", "for", "lock", "-", "-", "0.1.0"]  # fmt: skip
    assert text.endswith(
        "roll: none in progress\nlock (annotation): m\nlock (lease): cannot read: forbidden (403)\n"
    )
    assert (
        fleetview.to_json(fleetview.rows([view], locks, now=NOW), locks)["nodes"][0]["reason"]
        == "kernel 6.12"
    )


def roll_views(**kw: Any) -> list[NodeState]:
    def node(name: str, **fields: Any) -> NodeState:
        text = status(**fields, **kw)
        obj = {"metadata": {"name": name, "annotations": {S: text}}, "status": {"nodeInfo": {"bootID": "b1"}}}
        return NodeState.from_obj(obj)

    hour = datetime.timedelta(hours=1)
    began = NOW - 48 * hour
    return [
        node("a", last_reboot=NOW - 30 * hour, last_boot_id="b0"),  # rebooted in this roll, done
        node(
            "b", last_reboot=NOW - 29 * hour, last_boot_id="b0", sentinel=True, waiting_since=NOW - 2 * hour
        ),
        node("c", sentinel=True, waiting_since=began),  # never rebooted: first
        node("d", last_reboot=NOW - 100 * hour, last_boot_id="b0", sentinel=True, waiting_since=began),
        node("e", last_reboot=NOW - 100 * hour, last_boot_id="b0"),  # before the roll, needs nothing
    ]


def test_the_current_roll_shows_who_was_rebooted_in_it_and_who_goes_next() -> None:
    table = fleetview.rows(roll_views(resume_rolls=True), [], now=NOW)
    assert [r.roll for r in table] == ["rebooted", "rebooted, waiting 3/3", "waiting 1/3", "waiting 2/3", ""]
    text = fleetview.render_table(table, [], now=NOW)
    assert "roll since 2026-11-28T21:40:00Z: 2 rebooted (a, b), 3 waiting (next: c)\n" in text
    data = fleetview.to_json(table, [])
    assert data["roll"] == {
        "since": "2026-11-28T21:40:00Z", "rebooted": ["a", "b"], "waiting": ["c", "d", "b"], "ordered": True
    }  # fmt: skip
    assert data["nodes"][1]["roll"] == "rebooted, waiting 3/3"


def test_without_resume_rolls_no_order_is_promised() -> None:
    table = fleetview.rows(roll_views(), [], now=NOW)
    assert [r.roll for r in table] == ["rebooted", "rebooted, waiting", "waiting", "waiting", ""]
    text = fleetview.render_table(table, [], now=NOW)
    assert "roll since 2026-11-28T21:40:00Z: 2 rebooted (a, b), 3 waiting\n" in text
    assert fleetview.to_json(table, [])["roll"]["ordered"] is False


def test_rollout_progress() -> None:
    done = rebootrequest.satisfied_record(
        rebootrequest.parse_request(req(boot="a0", rollout_id="r1")), new_boot_id="a1", now=NOW
    )
    sat = rebootrequest.SATISFIED_ANNOTATION
    views = [
        NodeState.from_obj({"metadata": {"name": "a", "annotations": {sat: done}},
                           "status": {"nodeInfo": {"bootID": "a1"}}}),
        NodeState.from_obj({"metadata": {"name": "b", "annotations": {R: req(boot="b0", rollout_id="r1")}},
                           "status": {"nodeInfo": {"bootID": "b0"}}}),
        NodeState.from_obj({"metadata": {"name": "c", "annotations": {R: req(boot="c0", rollout_id="r1")}},
                           "status": {"nodeInfo": {"bootID": "c1"}}}),
        NodeState.from_obj({"metadata": {"name": "d", "annotations": {R: req(boot="d0", rollout_id="r0")}},
                           "status": {"nodeInfo": {"bootID": "d0"}}}),
    ]  # fmt: skip
    assert rollout.rollouts(views) == ["r1", "r0"]
    prog = rollout.progress(views, "r1")
    assert [n.node for n in prog.nodes] == ["a", "b", "c"] and prog.done == 2 and not prog.complete
    text = rollout.render(prog)
    assert text.startswith("rollout r1 (kernel 6.12): 2/3 rebooted\n")
    assert "b  pending (bootID b0)" in text and "(bootID a0 -> a1)" in text
    assert rollout.to_json(prog)["total"] == 3


def test_a_rollout_counts_a_node_whose_satisfied_request_a_newer_one_replaced() -> None:
    """r1 rebooted for the rollout's request (r0 -> r1) and an operator's request for the new boot replaced
    it before the agent settled it: the record the requester left in the same patch counts r1 as rebooted."""
    done = rebootrequest.satisfied_record(
        rebootrequest.parse_request(req(boot="r0", rollout_id="ro")), new_boot_id="r1", now=NOW
    )
    sat = rebootrequest.SATISFIED_ANNOTATION
    views = [
        NodeState.from_obj({"metadata": {"name": "r1", "annotations": {R: req(boot="r1"), sat: done}},
                            "status": {"nodeInfo": {"bootID": "r1"}}}),
        NodeState.from_obj({"metadata": {"name": "r2", "annotations": {R: req(boot="s0", rollout_id="ro")}},
                            "status": {"nodeInfo": {"bootID": "s0"}}}),
    ]  # fmt: skip
    prog = rollout.progress(views, "ro")
    assert [(n.node, n.progress) for n in prog.nodes] == [
        ("r1", rollout.Progress.REBOOTED),
        ("r2", rollout.Progress.PENDING),
    ]
    assert (prog.nodes[0].old_boot_id, prog.nodes[0].new_boot_id) == ("r0", "r1")


def test_the_drains_blocker_shows_while_draining_and_after_a_failed_drain() -> None:
    refusal = 'eviction of pod db/b-0 refused: admission webhook "w" denied the request: later (HTTP 500)'
    draining = NodeState.from_obj({
        "metadata": {"name": "n", "annotations": {
            S: status(step="drain-and-reboot", sentinel=True, drain_blocked_by=refusal),
            "pykured.dev/unschedulable-before": "false"}},
        "spec": {"unschedulable": True}, "status": {"nodeInfo": {"bootID": "b1"}},
    })  # fmt: skip
    r = row(draining)
    assert (r.step, r.blocked_by, r.drain_blocked_by) == ("draining", f"drain: {refusal}", refusal)
    (data,) = fleetview.to_json([r], [])["nodes"]
    assert data["drainBlockedBy"] == refusal and data["blockedBy"] == f"drain: {refusal}"
    failed = NodeState.from_obj({
        "metadata": {"name": "n", "annotations": {
            S: status(step="wait", sentinel=True, drain_blocked_by=refusal),
            fleetview.BACKOFF_UNTIL_ANNOTATION: "2026-11-30T22:40:00Z"}},
        "status": {"nodeInfo": {"bootID": "b1"}},
    })  # fmt: skip
    assert row(failed).blocked_by == f"back-off until 2026-11-30T22:40:00Z (drain: {refusal})"
    assert (
        fleetview.to_json([row(NodeState.from_obj({"metadata": {"name": "m"}}))], [])["nodes"][0][
            "drainBlockedBy"
        ]
        is None
    )


# -- hostile records: one row says so, the rest of the view is shown -------------------------------------


def _node(name: str, annotations: dict[str, str]) -> NodeState:
    return NodeState.from_obj(
        {"metadata": {"name": name, "annotations": annotations}, "status": {"nodeInfo": {"bootID": "b1"}}}
    )


def test_a_garbled_status_is_one_unreadable_row_and_the_others_are_shown() -> None:
    views = [
        _node("bad", {S: "{" * 5000}),
        _node("good", {S: status(sentinel=True)}),
        _node("odd", {S: "[1]", R: "[" * 2000}),
    ]
    table = fleetview.rows(views, [], now=NOW)
    bad, good, odd = table
    assert bad.unreadable.startswith(f"{S}: unreadable status record: nested deeper than 16")
    assert (bad.needs_reboot, bad.agent) == ("?", "-")
    assert good.unreadable == "" and good.needs_reboot == "sentinel"
    assert "not a JSON object" in odd.unreadable and f"{R}: unreadable reboot request" in odd.unreadable
    text = fleetview.render_table(table, [], now=NOW)
    assert text.count("UNREADABLE:") == 2 and len(text.splitlines()) == 1 + 3 + 1
    nodes = fleetview.to_json(table, [])["nodes"]
    assert ["unreadable" in n for n in nodes] == [True, False, True]  # present only when something is


def test_a_row_that_cannot_be_built_says_so(monkeypatch: Any) -> None:
    def broken(view: NodeState, **kw: Any) -> fleetview.Row:
        if view.name == "bad":
            raise KeyError("surprise")
        return real(view, **kw)

    real = fleetview.node_row
    monkeypatch.setattr(fleetview, "node_row", broken)
    table = fleetview.rows([_node("bad", {}), _node("good", {S: status()})], [], now=NOW)
    assert [(r.node, r.step, r.unreadable) for r in table] == [
        ("bad", "unreadable", "KeyError: 'surprise'"),
        ("good", "idle", ""),
    ]


def test_every_cell_is_one_line_of_terminal_safe_text() -> None:
    hostile = "x\x1b]0;owned\x07\nNODE  forged-row\x9b2J\u202eevil"
    text = req(reason="r")
    request = rebootrequest.parse_request(text)
    forged = rebootrequest.format_request(
        rebootrequest.RebootRequest(request.boot_id, request.reason, request.requested_at, hostile)
    )
    views = [
        _node("n", {S: status(sentinel=True, step="blocked", blocked="pods", blocked_by=hostile), R: forged})
    ]
    locks = [fleetview.LockInfo("annotation", holders=("n\nforged\x1b[2J",))]
    table = fleetview.rows(views, locks, now=NOW)
    rendered = fleetview.render_table(table, locks, now=NOW)
    assert "\x1b" not in rendered and "\x9b" not in rendered and "\u202e" not in rendered
    assert "forged-row" in rendered and len(rendered.splitlines()) == 1 + 1 + 2
    assert "\\u001b]0;owned\\u0007\\u000aNODE" in rendered


QUARTER, Limit = Budget(25, percent=True), fleetview.LockLimit


@pytest.mark.parametrize(
    ("limit", "line", "value"),
    [(Limit(5, QUARTER, 12), "limit: 3 (--concurrency 5, --max-unavailable 25% of 12 nodes)", 3),
     (Limit(2, QUARTER, 12), "limit: 2 (--concurrency 2, --max-unavailable 25% of 12 nodes)", 2),
     (Limit(4, Budget(3), None), "limit: 3 (--concurrency 4, --max-unavailable 3)", 3)],
)  # fmt: skip
def test_status_shows_the_limit_after_the_lock_holders(limit: Any, line: str, value: int) -> None:
    locks = [fleetview.LockInfo("lease", ("a",))]
    table = fleetview.rows(roll_views(), locks, now=NOW)
    text = fleetview.render_table(table, locks, now=NOW, limit=limit)
    assert text.endswith(f"lock (lease): a\n{line}\n")
    assert fleetview.to_json(table, locks, limit=limit)["limit"]["limit"] == value
    assert "limit" not in fleetview.to_json(table, locks)
    assert "limit:" not in fleetview.render_table(table, locks, now=NOW)


def test_a_quarantined_node_says_so_in_step_and_blocked_by() -> None:
    from pykured.policy.quarantine import QUARANTINED_ANNOTATION, QuarantineRecord

    record = QuarantineRecord.make(reason="drain timed out", at=NOW, pods=["ns/a"], cordoned=True)
    view = NodeState.from_obj({
        "metadata": {"name": "n", "annotations": {
            S: status(sentinel=True, step="blocked", blocked="quarantined", blocked_by="x"),
            QUARANTINED_ANNOTATION: record.to_json(),
        }},
        "spec": {"unschedulable": True}, "status": {"nodeInfo": {"bootID": "b1"}},
    })  # fmt: skip
    r = row(view)
    assert (r.step, r.blocked_by, r.quarantined) == ("quarantined", record.describe(), record.describe())
    assert fleetview.to_json([r], [])["nodes"][0]["quarantined"] == record.describe()
    garbled = _node("g", {QUARANTINED_ANNOTATION: "{"})
    assert row(garbled).step == "quarantined" and row(garbled).blocked_by.startswith("quarantined: the")
    assert "quarantined" not in fleetview.to_json([row(_node("ok", {}))], [])["nodes"][0]


def test_a_running_drain_shows_its_pods_for_how_long_and_why() -> None:
    from pykured.drain import progress as dp

    def at(minutes: float) -> datetime.datetime:
        return NOW - datetime.timedelta(minutes=minutes)

    holds = [
        dp.PodHold("db", "b-0", dp.WEBHOOK, at(3), 'admission webhook "w" denied the request: \x1b[2Jlater'),
        dp.PodHold("web", "w-1", dp.PDB, at(4), "web-pdb"),
        dp.PodHold("ops", "stuck", dp.OVERDUE, at(1)),
    ]
    holds += [dp.PodHold("web", f"e{i:02}", dp.EVICTING, at(5)) for i in range(12)]  # fmt: skip
    drain = dp.progress(holds, started=at(5))
    draining = NodeState.from_obj({
        "metadata": {"name": "n", "annotations": {
            S: status(step="drain-and-reboot", sentinel=True, drain=drain),
            "pykured.dev/unschedulable-before": "false"}},
        "spec": {"unschedulable": True}, "status": {"nodeInfo": {"bootID": "b1"}},
    })  # fmt: skip
    r = row(draining)
    assert r.cells(NOW)[5] == "draining, waiting for 15 pods"
    text = fleetview.render_drains([r, row(_node("idle", {S: status()}))], now=NOW)
    lines = text.splitlines()
    assert lines[0] == "drain of n: running for 5m00s (since 2026-11-30T21:35:00Z), waiting for 15 pods"
    assert lines[1].split() == ["ops/stuck", "terminating", "past", "its", "grace", "period", "for", "60s"]
    assert lines[2].split() == ["web/w-1", "PodDisruptionBudget", "web-pdb", "for", "4m00s"]
    assert lines[3].split()[:2] == ["db/b-0", "admission"] and lines[3].endswith("for 3m00s")
    assert "\x1b" not in text and lines[-1] == "  and 5 more" and len(lines) == 12
    (data,) = fleetview.to_json([r], [], now=NOW)["nodes"]
    assert data["drain"]["total"] == 15 and data["drain"]["seconds"] == 300
    first = data["drain"]["pods"][0]
    assert first == {"namespace": "ops", "name": "stuck", "reason": "overdue",
                     "since": "2026-11-30T21:39:00Z", "why": "terminating past its grace period",
                     "seconds": 60}  # fmt: skip
    assert data["drain"]["pods"][1]["detail"] == "web-pdb"


def test_a_fleetlock_servers_drain_record_alone_is_no_agents_status() -> None:
    from pykured.drain import progress as dp

    drain = dp.progress([dp.PodHold("web", "w-1", dp.PDB, NOW, "web-pdb")], started=NOW)
    alone = agentstatus.encode(agentstatus.AgentStatus(drain=drain))
    r = row(_node("z", {S: alone, "pykured.dev/fleetlock-id": "x"}))
    assert (r.needs_reboot, r.agent, r.step, r.drain) == ("?", "-", "fleetlock (zincati)", drain)
