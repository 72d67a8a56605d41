"""The pure rules of reboots from Node conditions: the flag's grammar, a need since the boot and after FOR,
the per-node count and the fleet's share (``now`` passed in)."""

from __future__ import annotations

import datetime

import pytest

from pykured.conditions import record as rules
from pykured.gocompat.goflags import GoValueError
from pykured.kube.node import NodeCondition, NodeView, read_conditions
from pykured.lock.budget import Budget

T0 = datetime.datetime(2026, 12, 1, 10, 0, tzinfo=datetime.UTC)
BOOT = T0 - datetime.timedelta(hours=1)
M = datetime.timedelta(minutes=1)


def cond(
    kind: str = "KernelDeadlock", status: str = "True", since: datetime.datetime | None = T0
) -> NodeCondition:
    return NodeCondition(kind, status, since, "DockerHung", "task docker:7 blocked")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("KernelDeadlock", rules.ConditionSpec("KernelDeadlock")),
        ("KernelDeadlock=True:5m", rules.ConditionSpec("KernelDeadlock", "True", 5 * M)),
        ("ReadonlyFilesystem=Unknown", rules.ConditionSpec("ReadonlyFilesystem", "Unknown")),
        (
            "example.com/RebootRequired:1h30m",
            rules.ConditionSpec("example.com/RebootRequired", "True", 90 * M),
        ),
        ("A:0s", rules.ConditionSpec("A")),
    ],
)
def test_the_flag_grammar(text: str, expected: rules.ConditionSpec) -> None:
    assert rules.parse_spec(text) == expected


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "qualified name"),
        ("=True", "qualified name"),
        ("Kernel Deadlock", "qualified name"),
        ("KernelDeadlock=", "must be a word"),
        ("KernelDeadlock=Tr ue", "must be a word"),
        ("KernelDeadlock:5", "missing unit"),
        ("KernelDeadlock:-5m", "negative"),
        ("KernelDeadlock:soon", "TYPE[=STATUS][:FOR]"),
    ],
)
def test_a_bad_value_says_what_is_wanted(text: str, says: str) -> None:
    with pytest.raises(GoValueError, match=r"(?s).*" + says.replace("[", r"\[").replace("]", r"\]")):
        rules.parse_spec(text)


def test_a_type_named_twice_is_an_error() -> None:
    with pytest.raises(GoValueError, match="KernelDeadlock named twice"):
        rules.parse_specs(["KernelDeadlock", "KernelDeadlock=False"])


def test_a_condition_is_a_need_once_held_for_its_for_and_only_since_the_boot() -> None:
    specs = (rules.parse_spec("KernelDeadlock=True:5m"),)
    found = rules.held(specs, [cond(since=T0)], booted=BOOT)
    assert [h.due for h in found] == [T0 + 5 * M]
    assert rules.need(found, T0 + 4 * M) is None
    assert rules.next_due(found, T0 + 4 * M) == T0 + 5 * M
    need = rules.need(found, T0 + 5 * M)
    assert need is not None and need.spec.type == "KernelDeadlock"
    assert (
        need.describe() == "KernelDeadlock=True since 2026-12-01T10:00:00Z: DockerHung: task docker:7 blocked"
    )
    assert rules.next_due(found, T0 + 5 * M) is None


@pytest.mark.parametrize(
    "condition",
    [
        cond(since=BOOT - M),  # left from before the boot
        cond(since=BOOT),  # not after it
        cond(since=None),  # no lastTransitionTime: cannot be shown to be newer than the boot
        cond(status="False"),
        cond(kind="ReadonlyFilesystem"),
    ],
)
def test_what_is_no_need(condition: NodeCondition) -> None:
    assert rules.held((rules.parse_spec("KernelDeadlock"),), [condition], booted=BOOT) == ()


def test_an_unknown_boot_makes_no_need() -> None:
    assert rules.held((rules.parse_spec("KernelDeadlock"),), [cond()], booted=None) == ()


def test_the_first_configured_condition_that_is_a_need_wins() -> None:
    specs = (rules.parse_spec("KernelDeadlock:10m"), rules.parse_spec("ReadonlyFilesystem"))
    found = rules.held(specs, [cond(), cond(kind="ReadonlyFilesystem")], booted=BOOT)
    need = rules.need(found, T0 + M)
    assert need is not None and need.spec.type == "ReadonlyFilesystem"


