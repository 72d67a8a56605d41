"""Unit tests for pykured.cycle.state: the cycle's annotations decoded into NodeState, and the patches."""

from __future__ import annotations

import datetime

import pytest

from pykured.cycle import state
from pykured.cycle.state import (
    KEEP,
    NodeState,
    autoscaler_marks_patch,
    autoscaler_unmarks_patch,
    forget_patch,
    state_patch,
)
from pykured.lock.record import LockEntry
from tests.fakes import sample_node

UTC = datetime.UTC
T0 = datetime.datetime(2026, 6, 30, 11, 29, 16, tzinfo=UTC)


@pytest.mark.parametrize(
    ("annotations", "attr", "expected"),
    [
        ({state.IN_PROGRESS_ANNOTATION: "2026-06-30T11:29:16Z"}, "in_progress", True),
        ({state.IN_PROGRESS_ANNOTATION: ""}, "in_progress", True),
        ({}, "in_progress", False),
        (
            {state.MOST_RECENT_REBOOT_NEEDED_ANNOTATION: "2026-06-30T11:29:16Z"},
            "most_recent_reboot_needed",
            T0,
        ),
        ({state.UNSCHEDULABLE_BEFORE_ANNOTATION: "true"}, "unschedulable_before", True),
        ({state.UNSCHEDULABLE_BEFORE_ANNOTATION: "false"}, "unschedulable_before", False),
        ({state.UNSCHEDULABLE_BEFORE_ANNOTATION: "maybe"}, "unschedulable_before", None),
        ({}, "unschedulable_before", None),
        ({state.REBOOT_BOOT_ID_ANNOTATION: "abc"}, "reboot_boot_id", "abc"),
        ({state.REBOOT_BOOT_ID_ANNOTATION: ""}, "reboot_boot_id", None),
        ({state.REBOOT_TRIGGERED_AT_ANNOTATION: "2026-06-30T11:29:16Z"}, "reboot_triggered_at", T0),
        ({state.RELEASE_AFTER_ANNOTATION: "2026-06-30T11:29:16Z"}, "release_after", T0),
        ({state.RELEASE_AFTER_ANNOTATION: "soon"}, "release_after", None),
        ({}, "release_after", None),
        ({state.REBOOT_ATTEMPTS_ANNOTATION: "3"}, "reboot_attempts", 3),
        ({state.REBOOT_ATTEMPTS_ANNOTATION: "-1"}, "reboot_attempts", 0),
        ({state.REBOOT_ATTEMPTS_ANNOTATION: "x"}, "reboot_attempts", 0),
    ],
    ids=[
        "in-progress",
        "in-progress-empty",
        "not-in-progress",
        "most-recent",
        "unsched-true",
        "unsched-false",
        "unsched-garbled",
        "unsched-absent",
        "boot-id",
        "boot-id-empty",
        "triggered-at",
        "release-after",
        "release-after-garbled",
        "release-after-absent",
        "attempts",
        "attempts-negative",
        "attempts-garbled",
    ],
)
def test_accessors(annotations: dict[str, str], attr: str, expected: object) -> None:
    view = NodeState.from_obj(sample_node(metadata={"name": "n1", "annotations": annotations}))
    assert getattr(view, attr) == expected


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({}, {}),
        ({"unschedulable_before": False}, {state.UNSCHEDULABLE_BEFORE_ANNOTATION: "false"}),
        ({"unschedulable_before": True}, {state.UNSCHEDULABLE_BEFORE_ANNOTATION: "true"}),
        ({"unschedulable_before": None}, {state.UNSCHEDULABLE_BEFORE_ANNOTATION: None}),
        (
            {"reboot_boot_id": "b", "reboot_triggered_at": T0, "reboot_attempts": 2},
            {
                state.REBOOT_BOOT_ID_ANNOTATION: "b",
                state.REBOOT_TRIGGERED_AT_ANNOTATION: "2026-06-30T11:29:16Z",
                state.REBOOT_ATTEMPTS_ANNOTATION: "2",
            },
        ),
        (
            {"release_after": T0, "reboot_boot_id": KEEP},
            {state.RELEASE_AFTER_ANNOTATION: "2026-06-30T11:29:16Z"},
        ),
        (
            {
                k: None
                for k in (
                    "unschedulable_before",
                    "reboot_boot_id",
                    "reboot_triggered_at",
                    "release_after",
                    "reboot_attempts",
                )
            },
            dict.fromkeys(k for k in state.STATE_ANNOTATIONS if k != state.AUTOSCALER_RECORD_ANNOTATION),
        ),
    ],
    ids=["nothing", "unsched-false", "unsched-true", "clear-one", "several", "keep-is-omitted", "clear-all"],
)
def test_state_patch(kwargs: dict[str, object], expected: dict[str, str | None]) -> None:
    assert state_patch(**kwargs) == expected  # type: ignore[arg-type]


