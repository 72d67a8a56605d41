"""The real kured 1.23.0 and pykured on one annotation lock under pykured's admission policies.

Each pod of these scenarios has the kubelet's kind of token (bound to it, naming its node), and the policies
of ``kustomize/base`` apply to the scenario's ServiceAccount, as when kured's pods share pykured's
ServiceAccount during a migration:

* ``multi-lock-policies``: the ``multi-lock`` roll of :mod:`tests.e2e.kured.test_mixed_fleet` (concurrency 2,
  kured's ``{"maxOwners","locks"}`` form) under the policies: kured appends and removes its own entry beside
  pykured's, pykured beside kured's, and every write of both passes.
* ``ttl-policies`` (concurrency 1, ``--lock-ttl=180s``): a pykured node takes the lock and its reboot is
  held back past the TTL. kured's take over the expired lock is refused (its log says why, naming the
  policy), and so is the pykured waiter's, which says so once and writes no more; the lock stays its
  holder's until it releases it after its reboot, and the roll goes on, never taking a lock over. (The TTL
  is longer than a kured node's own hold: kured's new agent does not release a lock whose TTL expired, and
  under the policies no other node takes it over.)
"""

from __future__ import annotations

import pytest

from pykured_dev.eventually import eventually
from pykured_dev.testenv.history import lock_holders
from tests.e2e.kured.support import (
    KURED_MAIN_TICK,
    KURED_TICK,
    PYKURED_RETURN,
    SCENARIO_TIMEOUT,
    Campaign,
    Mixed,
    check_roll,
    scenario,
)
from tests.e2e.kured.test_mixed_fleet import KURED_HANDOVER, check_multi_lock, multi_lock

TTL = 180.0
"""The scenario's ``--lock-ttl``: longer than a kured node's own hold (its reboot and its new agent's first
loop, :data:`KURED_HANDOVER`)."""
LONGEST = SCENARIO_TIMEOUT + 300
"""The ``ttl-policies`` scenario waits for the TTL to run out before the roll."""

pytestmark = [pytest.mark.k8s, pytest.mark.slow, pytest.mark.timeout(LONGEST + 90)]


@scenario("multi-lock-policies")
def multi_lock_under_policies(c: Campaign) -> Mixed:
    return multi_lock(c, policies=True)


@scenario("ttl-policies")
def ttl_under_policies(c: Campaign) -> Mixed:
    m = c.mixed_fleet(
        "tp",
        kinds={"p1": "pykured", "k1": "kured", "p2": "pykured"},
        limit=1,
        extra=[f"--lock-ttl={TTL:.0f}s"],
        policies=True,
    )
    (k1,), (p1, p2) = m.of("kured"), m.of("pykured")
    c.fleet.paused.add(p1)
    c.fleet.touch(p1)
    c.wait("p1 takes the lock", lambda ch: c.holders(m)(ch) == [p1], timeout=60)
    for node in (k1, p2):
        c.fleet.touch(node)
    # after the TTL, each waiter's take over p1's expired lock is refused (a refused write leaves no trace in
    # the API server's history: the agents' logs say it)
    kured_refused = (
        f"may change only its own entry in the lock annotation {m.annotation}; the entries of {p1}"
    )
    pykured_refused = "Not allowed to take over the lock on daemonset"
    assert eventually(
        lambda: kured_refused in c.fleet.log_text(k1), timeout=TTL + KURED_MAIN_TICK + KURED_TICK, every=1
    ), f"kured never tried p1's expired lock:\n{c.fleet.log_text(k1)}"
    assert eventually(lambda: pykured_refused in c.fleet.log_text(p2), timeout=TTL + 90, every=1), (
        f"p2 never tried p1's expired lock:\n{c.fleet.log_text(p2)}"
    )
    assert c.holders(m)(c.history.changes()) == [p1]
    m.notes.append(f"p1 held past its TTL, both waiters refused, at {len(c.history.changes())}")
    c.fleet.paused.discard(p1)
    c.finish(m, timeout=PYKURED_RETURN + KURED_TICK + KURED_HANDOVER + 2 * PYKURED_RETURN + 60)
    return m


@pytest.mark.kured_scenario("multi-lock-policies")
def test_kured_and_pykured_share_the_multi_lock_under_the_policies(kured: Campaign) -> None:
    m = kured.result("multi-lock-policies")
    check_multi_lock(m)
    for node, log in m.logs.items():
        assert "ValidatingAdmissionPolicy" not in log, f"{node} ({m.kind[node]}) was refused a write:\n{log}"


@pytest.mark.kured_scenario("ttl-policies")
def test_an_expired_lock_is_not_taken_over_under_the_policies(kured: Campaign) -> None:
    m = kured.result("ttl-policies", timeout=LONGEST)
    roll = check_roll(m)
    (k1,), (p1, p2) = m.of("kured"), m.of("pykured")
    # nobody took a lock over: every node entered it only after its holder had left it, by another write
    released_at = {revision for revision, _node, _seen in roll.released}
    assert not [a for a in roll.acquired if a[0] in released_at], (roll.acquired, roll.released)
    assert next(node for _, node, _ in roll.acquired) == p1
    # kured logged the policy's refusal (at each of its ticks, as kured does); pykured said it once for each
    # value of p1's lock it was refused over, and wrote no more
    assert "ValidatingAdmissionPolicy" in m.logs[k1] and "Error acquiring lock" in m.logs[k1], m.logs[k1]
    refusals = [line for line in m.logs[p2].splitlines() if "Not allowed to take over the lock" in line]
    over_p1 = [line for line in refusals if f"held by node {p1}:" in line]
    p1_values = [v for v in roll.lock_values if lock_holders(v) == [p1]]
    assert 1 <= len(over_p1) <= len(p1_values), (m.logs[p2], p1_values)
    assert "agent-daemonset" in refusals[0], refusals
