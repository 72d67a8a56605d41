"""What the API server committed, read back with a watch from a resourceVersion taken before it happened.

A test takes a resourceVersion (:func:`version_of`) before the cycle it looks at, lets the cycle run, then
replays every change committed since with one watch from that version (:func:`committed`): the changes come
in the order etcd committed them, each with its revision, whatever the test saw while it polled. The tests
assert on that sequence, never on timing: :func:`revision_of_first` orders two writes, :func:`flips`
counts the transitions of a Node's ``spec.unschedulable``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from pykured.kube.client import Kube
from pykured_dev.testenv.history import lock_holders

NODES = "/api/v1/nodes"
LOCK_ANNOTATION = "weave.works/kured-node-lock"


def version_of(obj: dict[str, Any]) -> str:
    """An object's resourceVersion: a point in etcd's history to replay from."""
    return str(obj["metadata"]["resourceVersion"])


def committed(
    kube: Kube, path: str, since: str, *, field_selector: str | None = None, quiet: int = 3
) -> list[dict[str, Any]]:
    """Every object ``path`` holds after each change (``ADDED`` or ``MODIFIED``) committed since ``since``,
    in etcd's order: one watch from ``since``, ended by the API server once it has been ``quiet`` seconds
    without an event. A version older than the watch can replay fails (the history would have a gap)."""
    query = {"resourceVersion": since, **({"fieldSelector": field_selector} if field_selector else {})}
    out: list[dict[str, Any]] = []
    for event in kube.watch(path, query=query, timeout_seconds=quiet):
        kind = event.get("type")
        if kind == "ERROR":
            raise AssertionError(f"the watch of {path} from {since} cannot replay: {event.get('object')}")
        if kind in ("ADDED", "MODIFIED"):
            out.append(event.get("object") or {})
    return out


def revision_of_first(kube: Kube, path: str, since: str, matches: Callable[[dict[str, Any]], bool]) -> int:
    """The resourceVersion (etcd revision) of the first change since ``since`` whose object ``matches``."""
    for obj in committed(kube, path, since):
        if matches(obj):
            return int(obj["metadata"]["resourceVersion"])
    raise AssertionError(f"no matching change on {path} since {since}")


@dataclasses.dataclass(frozen=True)
class Flips:
    """A Node's ``spec.unschedulable`` as the API server committed it since a version."""

    before: bool
    """Its value at that version."""
    changes: tuple[tuple[int, bool, dict[str, Any]], ...]
    """Each committed change of the Node: its revision, ``spec.unschedulable`` and the Node."""

    @property
    def cordons(self) -> list[int]:
        """The revisions at which it went from schedulable to unschedulable."""
        return self._turns(to=True)

    @property
    def uncordons(self) -> list[int]:
        """The revisions at which it went from unschedulable to schedulable."""
        return self._turns(to=False)

    @property
    def after(self) -> bool:
        """Its value after the last change."""
        return self.changes[-1][1] if self.changes else self.before

    def _turns(self, *, to: bool) -> list[int]:
        out, value = [], self.before
        for revision, now, _obj in self.changes:
            if now != value and now is to:
                out.append(revision)
            value = now
        return out

    def node_at(self, revision: int) -> dict[str, Any]:
        """The Node as the change at ``revision`` left it."""
        for rev, _value, obj in self.changes:
            if rev == revision:
                return obj
        raise KeyError(revision)

    def __str__(self) -> str:
        return f"before={self.before} then " + " ".join(f"{r}:{v}" for r, v, _o in self.changes)


def flips(kube: Kube, node: dict[str, Any]) -> Flips:
    """Every change of ``spec.unschedulable`` committed on the Node since ``node`` (a copy read before)."""
    name = node["metadata"]["name"]
    objs = committed(kube, NODES, version_of(node), field_selector=f"metadata.name={name}")
    changes = tuple(
        (int(o["metadata"]["resourceVersion"]), bool(o["spec"].get("unschedulable")), o) for o in objs
    )
    return Flips(before=bool(node["spec"].get("unschedulable")), changes=changes)


def lock_path(backend: str, namespace: str) -> str:
    """The collection the lock of ``backend`` (``daemonset`` or ``lease``) lives in."""
    if backend == "lease":
        return f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
    return f"/apis/apps/v1/namespaces/{namespace}/daemonsets"


def lock_names(backend: str, obj: dict[str, Any]) -> list[str]:
    """The nodes one lock object (a DaemonSet's annotation, or a Lease) names as holders."""
    if backend == "lease":
        holder = (obj.get("spec") or {}).get("holderIdentity")
        return [str(holder)] if holder else []
    return lock_holders((obj["metadata"].get("annotations") or {}).get(LOCK_ANNOTATION))


def lock_taken(kube: Kube, backend: str, namespace: str, node: str, since: str) -> int:
    """The revision at which ``node`` first took a slot of ``backend``'s lock since ``since``."""
    return revision_of_first(
        kube, lock_path(backend, namespace), since, lambda o: node in lock_names(backend, o)
    )


def lock_freed(kube: Kube, backend: str, namespace: str, node: str, since: str) -> int:
    """The revision of the first change since ``since`` that took ``node``'s name off a lock object which
    named it (a release, a take-over, an operator's release)."""
    named: set[str] = set()
    for obj in committed(kube, lock_path(backend, namespace), since):
        key = obj["metadata"]["name"]
        if node in lock_names(backend, obj):
            named.add(key)
        elif key in named:
            return int(obj["metadata"]["resourceVersion"])
    raise AssertionError(f"{node} did not lose a slot of the {backend} lock since {since}")
