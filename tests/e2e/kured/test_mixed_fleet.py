"""Mixed fleets: the real kured 1.23.0 and pykured on one annotation lock, checked from the API server.

Every scenario runs kured's own ``kured-ds.yaml`` DaemonSet shape (``--period=10s``, a PreferNoSchedule
taint, ``--concurrency``) on its own namespace and nodes; some nodes run the kured image, others the same
template with pykured's image. kured and pykured both taint a node when they find the lock full, so a taint
that appears while only the other side holds the lock shows that side's annotation value was read and obeyed.

* ``kured-first`` (concurrency 1): a kured node holds the lock; pykured nodes that then need a reboot wait.
* ``pykured-first`` (concurrency 1): pykured nodes hold the lock (their reboots held back) until the kured
  node has found it taken; then everyone rolls.
* ``multi-lock`` (concurrency 2, kured's ``{"maxOwners", "locks"}`` form): two pykured holders fill the lock
  and block both kured nodes; a kured node takes a freed slot beside the remaining pykured entry, pykured
  rewrites the value keeping kured's entry, then both kured nodes hold and a third pykured node waits.
* ``rollout`` (concurrency 1): four kured nodes roll; right after the first one rebooted (its new kured agent
  would release the lock only 30–90 s later) the DaemonSet's image becomes pykured's and the pods are
  replaced one at a time, the lock holder's first: its pykured agent finishes kured's cycle and the roll
  goes on with pykured.
"""

from __future__ import annotations

import functools
import itertools
import json
import time

import pytest

from pykured.kube.client import STRATEGIC_MERGE_PATCH
from pykured_dev.eventually import eventually
from pykured_dev.testenv.history import Change, Roll, shape
from pykured_dev.testenv.pods import PodTemplate
from tests.e2e.kured.support import (
    KURED_MAIN_TICK,
    KURED_TICK,
    PYKURED,
    PYKURED_RETURN,
    SCENARIO_TIMEOUT,
    Campaign,
    Mixed,
    check_roll,
    scenario,
)

pytestmark = [pytest.mark.k8s, pytest.mark.slow, pytest.mark.timeout(SCENARIO_TIMEOUT + 90)]

KURED_HANDOVER = 100.0 + PYKURED_RETURN
"""A kured holder's release (its new agent's first loop, 30–90 s after the reboot, and a tick) and the next
pykured node's reboot and return."""


def _roll(c: Campaign, m: Mixed, changes: list[Change]) -> Roll:
    return c.roll(m, changes)


@scenario("kured-first")
def kured_first(c: Campaign) -> Mixed:
    m = c.mixed_fleet("kf", kinds={"k1": "kured", "p1": "pykured", "p2": "pykured"}, limit=1)
    (k1,), pykureds = m.of("kured"), m.of("pykured")
    c.fleet.touch(k1)
    c.wait("the kured node takes the lock", lambda ch: c.holders(m)(ch) == [k1], timeout=KURED_MAIN_TICK + 30)
    for node in pykureds:
        c.fleet.touch(node)
    c.wait(
        "both pykured nodes blocked by the kured holder",
        lambda ch: all(_roll(c, m, ch).blocked_by(p, {k1}) for p in pykureds),
        timeout=90,
    )
    c.finish(m, timeout=KURED_HANDOVER + 60)
    return m


@scenario("pykured-first")
def pykured_first(c: Campaign) -> Mixed:
    m = c.mixed_fleet("pf", kinds={"p1": "pykured", "p2": "pykured", "k1": "kured"}, limit=1)
    (k1,), pykureds = m.of("kured"), m.of("pykured")
    c.fleet.paused.update(pykureds)
    for node in m.nodes:
        c.fleet.touch(node)
    c.wait(
        "the kured node blocked by a pykured holder",
        lambda ch: bool(_roll(c, m, ch).blocked_by(k1, set(pykureds))),
        timeout=KURED_MAIN_TICK + 30,
    )
    c.fleet.paused.difference_update(pykureds)
    c.finish(m, timeout=KURED_HANDOVER + 60)
    return m


@scenario("multi-lock")
def multi_lock(c: Campaign, *, policies: bool = False) -> Mixed:
    m = c.mixed_fleet(
        "mlp" if policies else "ml",
        kinds={"p1": "pykured", "p2": "pykured", "k1": "kured", "k2": "kured", "p3": "pykured"},
        limit=2,
        policies=policies,
    )
    p1, p2, p3 = m.of("pykured")
    kureds = m.of("kured")
    c.fleet.paused.update({p1, p2})
    for node in (p1, p2, *kureds):
        c.fleet.touch(node)
    c.wait("p1 and p2 hold both slots", lambda ch: sorted(c.holders(m)(ch)) == sorted([p1, p2]), timeout=90)
    c.wait(
        "both kured nodes blocked by the full pykured lock",
        lambda ch: all(_roll(c, m, ch).blocked_by(k, {p1, p2}) for k in kureds),
        timeout=KURED_MAIN_TICK + 30,
    )
    c.fleet.paused.discard(p1)
    c.wait(
        "a kured node takes the slot p1 freed, beside p2's entry",
        lambda ch: any(n in kureds and p2 in h for _, n, h in _roll(c, m, ch).acquired),
        timeout=PYKURED_RETURN + KURED_TICK,  # p1 back and released, then a kured tick
    )
    c.fleet.paused.discard(p2)
    c.wait(
        "both kured nodes hold the lock",
        lambda ch: sorted(c.holders(m)(ch)) == sorted(kureds),
        timeout=PYKURED_RETURN + KURED_TICK,  # p2 back and released, then the other kured node's tick
    )
    c.fleet.touch(p3)
    c.wait(
        "p3 blocked by the two kured holders",
        lambda ch: bool(_roll(c, m, ch).blocked_by(p3, set(kureds))),
        timeout=20,
    )
    c.finish(m, timeout=2 * KURED_HANDOVER + 60)
    return m


