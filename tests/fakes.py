"""In-memory fakes for pure-logic tests of the reboot cycle: FakeKube, FakeClock, a notifier, a sample Node.

``FakeKube`` implements the part of :class:`pykured.kube.client.Kube` the cycle uses (Nodes, Pods, DaemonSets,
Events) with the API server's rules that matter to it: every write bumps a global ``resourceVersion``; a
``PUT`` with a stale ``resourceVersion`` fails with 409 Conflict; merge patches (RFC 7386) delete on
``null``; JSON patches (RFC 6902) support ``add``/``remove``/``replace``/``test`` and answer 422 when a
path is missing or a ``test`` fails; an unknown object is 404. :meth:`FakeKube.fail_next` injects errors.
It is evidence only for the cycle's logic: the API server's own behaviour is tested against the real one.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
from collections.abc import Callable, Mapping
from typing import Any

from pykured.core import errors
from pykured.kube.client import JSON_PATCH, Obj

Failure = Callable[[str, str, Any], errors.KubeError | None]
"""``(method, path, body) -> error or None``: an injected failure for one matching request."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (also what a strategic merge does to the maps the cycle writes)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _unescape(segment: str) -> str:
    return segment.replace("~1", "/").replace("~0", "~")


def json_patch(target: Obj, ops: list[dict[str, Any]]) -> Obj:
    """RFC 6902 ``add``/``remove``/``replace``/``test``; a missing path or failed test is 422."""
    doc = copy.deepcopy(target)
    for op in ops:
        parts = [_unescape(p) for p in op["path"].split("/")[1:]]
        parent: Any = doc
        for part in parts[:-1]:
            parent = parent[int(part)] if isinstance(parent, list) else parent.get(part)
            if parent is None:
                raise _status(422, f"path {op['path']} not found")
        last = parts[-1]
        kind = op["op"]
        if isinstance(parent, list):
            index = len(parent) if last == "-" else int(last)
            if kind == "add":
                parent.insert(index, op["value"])
            elif kind == "remove" and index < len(parent):
                del parent[index]
            elif kind == "replace" and index < len(parent):
                parent[index] = op["value"]
            elif kind == "test" and index < len(parent) and parent[index] == op["value"]:
                pass
            else:
                raise _status(422, f"{kind} {op['path']} failed")
            continue
        if kind in ("add", "replace") and (kind == "add" or last in parent):
            parent[last] = op["value"]
        elif kind == "remove" and last in parent:
            del parent[last]
        elif kind == "test" and parent.get(last) == op["value"]:
            pass
        else:
            raise _status(422, f"{kind} {op['path']} failed")
    return doc


def _status(status: int, message: str) -> errors.KubeError:
    cls = {403: errors.ForbiddenError, 404: errors.NotFoundError, 409: errors.ConflictError}.get(
        status, errors.KubeError
    )
    return cls(f"{message} (HTTP {status})", status=status)


def sample_node(**overrides: object) -> dict[str, object]:
    """A Node as the API server answers it (``n1``, Ready, bootID ``boot-1``); ``overrides`` replace keys."""
    node: dict[str, object] = {
        "metadata": {
            "name": "n1",
            "uid": "u-1",
            "resourceVersion": "42",
            "labels": {"a": "b"},
            "annotations": {},
        },
        "spec": {},
        "status": {
            "nodeInfo": {"bootID": "boot-1"},
            "conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": "True"},
            ],
        },
    }
    node.update(overrides)
    return node