def test_state_patch_round_trips_through_view() -> None:
    patch = state_patch(unschedulable_before=True, reboot_boot_id="b", release_after=T0, reboot_attempts=4)
    view = NodeState.from_obj({"metadata": {"annotations": patch}})
    assert (view.unschedulable_before, view.reboot_boot_id, view.release_after, view.reboot_attempts) == (
        True,
        "b",
        T0,
        4,
    )


def test_all_pykured_keys_share_the_prefix() -> None:
    assert all(k.startswith(state.PYKURED_PREFIX) for k in state.STATE_ANNOTATIONS)
    assert len(set(state.STATE_ANNOTATIONS)) == 6


@pytest.mark.parametrize(
    ("annotations", "attr", "expected"),
    [
        ({state.BACKOFF_UNTIL_ANNOTATION: "2026-06-30T11:29:16Z"}, "backoff_until", T0),
        ({state.BACKOFF_UNTIL_ANNOTATION: "later"}, "backoff_until", None),
        ({state.FLEETLOCK_ID_ANNOTATION: "zid"}, "fleetlock_id", "zid"),
        ({}, "fleetlock_id", None),
        ({state.UNSCHEDULABLE_BEFORE_ANNOTATION: "false"}, "cycle_started", True),
        ({}, "cycle_started", False),
    ],
    ids=["backoff", "backoff-garbled", "fleetlock", "not-fleetlock", "started", "not-started"],
)
def test_more_accessors(annotations: dict[str, str], attr: str, expected: object) -> None:
    node = NodeState.from_obj(sample_node(metadata={"name": "n1", "annotations": annotations}))
    assert getattr(node, attr) == expected


def test_the_lock_entry_is_part_of_the_state() -> None:
    entry = LockEntry(node_id="n1", unschedulable=True)
    node = NodeState.from_obj(sample_node(), entry=entry)
    assert (node.holding, node.entry_unschedulable) == (True, True)
    assert (node.with_entry(None).holding, node.with_entry(None).entry_unschedulable) == (False, None)


def test_ready_since_is_the_ready_transition() -> None:
    obj = sample_node(
        status={
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-06-30T11:29:16Z"}]
        }
    )
    assert NodeState.from_obj(obj).ready_since == T0
    assert NodeState.from_obj(sample_node()).ready_since is None


def test_forget_clears_the_cycle_and_only_what_it_is_told() -> None:
    assert forget_patch() == dict.fromkeys(state.STATE_ANNOTATIONS)
    assert forget_patch(backoff_until=T0, fleetlock_id=None) == {
        **dict.fromkeys(state.STATE_ANNOTATIONS),
        state.BACKOFF_UNTIL_ANNOTATION: "2026-06-30T11:29:16Z",
        state.BACKOFF_REASON_ANNOTATION: None,  # a back-off never keeps another's reason
        state.FLEETLOCK_ID_ANNOTATION: None,
    }


def test_a_back_off_is_written_and_cleared_with_its_reason() -> None:
    assert forget_patch(backoff_until=T0, backoff_reason="sentinel") == {
        **dict.fromkeys(state.STATE_ANNOTATIONS),
        state.BACKOFF_UNTIL_ANNOTATION: "2026-06-30T11:29:16Z",
        state.BACKOFF_REASON_ANNOTATION: "sentinel",
    }
    cleared = forget_patch(backoff_until=None)
    assert (
        cleared[state.BACKOFF_UNTIL_ANNOTATION] is None and cleared[state.BACKOFF_REASON_ANNOTATION] is None
    )
    node = NodeState.from_obj(
        sample_node(metadata={"name": "n1", "annotations": {state.BACKOFF_REASON_ANNOTATION: "no-reboot"}})
    )
    assert node.backoff_reason == "no-reboot"
    assert NodeState.from_obj(sample_node()).backoff_reason == ""