def test_the_count_is_per_boot_and_within_the_period() -> None:
    count = rules.read_count(None)
    count = count.with_reboot(boot="b1", at=T0 - 30 * 60 * M, condition="KernelDeadlock")
    count = count.with_reboot(boot="b2", at=T0 - 60 * M, condition="KernelDeadlock")
    count = count.with_reboot(boot="b2", at=T0 - 59 * M, condition="KernelDeadlock")  # repeated: counts once
    again = rules.read_count(count.to_json())
    assert again == count and len(again.entries) == 2
    day = datetime.timedelta(hours=24)
    assert again.within(T0, day, boot="b3") == 1  # b1 is older than a day
    assert again.within(T0, day, boot="b2") == 0  # the current boot's own entry is the reboot under way
    assert rules.tripped(again, now=T0, period=day, limit=2, boot="b3") == ""
    assert rules.tripped(again, now=T0, period=day, limit=1, boot="b3").startswith(
        "1 reboots for node conditions"
    )


@pytest.mark.parametrize(
    "text",
    ["", "{", "{}", "[1]", '[{"boot":"b","at":"yesterday"}]', "[" + ",".join(["{}"] * 60) + "]", "x" * 20000],
)
def test_a_count_that_cannot_be_read_trips_the_breaker(text: str) -> None:
    count = rules.read_count(text)
    assert count.unreadable
    why = rules.tripped(count, now=T0, period=datetime.timedelta(hours=24), limit=5, boot="b")
    assert "cannot be read" in why


def test_the_count_keeps_the_newest() -> None:
    count = rules.RebootCount()
    for i in range(rules.MAX_ENTRIES + 5):
        count = count.with_reboot(boot=f"b{i}", at=T0, condition="X")
    assert len(count.entries) == rules.MAX_ENTRIES and count.entries[-1].boot == f"b{rules.MAX_ENTRIES + 4}"
    assert rules.read_count(count.to_json()) == count


@pytest.mark.parametrize(
    ("showing", "nodes", "budget", "tripped"),
    [
        (1, 1, "20%", False),  # one node alone never halts the fleet
        (1, 3, "20%", False),
        (2, 3, "20%", True),
        (2, 10, "20%", False),
        (3, 10, "20%", True),
        (3, 10, "3", False),
        (4, 10, "3", True),
    ],
)
def test_the_fleet_share(showing: int, nodes: int, budget: str, tripped: bool) -> None:
    assert rules.fleet_tripped(showing=showing, nodes=nodes, budget=Budget.parse(budget)) is tripped


def test_shows_counts_any_age() -> None:
    specs = (rules.parse_spec("KernelDeadlock:1h"),)
    assert rules.shows(specs, [cond(since=BOOT - M)])
    assert not rules.shows(specs, [cond(status="False")])


@pytest.mark.parametrize(
    "conditions",
    [
        "not a list",
        [{"type": "A", "status": "True"}] * 65,
        ["a string"],
        [{"type": 1, "status": "True"}],
        [{"type": "A", "status": None}],
        [{"type": "A" * 400, "status": "True"}],
    ],
)
def test_a_garbled_condition_list_reads_as_none_with_why(conditions: object) -> None:
    found, why = read_conditions({"conditions": conditions})
    assert found == () and why
    view = NodeView.from_obj({"metadata": {"name": "n"}, "status": {"conditions": conditions}})
    assert view.conditions == () and view.conditions_unreadable == why


def test_conditions_as_npd_writes_them() -> None:
    node = {
        "metadata": {"name": "n"},
        "status": {
            "conditions": [
                {"type": "KernelDeadlock", "status": "True", "reason": "DockerHung", "message": "m" * 5000,
                 "lastHeartbeatTime": "2026-12-01T10:05:00Z", "lastTransitionTime": "2026-12-01T10:00:00Z"},
                {"type": "Ready", "status": "True", "lastTransitionTime": "garbled"},
            ]
        },
    }  # fmt: skip
    view = NodeView.from_obj(node)
    assert view.conditions_unreadable == ""
    deadlock, ready = view.conditions
    assert deadlock.since == T0 and deadlock.reason == "DockerHung" and len(deadlock.message) == 1024
    assert ready.since is None