@scenario("rollout")
def rollout(c: Campaign) -> Mixed:
    m = c.mixed_fleet("ro", kinds={f"r{i}": "kured" for i in range(1, 5)}, limit=1)
    for node in m.nodes:
        c.fleet.touch(node)

    def rebooted_holder(changes: list[Change]) -> bool:
        roll = _roll(c, m, changes)
        return any(roll.reboots()[n] >= 1 for n in roll.holders)

    c.wait("a kured holder rebooted, still holding the lock", rebooted_holder, timeout=KURED_MAIN_TICK + 30)
    (holder,) = c.roll(m).holders
    kube = c.k8s.kube()
    path = f"/apis/apps/v1/namespaces/{m.namespace}/daemonsets/{m.ds}"
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "kured", "image": PYKURED}]}}}}
    kube.request("PATCH", path, body=patch, content_type=STRATEGIC_MERGE_PATCH)
    template = PodTemplate.of(kube.get(path))
    order = [holder, *(n for n in m.nodes if n != holder)]
    for node in order:
        c.fleet.replace_pod(node, template)
        m.kind[node] = "pykured"
        m.notes.append(f"{node} {time.monotonic():.3f}")
        assert eventually(functools.partial(c.fleet.probe, node, 8080), timeout=90, every=0.2), (
            f"pykured pod on {node} never became ready"
        )
    c.finish(m, timeout=120)
    return m


def _single_lock_shapes(m: Mixed) -> dict[str, set[str]]:
    assert m.roll is not None
    shapes: dict[str, set[str]] = {}
    for value in m.roll.lock_values:
        decoded = json.loads(value)
        shapes.setdefault(m.kind[decoded["nodeID"]], set()).add(json.dumps(shape(decoded)))
    return shapes


@pytest.mark.kured_scenario("kured-first")
def test_a_kured_holder_blocks_pykured_nodes(kured: Campaign) -> None:
    m = kured.result("kured-first")
    roll = check_roll(m)
    (k1,) = m.of("kured")
    for node in m.of("pykured"):
        assert roll.blocked_by(node, {k1}), f"{node} was never blocked by {k1}: {roll.blocked}"
    assert next(node for _, node, _ in roll.acquired) == k1
    shapes = _single_lock_shapes(m)
    assert shapes["kured"] == shapes["pykured"], shapes
    assert len(shapes["kured"]) == 1


@pytest.mark.kured_scenario("pykured-first")
def test_a_pykured_holder_blocks_a_kured_node(kured: Campaign) -> None:
    m = kured.result("pykured-first")
    roll = check_roll(m)
    (k1,) = m.of("kured")
    assert roll.blocked_by(k1, set(m.of("pykured"))), roll.blocked
    shapes = _single_lock_shapes(m)
    assert shapes["kured"] == shapes["pykured"], shapes


@pytest.mark.kured_scenario("multi-lock")
def test_kured_multi_lock_with_pykured_at_concurrency_2(kured: Campaign) -> None:
    check_multi_lock(kured.result("multi-lock"))


def check_multi_lock(m: Mixed) -> None:
    """The ``multi-lock`` scenario's roll: who blocked whom, kured's entry beside pykured's and kept by
    pykured's rewrite, the same entry shape from both."""
    roll = check_roll(m)
    kureds, pykureds = set(m.of("kured")), set(m.of("pykured"))
    p1, p2, p3 = m.of("pykured")
    for node in kureds:
        assert roll.blocked_by(node, {p1, p2}), roll.blocked
    assert roll.blocked_by(p3, kureds), roll.blocked
    # kured appended its entry beside pykured's, and pykured kept kured's entries when it rewrote the value.
    assert any(n in kureds and set(h) & pykureds for _, n, h in roll.acquired), roll.acquired
    values = [json.loads(v) for v in roll.lock_values]
    assert all(v["maxOwners"] == 2 for v in values)
    assert any(
        {e["nodeID"] for e in before["locks"]} - {p2} == {e["nodeID"] for e in after["locks"]}
        and {e["nodeID"] for e in after["locks"]} <= kureds
        and p2 in {e["nodeID"] for e in before["locks"]}
        for before, after in itertools.pairwise(values)
    ), "p2's release did not keep the kured entry"
    kured_entries = {json.dumps(shape(e)) for v in values for e in v["locks"] if e["nodeID"] in kureds}
    pykured_entries = {json.dumps(shape(e)) for v in values for e in v["locks"] if e["nodeID"] in pykureds}
    assert kured_entries == pykured_entries


@pytest.mark.kured_scenario("rollout")
def test_a_daemonset_rollout_replaces_kured_by_pykured_mid_roll(kured: Campaign) -> None:
    m = kured.result("rollout")
    roll = check_roll(m)
    replaced = {node: float(at) for node, at in (note.split() for note in m.notes)}
    holder = next(iter(replaced))
    assert set(m.kind.values()) == {"pykured"}
    # The holder's kured agent had rebooted it; its pykured replacement released the lock (kured's new agent
    # would have needed 30 s at least), and the other three rolled after it, on pykured.
    assert next(node for _, node, _ in roll.acquired) == holder
    released = [seen for _, node, seen in roll.released if node == holder]
    assert len(released) == 1 and released[0] > replaced[holder], (released, replaced)
    assert released[0] - replaced[holder] < 30
