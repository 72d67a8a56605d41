"""The blockers' order, declared once: the drivers ask them in this order and the first block wins.

:data:`ORDER` lists every blocker by name with its builder (each blocker module's ``build``: ``None`` when
its flags are not given). A :class:`Shared` blocker is the same for every node and built once, when the
agent is built; an :class:`EachNode` blocker looks at one node and is built each time a driver asks for that
node's blockers (the daemon once, for its own node; FleetLock per request). :class:`BlockerTable` is what the
composition root builds: the shared blockers, and :meth:`BlockerTable.for_node`, one node's list in
:data:`ORDER`.

The order: the fleet's freeze, the node's pause, its quarantine, its blocking labels and annotations, then
kured's Prometheus alerts, Alertmanager's alerts, and kured's blocking pods. A new blocker is its own module
(the blocker and its ``build``), its test, and one line here.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from typing import Final, cast

from pykured.blockers import freeze, nodemarks, pause, pods, quarantine
from pykured.blockers.base import Blocker
from pykured.blockers.options import FleetInputs, NodeInputs


@dataclasses.dataclass(frozen=True, slots=True)
class Imported:
    """A blocker module's ``build``, imported only for an agent that sets ``option`` (its client and its
    parsing cost nothing to an agent that does not use them)."""

    module: str
    option: str
    """The option that turns the blocker on (its ``build`` returns ``None`` without it)."""

    def __call__(self, inputs: FleetInputs) -> Blocker | None:
        if not getattr(inputs.options, self.option):
            return None
        build = importlib.import_module(self.module).build
        return cast(Blocker | None, build(inputs))


@dataclasses.dataclass(frozen=True, slots=True)
class Shared:
    """A blocker the same for every node, built once from :class:`FleetInputs`."""

    name: str
    build: Callable[[FleetInputs], Blocker | None]

    @property
    def module(self) -> str:
        """The blocker's module (imported or not yet)."""
        return self.build.module if isinstance(self.build, Imported) else self.build.__module__


@dataclasses.dataclass(frozen=True, slots=True)
class EachNode:
    """A blocker that looks at one node, built for each node from :class:`NodeInputs`."""

    name: str
    build: Callable[[NodeInputs], Blocker | None]

    @property
    def module(self) -> str:
        """The blocker's module."""
        return self.build.__module__


ORDER: Final[tuple[Shared | EachNode, ...]] = (
    Shared("freeze", freeze.build),
    EachNode("pause", pause.build),
    EachNode("quarantine", quarantine.build),
    EachNode("node-marks", nodemarks.build),
    Shared("prometheus", Imported("pykured.blockers.prometheus", "prometheus_url")),
    Shared("alertmanager", Imported("pykured.blockers.alertmanager", "alertmanager_url")),
    EachNode("pods", pods.build),
)


class BlockerTable:
    """Every node's blockers in :data:`ORDER`; the shared ones built once, here."""

    def __init__(self, inputs: FleetInputs) -> None:
        self._shared = {entry.name: entry.build(inputs) for entry in ORDER if isinstance(entry, Shared)}

    @property
    def shared(self) -> list[Blocker]:
        """The blockers the same for every node, in :data:`ORDER`."""
        return [blocker for blocker in self._shared.values() if blocker is not None]

    def for_node(self, inputs: NodeInputs) -> list[Blocker]:
        """One node's blockers, in :data:`ORDER` (each node's built now from ``inputs``)."""
        built = (
            self._shared[entry.name] if isinstance(entry, Shared) else entry.build(inputs) for entry in ORDER
        )
        return [blocker for blocker in built if blocker is not None]
