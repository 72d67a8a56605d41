"""The halt rule and the pause record, as pure values."""

from __future__ import annotations

import datetime

from pykured.policy import halt
from pykured.policy.freeze import FreezeRecord
from pykured.policy.pause import PAUSED_ANNOTATION, describe, paused_record

UTC = datetime.UTC
T0 = datetime.datetime(2026, 12, 1, 3, 0, tzinfo=UTC)
MIN = datetime.timedelta(minutes=1)


def holder(**kw: object) -> halt.Holder:
    base: dict[str, object] = {
        "node": "n5", "reboot_began": T0, "boot_id": "old", "reboot_boot_id": "old", "ready": False,
    }  # fmt: skip
    base.update(kw)
    return halt.Holder(**base)  # type: ignore[arg-type]


def test_a_holder_is_overdue_only_from_the_deadline_on() -> None:
    deadline = 30 * MIN
    assert halt.overdue(holder(), deadline=deadline, now=T0 + 29 * MIN) is None
    found = halt.overdue(holder(), deadline=deadline, now=T0 + 30 * MIN)
    assert found == halt.Overdue("n5", T0, "still on the boot it was rebooted from")


def test_what_is_missing_is_named() -> None:
    late = T0 + 2 * MIN
    new_boot_not_ready = holder(boot_id="new")
    assert halt.overdue(new_boot_not_ready, deadline=MIN, now=late).what == "not Ready"  # type: ignore[union-attr]
    gates = holder(boot_id="new", ready=True)
    assert "settle gates" in halt.overdue(gates, deadline=MIN, now=late).what  # type: ignore[union-attr]


def test_no_halt_before_the_reboot_began_or_when_off() -> None:
    assert halt.overdue(holder(reboot_began=None), deadline=MIN, now=T0 + 60 * MIN) is None
    assert halt.overdue(holder(), deadline=datetime.timedelta(0), now=T0 + 60 * MIN) is None


def test_a_lifted_halt_does_not_halt_again_for_the_same_reboot() -> None:
    began = "2026-12-01T03:00:00Z"
    late = T0 + 60 * MIN
    lifted = (halt.LiftedHalt("n5", began),)
    assert halt.overdue(holder(began_text=began), deadline=MIN, now=late, lifted=lifted) is None
    again = halt.overdue(holder(began_text="2026-12-02T03:00:00Z"), deadline=MIN, now=late, lifted=lifted)
    assert again is not None and again.began_text == "2026-12-02T03:00:00Z"  # a new reboot of n5 may
    other = halt.overdue(holder(node="n6", began_text=began), deadline=MIN, now=late, lifted=lifted)
    assert other is not None and other.node == "n6"
    # an older agent's mark on the node is still honoured
    marked = holder(began_text=began, halted_for=began)
    assert halt.overdue(marked, deadline=MIN, now=late) is None


def test_lifting_remembers_the_reboot_a_halt_named_newest_last_and_bounded() -> None:
    record = FreezeRecord("r", "pykured on n1", T0, halted="n5", began="b5")
    assert halt.lifting((), record) == (halt.LiftedHalt("n5", "b5"),)
    assert halt.lifting((), FreezeRecord("canary failed", "alice", T0)) is None  # names no reboot
    assert halt.lifting((), FreezeRecord("3 drains failed", "x", T0, halted="n5")) is None  # nor a streak
    assert halt.lifting((), None) is None
    many = tuple(halt.LiftedHalt(f"n{i}", "b") for i in range(halt.MAX_LIFTED))
    kept = halt.lifting((halt.LiftedHalt("n5", "b5"), *many), record)
    assert kept is not None and len(kept) == halt.MAX_LIFTED and kept[-1] == halt.LiftedHalt("n5", "b5")
    assert kept.count(halt.LiftedHalt("n5", "b5")) == 1
    assert halt.parse_lifted(halt.lifted_json(kept)) == kept


def test_the_halt_record_names_the_node_and_has_no_end() -> None:
    found = halt.Overdue("n5", T0, "not Ready", "2026-12-01T03:00:00Z")
    record = halt.halt_record(found, deadline=30 * MIN, by="pykured on n1", now=T0)
    assert record.reason == "node n5 did not come back within 30m0s"
    assert record.halted == "n5" and record.until is None and record.began == "2026-12-01T03:00:00Z"
    again = FreezeRecord.from_json(record.to_json())
    assert again == record
    assert again.describe().startswith("halted by pykured on n1 at 2026-12-01T03:00:00Z: node n5")


def test_a_freeze_record_without_halted_reads_as_before() -> None:
    text = '{"at": "2026-12-01T03:00:00Z", "by": "alice", "reason": "INC-1"}'
    record = FreezeRecord.from_json(text)
    assert record.halted == "" and record.to_json() == text
    assert record.describe() == "frozen by alice at 2026-12-01T03:00:00Z: INC-1"


def test_pause_record_on_the_node() -> None:
    record = FreezeRecord(reason="disk", by="alice", at=T0)
    found = paused_record({PAUSED_ANNOTATION: record.to_json()})
    assert found == record
    assert describe(record) == "paused by alice at 2026-12-01T03:00:00Z: disk"
    assert paused_record({}) is None
    unreadable = paused_record({PAUSED_ANNOTATION: "yes"})
    assert unreadable is not None and unreadable.active(T0)  # a pause that does not parse still pauses
