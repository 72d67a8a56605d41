"""``pykured status`` and ``pykured plan`` with the agents' ``--max-unavailable``: the lock's limit, its
count read from the DaemonSet's ``status.desiredNumberScheduled`` on the real API server, under the
requester's and under kured's RBAC (the rendering: tests/fleet/test_plan.py, tests/fleet/test_view.py)."""

from __future__ import annotations

import datetime
import io
import json
from collections.abc import Callable

import pytest

from pykured.cli.plan import plan_main
from pykured.cli.status import status_main
from pykured_dev.testenv.objects import ObjectHelpers
from tests.testenv import TestEnv

pytestmark = pytest.mark.k8s
NOW = datetime.datetime(2026, 11, 30, 21, 40, tzinfo=datetime.UTC)
Main = Callable[..., int]


def run(main: Main, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err, now=lambda: NOW)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("main", [status_main, plan_main], ids=["status", "plan"])
def test_the_limit_is_shown_from_the_daemonsets_count(k8s: TestEnv, main: Main) -> None:
    ns = k8s.new_namespace("limit")
    k8s.create_daemonset(ns, "kured")
    (node,) = k8s.add_nodes(k8s.unique("ln"))
    k8s.schedule_daemonset(ns, "kured", desired=12)
    args = [node, f"--ds-namespace={ns}", f"--kubeconfig={k8s.admin_kubeconfig}", "--concurrency=5"]
    code, out, err = run(main, *args, "--max-unavailable=25%")
    assert code == 0, err
    assert "limit: 3 (--concurrency 5, --max-unavailable 25% of 12 nodes)\n" in out
    code, out, err = run(main, *args, "--max-unavailable=25%", "-o", "json")
    assert code == 0, err
    assert json.loads(out)["limit"] == {"limit": 3, "concurrency": 5, "maxUnavailable": "25%", "nodes": 12}
    code, out, _ = run(main, *args)
    assert code == 0 and "limit:" not in out  # off: the output is as before


def test_with_kureds_rbac_the_count_is_read_and_without_a_daemonset_it_is_unknown(k8s: TestEnv) -> None:
    ns = k8s.new_namespace("limit")
    k8s.create_daemonset(ns, "kured")
    (node,) = k8s.add_nodes(k8s.unique("ln"))
    k8s.schedule_daemonset(ns, "kured", desired=8)
    k8s.apply_rbac_kured(ns)
    config = k8s.kubeconfig_for(*ObjectHelpers.kured_identity(ns))
    common = [
        node,
        f"--ds-namespace={ns}",
        f"--kubeconfig={config}",
        "--concurrency=4",
        "--max-unavailable=50%",
    ]
    code, out, err = run(plan_main, *common)
    assert code == 0, err
    assert "limit: 4 (--concurrency 4, --max-unavailable 50% of 8 nodes)\n" in out
    code, out, err = run(plan_main, *common, "--ds-name=absent")
    assert code == 0, err
    assert "limit: 1 (--concurrency 4, --max-unavailable 50% of an unknown number of nodes: 1)\n" in out
