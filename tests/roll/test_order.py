"""The current roll and its order, as pure functions."""

from __future__ import annotations

import datetime

from pykured.roll import order as roll

T = datetime.datetime(2026, 11, 28, 2, 0, tzinfo=datetime.UTC)
H = datetime.timedelta(hours=1)


def test_no_roll_while_no_node_needs_a_reboot() -> None:
    members = [roll.Member("a", last_reboot=T), roll.Member("b")]
    assert roll.start(members) is None
    assert roll.current(members) == roll.Roll(None)
    assert roll.current(members).place("a") == ""


def test_least_recently_rebooted_first_then_longest_waiting_then_name() -> None:
    members = [
        roll.Member("rebooted-in-roll", last_reboot=T + 2 * H, waiting_since=T + 30 * H),
        roll.Member("old-boot", last_reboot=T - 100 * H, waiting_since=T + H),
        roll.Member("never-seen-late", waiting_since=T + 5 * H),
        roll.Member("never-seen-b", waiting_since=T),
        roll.Member("never-seen-a", waiting_since=T),
    ]
    ordered = [m.node for m in sorted(members, key=roll.order_key)]
    assert ordered == ["never-seen-a", "never-seen-b", "never-seen-late", "old-boot", "rebooted-in-roll"]


def test_a_node_rebooted_since_the_roll_began_is_in_it() -> None:
    members = [
        roll.Member("a", last_reboot=T + H),  # rebooted after the roll began
        roll.Member("b", last_reboot=T),  # at the very moment: in
        roll.Member("c", last_reboot=T - H),  # before: not in
        roll.Member("d", waiting_since=T),
        roll.Member("e", last_reboot=T + 3 * H, waiting_since=T + 10 * H),  # in, and needs again
    ]
    current = roll.current(members)
    assert current.since == T
    assert current.rebooted == ("b", "a", "e")
    assert current.waiting == ("d", "e")
    assert [current.place(n) for n in "abcde"] == [
        "rebooted",
        "rebooted",
        "",
        "waiting 1/2",
        "rebooted, waiting 2/2",
    ]
