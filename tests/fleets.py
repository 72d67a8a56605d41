"""Agent fleets for the end-to-end tests: the factory behind their ``make_fleet`` fixtures, and the log.

``make(n, args=..., ...)`` makes a namespace with kured's DaemonSet, ``n`` simulated nodes and a
:class:`~pykured_dev.testenv.fleet.Fleet` running one agent per node; the fleets close when the factory
does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

from pykured_dev.testenv.fleet import Fleet
from tests.testenv import TestEnv

MakeFleet = Callable[..., tuple[Fleet, str, list[str]]]


@contextlib.contextmanager
def fleet_factory(k8s: TestEnv, workdir: Path, *, period: str) -> Iterator[MakeFleet]:
    """``make(n=1, *, args, method, start, kubeconfig, labels, metrics)`` -> ``(fleet, namespace, nodes)``.

    The agents run with ``--ds-namespace``, ``--period=<period>`` and ``--reboot-retry-delay=3s`` before
    ``args``. ``labels`` labels every node, or, a list, one mapping per node. ``metrics``: each agent serves
    ``/metrics`` on a known port of 127.0.0.1 (:attr:`~pykured_dev.testenv.fleet.AgentSlot.metrics_port`).
    """
    fleets: list[Fleet] = []

    def make(
        n: int = 1,
        *,
        args: tuple[str, ...] = (),
        method: str = "command",
        start: bool = True,
        kubeconfig: Callable[[str], str] | None = None,
        labels: dict[str, str] | list[dict[str, str]] | None = None,
        metrics: bool = False,
    ) -> tuple[Fleet, str, list[str]]:
        ns = k8s.new_namespace("ds")
        k8s.create_daemonset(ns, "kured")
        per_node = labels if isinstance(labels, list) else [labels] * n
        nodes = [k8s.add_nodes(k8s.unique("node"), labels=per_node[i])[0] for i in range(n)]
        fleet = Fleet(
            k8s,
            workdir=workdir / f"fleet-{len(fleets)}",
            method=method,
            kubeconfig=kubeconfig,
            metrics=metrics,
            args=[f"--ds-namespace={ns}", f"--period={period}", "--reboot-retry-delay=3s", *args],
        )
        fleet.__enter__()
        fleets.append(fleet)
        for node in nodes:
            fleet.add(node, start=start)
        return fleet, ns, nodes

    yield make
    for fleet in fleets:
        fleet.close()


def since_last_start(fleet: Fleet, node: str) -> str:
    """The agent's log since its latest start."""
    return fleet.log_text(node).split("Kubernetes Reboot Daemon")[-1]
