"""Tests for pykured.cycle.book: pure helpers, and the bookkeeping writes on a real Node."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from pykured.cycle.book import NodeBook
from pykured.cycle.state import (
    IN_PROGRESS_ANNOTATION,
    MOST_RECENT_REBOOT_NEEDED_ANNOTATION,
    json_pointer_escape,
    reboot_annotations,
)

STATE_FIELDS = (
    "unschedulable_before",
    "reboot_boot_id",
    "reboot_triggered_at",
    "release_after",
    "reboot_attempts",
)

T0 = datetime.datetime(2026, 6, 30, 11, 29, 16, 123456, tzinfo=datetime.UTC)


@pytest.fixture
def book(k8s: Any) -> NodeBook:
    """A NodeBook on a fresh node, acting with exactly kured's RBAC."""
    node = k8s.unique("node")
    k8s.add_nodes(node)
    rbac_ns = k8s.new_namespace("kured")
    k8s.apply_rbac_kured(rbac_ns)
    kube = k8s.kube_as(
        f"system:serviceaccount:{rbac_ns}:kured",
        ("system:serviceaccounts", f"system:serviceaccounts:{rbac_ns}"),
    )
    return NodeBook(kube, node=node)


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
