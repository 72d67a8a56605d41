"""``pykured status`` and ``pykured plan`` (pykured.fleet.view, pykured.fleet.plan) over Nodes whose every
pykured record is hostile: one row per node, always, every cell one terminal-safe line."""

from __future__ import annotations

import datetime

from hypothesis import given
from hypothesis import strategies as st

from pykured.core.printable import one_line
from pykured.cycle.state import NodeState
from pykured.fleet import plan
from pykured.fleet import view as fleetview
from pykured.kube.node import PYKURED_PREFIX
from pykured.policy.freeze import FreezeRecord
from tests.fuzz.hostile import FUZZ, hostile, nasty_text

NOW = datetime.datetime(2026, 11, 30, 21, 40, tzinfo=datetime.UTC)
KEYS = ["status", "reboot-request", "reboot-request-satisfied", "roll", "paused", "backoff-until",
        "unschedulable-before", "reboot-boot-id", "release-after", "fleetlock-id"]  # fmt: skip
node_records = st.dictionaries(st.sampled_from([PYKURED_PREFIX + k for k in KEYS]), hostile(), max_size=4)


@FUZZ
@given(st.lists(node_records, min_size=1, max_size=3), st.lists(nasty_text, max_size=2))
def test_every_node_is_one_safe_row(notes: list[dict[str, str]], holders: list[str]) -> None:
    views = [
        NodeState.from_obj(
            {"metadata": {"name": f"n{i}", "annotations": a}, "status": {"nodeInfo": {"bootID": "b"}}}
        )
        for i, a in enumerate(notes)
    ]
    locks = [fleetview.LockInfo("annotation", holders=tuple(holders))]
    table = fleetview.rows(views, locks, now=NOW)
    assert [r.node for r in table] == [v.name for v in views]
    text = fleetview.render_table(table, locks, now=NOW)
    assert all(one_line(line) == line for line in text.split("\n"))
    assert len(text.split("\n")) == 1 + len(views) + 1 + 1 + 1  # header, rows, roll, lock, the last newline
    result = plan.build(views, locks, freeze=FreezeRecord.garbled("x"), now=NOW)
    assert [r.node for r in result.rows] == [v.name for v in views]
    assert all(one_line(line) == line for line in plan.render_table(result).split("\n"))