T = "2026-11-30T11:50:00Z"
READY = [
    (
        "ready",
        {"status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": T}]}},
        datetime.datetime(2026, 11, 30, 11, 50, tzinfo=UTC),
    ),
    (
        "not-ready",
        {"status": {"conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": T}]}},
        None,
    ),
    (
        "garbled-time",
        {"status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "soon"}]}},
        None,
    ),
    ("no-conditions", {"status": {}}, None),
    ("no-status", {}, None),
    (
        "other-conditions",
        {"status": {"conditions": [{"type": "DiskPressure", "status": "True"}, "junk"]}},
        None,
    ),
]


@pytest.mark.parametrize(("node", "expected"), [c[1:] for c in READY], ids=[c[0] for c in READY])
def test_ready_since(node: dict[str, object], expected: datetime.datetime | None) -> None:
    assert state.ready_since(node) == expected


# -- the autoscalers' annotations ----------------------------------------------------------------------------

CA = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
KARPENTER = "karpenter.sh/do-not-disrupt"
RECORD = state.AUTOSCALER_RECORD_ANNOTATION


@pytest.mark.parametrize(
    ("annotations", "wanted", "expected"),
    [
        ({}, (CA, KARPENTER), {CA: "true", KARPENTER: "true", RECORD: f"{CA},{KARPENTER}"}),
        ({}, (), {}),
        ({}, (KARPENTER, KARPENTER), {KARPENTER: "true", RECORD: KARPENTER}),
        ({CA: "false"}, (CA, KARPENTER), {KARPENTER: "true", RECORD: KARPENTER}),
        ({CA: "true", KARPENTER: "true"}, (CA, KARPENTER), {}),
        ({CA: "true", RECORD: CA}, (CA, KARPENTER), {KARPENTER: "true", RECORD: f"{CA},{KARPENTER}"}),
        ({CA: "true", KARPENTER: "true", RECORD: f"{CA},{KARPENTER}"}, (CA, KARPENTER), {}),
    ],
    ids=["both", "off", "once-each", "operators-own-stays", "operators-both", "begun-again-keeps-record",
         "begun-again-nothing-new"],
)  # fmt: skip
def test_the_autoscalers_annotations_go_on_only_where_absent(
    annotations: dict[str, str], wanted: tuple[str, ...], expected: dict[str, str | None]
) -> None:
    assert autoscaler_marks_patch(annotations, wanted) == expected


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({CA: "true", KARPENTER: "true", RECORD: f"{CA},{KARPENTER}"},
         {CA: None, KARPENTER: None, RECORD: None}),
        ({CA: "true", KARPENTER: "false", RECORD: KARPENTER}, {RECORD: None}),
        ({CA: "true", KARPENTER: "true", RECORD: KARPENTER}, {KARPENTER: None, RECORD: None}),
        ({CA: "true"}, {}),
        ({RECORD: f" {CA} ,,{CA}"}, {RECORD: None}),
        ({"pykured.dev/quarantined": "true", "weave.works/kured-node-lock": "true",
          RECORD: "pykured.dev/quarantined,weave.works/kured-node-lock"}, {RECORD: None}),
    ],
    ids=["ours-removed", "changed-since-stays", "operators-own-stays", "no-record-nothing", "garbled-record",
         "never-own-keys"],
)  # fmt: skip
def test_only_the_recorded_annotations_come_off(
    annotations: dict[str, str], expected: dict[str, str | None]
) -> None:
    assert autoscaler_unmarks_patch(annotations) == expected


def test_the_record_is_cycle_memory_and_forgotten_with_it() -> None:
    node = NodeState.from_obj(sample_node(metadata={"name": "n1", "annotations": {RECORD: f"{CA},x/y"}}))
    assert node.autoscaler_marks == (CA, "x/y") and node.has_memory and not node.cycle_started
    assert forget_patch()[RECORD] is None
