"""Tests for the pure helpers of pykured.cycle.book's writes (the writes, on FakeKube and on a real Node with
exactly kured's RBAC: tests/e2e/cycle/test_book.py)."""

from __future__ import annotations

import datetime

import pytest

from pykured.cycle.state import (
    IN_PROGRESS_ANNOTATION,
    MOST_RECENT_REBOOT_NEEDED_ANNOTATION,
    json_pointer_escape,
    reboot_annotations,
)

T0 = datetime.datetime(2026, 6, 30, 11, 29, 16, 123456, tzinfo=datetime.UTC)


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("weave.works/kured-reboot-in-progress", "weave.works~1kured-reboot-in-progress"),
        ("a~b/c", "a~0b~1c"),
        ("plain", "plain"),
    ],
    ids=["slash", "tilde-first", "plain"],
)
def test_json_pointer_escape(key: str, expected: str) -> None:
    assert json_pointer_escape(key) == expected


def test_reboot_annotations_share_one_second_precision_stamp() -> None:
    assert reboot_annotations(T0) == {
        IN_PROGRESS_ANNOTATION: "2026-06-30T11:29:16Z",
        MOST_RECENT_REBOOT_NEEDED_ANNOTATION: "2026-06-30T11:29:16Z",
    }
