"""The keeper's boots left behind: pykured's cycle memory and the boots passed in (the agent's status)."""

from __future__ import annotations

import datetime

from pykured.cycle.state import NodeState
from pykured.requests import keeper
from pykured.requests import record as rebootrequest
from pykured.status import agent as agentstatus

NOW = datetime.datetime(2026, 12, 1, 2, 0, tzinfo=datetime.UTC)


def node(boot_id: str, annotations: dict[str, str]) -> NodeState:
    obj = {
        "metadata": {"name": "node-a", "annotations": annotations},
        "status": {"nodeInfo": {"bootID": boot_id}},
    }
    return NodeState.from_obj(obj)


def test_the_boots_left_are_the_cycles_memory_and_those_reported_not_the_current_one() -> None:
    view = node("c", {"pykured.dev/reboot-boot-id": "a"})
    assert keeper.previous_boot_ids(view) == ("a",)
    assert keeper.previous_boot_ids(view, ["c", "b", "", "a"]) == ("a", "b")


def test_a_request_for_a_boot_the_agents_status_names_is_satisfied_only_when_that_is_passed_in() -> None:
    status = agentstatus.AgentStatus(boot_id="a", last_reboot=NOW, last_boot_id="z")
    req = rebootrequest.make_request(boot_id="a", reason="kernel", requested_by="carol", now=NOW)
    annotations = {
        agentstatus.STATUS_ANNOTATION: agentstatus.encode(status),
        rebootrequest.REQUEST_ANNOTATION: rebootrequest.format_request(req),
    }
    view = node("b", annotations)
    assert agentstatus.reported_boot_ids(view.annotations) == ("a", "z")
    assert agentstatus.reported_boot_ids({}) == ()
    reported = agentstatus.reported_boot_ids(view.annotations)
    assert keeper.classify(view, NOW, reported).state is rebootrequest.RequestState.SATISFIED
    assert keeper.classify(view, NOW).state is not rebootrequest.RequestState.SATISFIED
