import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pykured.lock.groups import GroupHolder, choose_group_slot, group_lease_name, group_slug, recheck_after_ns

S = 1_000_000_000
NOW = 10_000 * S
ZONE = "topology.kubernetes.io/zone"


def name(i: int, zone: str = "zone-a") -> str:
    return group_lease_name("kured-lock", zone, i)


def test_slug_is_dns_safe_and_distinct() -> None:
    for value in ("us-east-1a", "Europe/West_1", "", "a" * 80, "..."):
        slug = group_slug(value)
        assert re.fullmatch(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?", slug), slug
        assert len(name(9, value)) <= 63
    assert group_slug("Zone_A") != group_slug("zone-a")


def test_free_group_offers_its_slots() -> None:
    choice = choose_group_slot(
        prefix="kured-lock", group="zone-a", limit=2, slots={}, me="n1", cluster_holders=(), now_ns=NOW
    )
    assert choice.candidates == (name(0), name(1)) and not choice.full


def test_full_group_refuses_and_names_the_holders() -> None:
    slots = {name(0): GroupHolder("n1", "zone-a", NOW - 100 * S)}
    choice = choose_group_slot(
        prefix="kured-lock", group="zone-a", limit=1, slots=slots, me="n2", cluster_holders={"n1"}, now_ns=NOW
    )
    assert choice.full and choice.holders == ("n1",)


def test_other_groups_do_not_count() -> None:
    slots = {name(0, "zone-b"): GroupHolder("n1", "zone-b", NOW)}
    choice = choose_group_slot(
        prefix="kured-lock", group="zone-a", limit=1, slots=slots, me="n2", cluster_holders={"n1"}, now_ns=NOW
    )
    assert choice.candidates == (name(0),)


def test_own_slot_is_reentrant() -> None:
    slots = {name(0): GroupHolder("n1", "zone-a", NOW - 999 * S)}
    choice = choose_group_slot(
        prefix="kured-lock", group="zone-a", limit=1, slots=slots, me="n1", cluster_holders=(), now_ns=NOW
    )
    assert choice.held == name(0)


def test_a_group_slot_without_a_cluster_slot_is_stale_after_the_grace() -> None:
    fresh = {name(0): GroupHolder("n1", "zone-a", NOW - 5 * S)}
    old = {name(0): GroupHolder("n1", "zone-a", NOW - 60 * S)}
    args = {
        "prefix": "kured-lock",
        "group": "zone-a",
        "limit": 1,
        "me": "n2",
        "cluster_holders": (),
        "now_ns": NOW,
    }
    assert choose_group_slot(slots=fresh, **args).full  # type: ignore[arg-type]
    assert choose_group_slot(slots=old, **args).candidates == (name(0),)  # type: ignore[arg-type]


def test_leftover_slots_from_a_larger_limit_count() -> None:
    slots = {name(5): GroupHolder("n1", "zone-a", NOW)}
    choice = choose_group_slot(
        prefix="kured-lock", group="zone-a", limit=1, slots=slots, me="n2", cluster_holders={"n1"}, now_ns=NOW
    )
    assert choice.full


@given(
    st.integers(1, 3),
    st.dictionaries(st.integers(0, 5), st.tuples(st.sampled_from(["n1", "n2", "n3", "n4"]), st.booleans())),
)
def test_taking_any_candidate_never_exceeds_the_limit(limit: int, held: dict[int, tuple[str, bool]]) -> None:
    slots = {name(i): GroupHolder(node, "zone-a", NOW - 100 * S) for i, (node, _) in held.items()}
    cluster = {node for node, in_cluster in held.values() if in_cluster}
    choice = choose_group_slot(
        prefix="kured-lock",
        group="zone-a",
        limit=limit,
        slots=slots,
        me="me",
        cluster_holders=cluster,
        now_ns=NOW,
    )
    live_before = {n for n, h in slots.items() if h.node_id in cluster}
    for candidate in choice.candidates:
        assert candidate not in live_before
        assert len(live_before) + 1 <= limit


@pytest.mark.parametrize(
    ("slots", "cluster", "after"),
    [
        ({name(0): GroupHolder("n1", "zone-a", NOW - 100 * S)}, {"n1"}, None),
        ({name(0): GroupHolder("n1", "zone-a", NOW - 10 * S)}, set(), 20 * S),
        (
            {
                name(0): GroupHolder("n1", "zone-a", NOW - 10 * S),
                name(1): GroupHolder("n2", "zone-a", NOW - 25 * S),
            },
            set(),
            5 * S,
        ),
        ({name(0): GroupHolder("n1", "zone-a", NOW - 10 * S), name(1): None}, {"n1"}, None),
        ({name(0, "zone-b"): GroupHolder("n1", "zone-b", NOW - 10 * S)}, set(), None),
        ({name(0): GroupHolder("n1", "zone-a", NOW - 40 * S)}, set(), None),
    ],
    ids=[
        "holds-a-cluster-slot",
        "by-its-grace",
        "the-first-to-go-stale",
        "free-slot",
        "other-group",
        "stale",
    ],
)
def test_a_full_group_is_looked_at_again_when_its_first_grace_holder_goes_stale(
    slots: dict[str, GroupHolder | None], cluster: set[str], after: int | None
) -> None:
    assert recheck_after_ns(slots, group="zone-a", cluster_holders=cluster, now_ns=NOW) == after