class FakeKube:
    """An in-memory API server for the calls the reboot cycle makes (see the module docstring)."""

    def __init__(self) -> None:
        self.nodes: dict[str, Obj] = {}
        self.pods: list[Obj] = []
        self.daemonsets: dict[tuple[str, str], Obj] = {}
        self.events: list[Obj] = []
        self.requests: list[tuple[str, str]] = []
        self._rv = 0
        self._failures: list[Failure] = []

    # -- setting up ------------------------------------------------------------------------------------------

    def _bump(self, obj: Obj) -> Obj:
        self._rv += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self._rv)
        return obj

    def add_node(self, name: str, *, boot_id: str = "boot-1", unschedulable: bool = False) -> Obj:
        node: Obj = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "uid": f"uid-{name}", "annotations": {}, "labels": {}},
            "spec": {"unschedulable": True} if unschedulable else {},
            "status": {
                "nodeInfo": {"bootID": boot_id},
                "conditions": [
                    {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
                ],
            },
        }
        self.nodes[name] = self._bump(node)
        return node

    def add_daemonset(self, namespace: str, name: str) -> Obj:
        ds: Obj = {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": namespace},
        }
        self.daemonsets[(namespace, name)] = self._bump(ds)
        return ds

    def reboot(self, name: str, boot_id: str) -> None:
        """What a reboot looks like from the API: a new bootID on the Node's status."""
        self.nodes[name]["status"]["nodeInfo"]["bootID"] = boot_id
        self._bump(self.nodes[name])

    def fail_next(self, failure: Failure) -> None:
        """The first later request for which ``failure`` returns an error fails with it (once)."""
        self._failures.append(failure)

    def _check(self, method: str, path: str, body: Any = None) -> None:
        self.requests.append((method, path))
        for failure in self._failures:
            error = failure(method, path, body)
            if error is not None:
                self._failures.remove(failure)
                raise error

    def _node(self, name: str) -> Obj:
        node = self.nodes.get(name)
        if node is None:
            raise _status(404, f'nodes "{name}" not found')
        return node

    # -- nodes -----------------------------------------------------------------------------------------------

    def get_node(self, name: str) -> Obj:
        self._check("GET", f"/api/v1/nodes/{name}")
        return copy.deepcopy(self._node(name))

    def patch_node(self, name: str, patch: Any, *, patch_type: str = "") -> Obj:
        self._check("PATCH", f"/api/v1/nodes/{name}", patch)
        node = self._node(name)
        patched = json_patch(node, patch) if patch_type == JSON_PATCH else merge_patch(node, patch)
        self.nodes[name] = self._bump(patched)
        return copy.deepcopy(patched)

    # -- pods (an empty node drains at once) -----------------------------------------------------------------

    def list_pods(self, **_query: Any) -> Obj:
        self._check("GET", "/api/v1/pods")
        return {"items": copy.deepcopy(self.pods), "metadata": {"resourceVersion": str(self._rv)}}

    def supports_eviction(self) -> bool:
        self._check("GET", "/api/v1")
        return True

    # -- daemonsets (kured's annotation lock) ----------------------------------------------------------------

    def get_daemonset(self, namespace: str, name: str) -> Obj:
        self._check("GET", f"/apis/apps/v1/namespaces/{namespace}/daemonsets/{name}")
        ds = self.daemonsets.get((namespace, name))
        if ds is None:
            raise _status(404, f'daemonsets.apps "{name}" not found')
        return copy.deepcopy(ds)

    def replace_daemonset(self, namespace: str, name: str, obj: Obj) -> Obj:
        self._check("PUT", f"/apis/apps/v1/namespaces/{namespace}/daemonsets/{name}", obj)
        current = self.daemonsets.get((namespace, name))
        if current is None:
            raise _status(404, f'daemonsets.apps "{name}" not found')
        wanted = obj.get("metadata", {}).get("resourceVersion")
        if wanted != current["metadata"]["resourceVersion"]:
            raise _status(
                409,
                f'Operation cannot be fulfilled on daemonsets.apps "{name}": the object has been modified',
            )
        stored = self._bump(copy.deepcopy(obj))
        self.daemonsets[(namespace, name)] = stored
        return copy.deepcopy(stored)

    # -- events ----------------------------------------------------------------------------------------------

    def create_event(self, namespace: str, obj: Obj) -> Obj:
        self._check("POST", f"/api/v1/namespaces/{namespace}/events", obj)
        self.events.append(self._bump(copy.deepcopy(obj)))
        return obj

    # -- helpers for assertions -----------------------------------------------------------------------------

    def annotations(self, name: str) -> Mapping[str, str]:
        return dict(self.nodes[name]["metadata"].get("annotations") or {})

    def cordoned(self, name: str) -> bool:
        return self.nodes[name]["spec"].get("unschedulable") is True

    def event_reasons(self) -> list[str]:
        return [e["reason"] for e in self.events]


@dataclasses.dataclass
class FakeClock:
    """A wall clock that moves only when told to."""

    now: datetime.datetime

    def __call__(self) -> datetime.datetime:
        return self.now

    def advance(self, delta: datetime.timedelta) -> None:
        self.now += delta


class RecordingNotifier:
    """Records the notifications sent (``drain``, ``reboot``, ``uncordon``)."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def notify_drain(self, node: str) -> bool:
        self.sent.append("drain")
        return True

    def notify_reboot(self, node: str) -> bool:
        self.sent.append("reboot")
        return True

    def notify_uncordon(self, node: str) -> bool:
        self.sent.append("uncordon")
        return True
