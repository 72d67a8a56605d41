"""The bookkeeping writes of pykured.cycle.book, each test on FakeKube and on a real Node with exactly kured's
RBAC (the API server's strategic merge, JSON patches and authorization); its pure helpers:
tests/cycle/test_book.py."""

from __future__ import annotations

import datetime
import uuid

import pytest

from pykured.core.errors import NotFoundError
from pykured.cycle.book import NodeBook
from pykured.cycle.state import (
    IN_PROGRESS_ANNOTATION,
    MOST_RECENT_REBOOT_NEEDED_ANNOTATION,
    STATE_ANNOTATIONS,
)
from tests.apis import Api

STATE_FIELDS = (
    "unschedulable_before",
    "reboot_boot_id",
    "reboot_triggered_at",
    "release_after",
    "reboot_attempts",
)

T0 = datetime.datetime(2026, 6, 30, 11, 29, 16, 123456, tzinfo=datetime.UTC)


@pytest.fixture
def book(api: Api) -> NodeBook:
    """A NodeBook on a fresh node, acting with exactly kured's RBAC."""
    node = api.add_node()
    return NodeBook(api.kured(), node=node)


def test_reboot_annotations_round_trip(book: NodeBook) -> None:
    book.add_reboot_annotations(T0)
    view = book.view()
    assert view.annotations[IN_PROGRESS_ANNOTATION] == "2026-06-30T11:29:16Z"
    assert view.annotations[MOST_RECENT_REBOOT_NEEDED_ANNOTATION] == "2026-06-30T11:29:16Z"
    assert view.in_progress is True
    assert book.remove_in_progress_annotation() is True
    view = book.view()
    assert view.in_progress is False
    assert view.most_recent_reboot_needed == T0.replace(microsecond=0)  # never removed, as kured
    assert book.remove_in_progress_annotation() is False


def test_labels_are_merged(book: NodeBook) -> None:
    book.apply_labels({"reboot": "pending", "zone": "a"})
    book.apply_labels({"reboot": "done"})
    book.apply_labels({})
    labels = book.view().labels
    assert (labels["reboot"], labels["zone"]) == ("done", "a")


def test_state_annotations_set_and_clear_in_one_call(book: NodeBook) -> None:
    boot_id = book.view().boot_id
    after = book.update_state(
        unschedulable_before=False,
        reboot_boot_id=boot_id,
        reboot_triggered_at=T0,
        release_after=T0,
        reboot_attempts=1,
    )
    assert after is not None
    assert (after.unschedulable_before, after.reboot_boot_id, after.reboot_attempts) == (False, boot_id, 1)
    assert after.release_after == T0.replace(microsecond=0)
    book.update_state(reboot_attempts=2, release_after=None)
    view = book.view()
    assert (view.reboot_attempts, view.release_after, view.unschedulable_before) == (2, None, False)
    book.update_state(**dict.fromkeys(STATE_FIELDS))
    assert set(STATE_ANNOTATIONS).isdisjoint(book.view().annotations)
    assert book.update_state() is None


def test_writes_to_a_missing_node_raise_kube_errors(api: Api) -> None:
    book = NodeBook(api.kured(), node=f"missing-{uuid.uuid4().hex[:8]}")
    with pytest.raises(NotFoundError):
        book.add_reboot_annotations(T0)
    with pytest.raises(NotFoundError):
        book.remove_in_progress_annotation()
