"""kured's lock value (pykured.lock.record), a Lease as a lock slot (pykured.lock.lease) and a lock queue
entry (pykured.roll.rule)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pykured.core.errors import LockError
from pykured.lock import record as lockrecord
from pykured.lock.lease import lease_entry
from pykured.roll import rule
from tests.fuzz.hostile import FUZZ, hostile, json_values

ENTRY = {"nodeID": "n1", "metadata": {"unschedulable": False}, "created": "2026-06-30T11:29:16.9Z", "TTL": 0}
MULTI = {"maxOwners": 2, "locks": [ENTRY, ENTRY]}
QUEUE = {"state": "waiting", "lastReboot": "2026-11-30T21:40:00Z", "waitingSince": "2026-11-30T23:10:00Z"}


@FUZZ
@given(st.one_of(hostile(ENTRY), hostile(MULTI)))
def test_a_lock_value_decodes_or_raises_lock_error(text: str) -> None:
    try:
        value = lockrecord.decode(text)
    except LockError:
        return
    for entry in value.entries:
        lockrecord.encode_entry(entry)  # what was read can be written back


lease_specs = st.fixed_dictionaries(
    {},
    optional={
        "holderIdentity": json_values,
        "renewTime": st.one_of(json_values, hostile()),
        "acquireTime": json_values,
        "leaseDurationSeconds": json_values,
    },
)


@FUZZ
@given(lease_specs, st.one_of(json_values, st.dictionaries(st.just("annotations"), json_values)))
def test_a_lease_is_a_slot_or_free(spec: dict[str, Any], metadata: Any) -> None:
    entry = lease_entry({"spec": spec, "metadata": metadata})
    assert entry is None or (isinstance(entry.node_id, str) and entry.ttl_ns >= 0)


@FUZZ
@given(hostile(QUEUE))
def test_a_queue_entry_is_an_entry_or_absent(text: str) -> None:
    entry = rule.decode("n1", text, 0)
    assert entry is None or entry.state in (rule.WAITING, rule.WINDOW, rule.HELD)
