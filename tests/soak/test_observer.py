"""The judge's rules on hand-made API events (pure logic: no API server; the soak itself runs them live)."""

from __future__ import annotations

from typing import Any

from pykured_dev.soak.observer import Observer
from tests.fakes import FakeKube


def _observer(limit: int = 1) -> Observer:
    return Observer(FakeKube(), limit=limit)  # the rules are judged on the events handed in: no API calls


def _node(
    name: str, *, boot: str = "b1", unschedulable: bool = False, uid: str = "u1", **ann: str
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": uid, "annotations": dict(ann)},
        "spec": {"unschedulable": unschedulable},
        "status": {"nodeInfo": {"bootID": boot}, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def _lease(name: str, holder: str | None) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"holderIdentity": holder}}


def _event(obs: Observer, kind: str, node: dict[str, Any]) -> None:
    with obs.lock:
        obs._node_event(kind, node)
        obs._check_limits("test")


def test_more_holders_than_the_limit_is_a_violation() -> None:
    obs = _observer(limit=1)
    with obs.lock:
        obs._lease_event("MODIFIED", _lease("kured-lock-0", "a"))
        obs._check_limits("one")
        assert not obs.violations
        obs._lease_event("MODIFIED", _lease("kured-lock-1", "b"))
        obs._check_limits("two")
    assert len(obs.violations) == 1
    assert "2 Lease holders > 1" in obs.violations[0]


def test_daemonset_holders_are_decoded_from_kureds_annotation() -> None:
    obs = _observer(limit=1)
    value = '{"maxOwners":2,"locks":[{"nodeID":"a","created":"2026-06-30T11:29:16Z","TTL":0},{"nodeID":"b"}]}'
    with obs.lock:
        obs._ds_event("MODIFIED", {"metadata": {"annotations": {"weave.works/kured-node-lock": value}}})
        obs._check_limits("ds")
    assert obs.ds_holders == ("a", "b")
    assert "DaemonSet-lock holders" in obs.violations[0]


def test_cordoned_nodes_count_except_the_administrators() -> None:
    obs = _observer(limit=1)
    obs.admin_cordon("n2")
    _event(obs, "ADDED", _node("n1", unschedulable=True))
    _event(obs, "ADDED", _node("n2", unschedulable=True))
    assert not obs.violations
    _event(obs, "ADDED", _node("n3", unschedulable=True))
    assert "2 nodes cordoned by pykured > 1" in obs.violations[0]


def test_an_administrators_cordon_undone_is_a_violation() -> None:
    obs = _observer()
    obs.admin_cordon("n1")
    _event(obs, "ADDED", _node("n1"))  # the cordon is not seen yet: no verdict
    assert not obs.violations
    _event(obs, "MODIFIED", _node("n1", unschedulable=True))
    _event(obs, "MODIFIED", _node("n1", unschedulable=False))
    assert "cordon of n1 was undone" in obs.violations[0]


def test_each_need_is_answered_by_exactly_one_reboot() -> None:
    obs = _observer()
    _event(obs, "ADDED", _node("n1", boot="b1"))
    obs.add_need("n1", "sentinel")
    _event(obs, "MODIFIED", _node("n1", boot="b2"))
    assert not obs.violations and obs.answered == {"n1": 1} and len(obs.waits) == 1
    _event(obs, "MODIFIED", _node("n1", boot="b3"))
    assert "n1 rebooted" in obs.violations[0] and "no need outstanding" in obs.violations[0]


def test_a_recreated_node_is_not_a_reboot() -> None:
    obs = _observer()
    _event(obs, "ADDED", _node("n1", boot="b1", uid="u1"))
    _event(obs, "DELETED", _node("n1", boot="b1", uid="u1"))
    _event(obs, "ADDED", _node("n1", boot="b2", uid="u2"))
    assert not obs.violations and obs.reboots_seen == 0


def test_final_check_reports_what_is_left() -> None:
    obs = _observer(limit=2)
    _event(obs, "ADDED", _node("n1", unschedulable=True))
    obs.add_need("n2", "sentinel")
    with obs.lock:
        obs._lease_event("MODIFIED", _lease("kured-lock-0", "n1"))
    assert not obs.converged()
    obs.final_check({"n3": 1})
    text = "\n".join(obs.violations)
    assert "n2 still needs a reboot" in text
    assert "left cordoned by pykured: ['n1']" in text
    assert "lock still held" in text
    assert "n3: the host rebooted 1 times" in text


def test_lock_taken_in_a_closed_window_is_a_violation() -> None:
    import time

    obs = _observer()
    now = time.time()
    obs.window_closed(now - 60, now + 60)
    with obs.lock:
        obs._lease_event("MODIFIED", _lease("kured-lock-0", "n1"))
    assert "while the maintenance window was closed" in obs.violations[0]


def test_an_administrators_uncordon_in_flight_is_not_pykureds_cordon() -> None:
    obs = _observer(limit=1)
    obs.admin_cordon("n1")
    _event(obs, "ADDED", _node("n1", unschedulable=True))
    _event(obs, "ADDED", _node("n2", unschedulable=True))
    obs.admin_uncordon("n1")  # the patch is on its way: n1 is still the administrator's
    _event(obs, "MODIFIED", _node("n2", unschedulable=True))
    assert not obs.violations
    _event(obs, "MODIFIED", _node("n1", unschedulable=False))
    assert not obs.violations and "n1" not in obs.admin_cordoned
