"""The tests' one set of doubles: FakeKube, FakeClock, RecordingNotifier, RecordingRebooter, a sample Node.

``FakeKube`` is a :class:`pykured.kube.api.KubeApi` (mypy checks it, below), in memory: Nodes, Pods,
DaemonSets, ConfigMaps, Events, ``coordination.k8s.io/v1`` Leases and watches, with the API server's rules
that matter to the callers: every write bumps a global ``resourceVersion``; a ``PUT`` with a stale
``resourceVersion`` fails with 409 Conflict (a Lease ``PUT`` without one is unconditional, as the API server
allows); a ``POST`` of an existing name is 409 AlreadyExists; merge patches (RFC 7386) delete on ``null``;
JSON patches (RFC 6902) support ``add``/``remove``/``replace``/``test`` and answer 422 when a path is missing
or a ``test`` fails; an unknown object is 404; lists and watches take equality label selectors (``k=v``,
``k!=v``, ``k``, ``!k``, comma-separated) and ``metadata.name``/``metadata.namespace`` field selectors. A
watch yields ``ADDED``/``MODIFIED``/``DELETED`` in resourceVersion order after the version it starts from,
then waits for more; :meth:`FakeKube.compact` makes older versions answer an ``ERROR`` event with a 410 Status
(as the watch cache does), :meth:`FakeKube.bookmark` sends a ``BOOKMARK`` to open watches and
:meth:`FakeKube.end_watches` ends them (as the API server does at ``timeoutSeconds``).
:meth:`FakeKube.fail_next` injects errors. RBAC, admission, eviction, PodDisruptionBudgets, timeouts and
concurrent clients racing over the network are not modelled (an eviction is granted at once). It is evidence
only for the callers' logic: the API server's own behaviour is tested against the real one (tests/e2e/).
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from pykured.core import errors
from pykured.kube.client import JSON_PATCH, Obj
from pykured.notify.notifier import Notifier

if TYPE_CHECKING:
    from pykured.host.reboot import Rebooter
    from pykured.kube.api import KubeApi

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


def _status_object(status: int, reason: str, message: str) -> Obj:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": status,
    }


def selector_matches(selector: str | None, labels: Mapping[str, str]) -> bool:
    """An equality-based label selector (``k=v``, ``k==v``, ``k!=v``, ``k``, ``!k``; comma = and)."""
    for term in (t.strip() for t in (selector or "").split(",")):
        if not term:
            continue
        if "!=" in term:
            key, value = (x.strip() for x in term.split("!=", 1))
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = (x.strip() for x in term.replace("==", "=").split("=", 1))
            if labels.get(key) != value:
                return False
        elif term.startswith("!"):
            if term[1:].strip() in labels:
                return False
        elif term not in labels:
            return False
    return True


def _fields_match(selector: str | None, obj: Obj) -> bool:
    meta = obj.get("metadata") or {}
    for term in (t.strip() for t in (selector or "").split(",")):
        if not term:
            continue
        negate = "!=" in term
        key, value = (x.strip() for x in term.replace("!=", "=").replace("==", "=").split("=", 1))
        field = {"metadata.name": meta.get("name"), "metadata.namespace": meta.get("namespace")}.get(key)
        if key not in ("metadata.name", "metadata.namespace"):
            raise _status(400, f'"{key}" is not a known field selector')
        if (field == value) == negate:
            return False
    return True


_COLLECTIONS = {
    ("api", "v1", "nodes"): "nodes",
    ("apis", "coordination.k8s.io/v1", "leases"): "leases",
    ("apis", "apps/v1", "daemonsets"): "daemonsets",
    ("api", "v1", "configmaps"): "configmaps",
}


def parse_collection(path: str) -> tuple[str, str | None, str | None]:
    """``(resource, namespace, name)`` of an API path the fake serves; 404 for any other."""
    parts = path.strip("/").split("/")
    if parts[:2] == ["api", "v1"]:
        group, rest = ("api", "v1"), parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, rest = ("apis", f"{parts[1]}/{parts[2]}"), parts[3:]
    else:
        raise _status(404, f"the server could not find the requested resource ({path})")
    namespace = None
    if len(rest) >= 2 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    resource = _COLLECTIONS.get((*group, rest[0] if rest else ""))
    if resource is None or len(rest) > 2:
        raise _status(404, f"the server could not find the requested resource ({path})")
    return resource, namespace, rest[1] if len(rest) == 2 else None


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
    """An in-memory API server for the calls the reboot cycle and the locks make (see the module docstring).

    Safe to use from several threads (a lock's watch runs in its own).
    """

    def __init__(self) -> None:
        self.nodes: dict[str, Obj] = {}
        self.pods: list[Obj] = []
        self.daemonsets: dict[tuple[str, str], Obj] = {}
        self.leases: dict[tuple[str, str], Obj] = {}
        self.configmaps: dict[tuple[str, str], Obj] = {}
        self.events: list[Obj] = []
        self.requests: list[tuple[str, str]] = []
        self._rv = 0
        self._failures: list[Failure] = []
        self._history: list[tuple[int, str, str | None, str, Obj]] = []
        """Every write of a watchable object: (resourceVersion, resource, namespace, event type, object)."""
        self._compacted = 0
        """Watches from a resourceVersion below this one are too old (410 Gone)."""
        self._watch_epoch = 0
        """Bumped by :meth:`end_watches`: open watches end."""
        self._bookmarks = 0
        self.open_watches = 0
        self._cond = threading.Condition(threading.RLock())
        self._node_writes: list[Callable[[str, Obj], None]] = []

    # -- setting up ------------------------------------------------------------------------------------------

    def _bump(self, obj: Obj) -> Obj:
        self._rv += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self._rv)
        return obj

    def _record(self, resource: str, namespace: str | None, kind: str, obj: Obj) -> Obj:
        """Store a write: a new resourceVersion (a DELETED event carries a new one too), one history entry,
        open watches woken."""
        with self._cond:
            self._bump(obj)
            self._history.append((self._rv, resource, namespace, kind, copy.deepcopy(obj)))
            self._cond.notify_all()
        return obj

    @property
    def resource_version(self) -> str:
        """The newest resourceVersion (what a LIST answers)."""
        return str(self._rv)

    def add_node(
        self,
        name: str,
        *,
        boot_id: str = "boot-1",
        unschedulable: bool = False,
        labels: Mapping[str, str] | None = None,
    ) -> Obj:
        node: Obj = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "uid": f"uid-{name}",
                "annotations": {},
                "labels": dict(labels or {}),
            },
            "spec": {"unschedulable": True} if unschedulable else {},
            "status": {
                "nodeInfo": {"bootID": boot_id},
                "conditions": [
                    {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
                ],
            },
        }
        with self._cond:
            self.nodes[name] = self._record("nodes", None, "ADDED", node)
        return node

    def delete_node(self, name: str) -> None:
        with self._cond:
            node = self._node(name)
            del self.nodes[name]
            self._record("nodes", None, "DELETED", copy.deepcopy(node))

    def add_daemonset(self, namespace: str, name: str) -> Obj:
        ds: Obj = {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": namespace},
        }
        with self._cond:
            self.daemonsets[(namespace, name)] = self._record("daemonsets", namespace, "ADDED", ds)
        return ds

    def reboot(self, name: str, boot_id: str) -> None:
        """What a reboot looks like from the API: a new bootID on the Node's status."""
        with self._cond:
            self.nodes[name]["status"]["nodeInfo"]["bootID"] = boot_id
            self._record("nodes", None, "MODIFIED", self.nodes[name])

    def fail_next(self, failure: Failure) -> None:
        """The first later request for which ``failure`` returns an error fails with it (once)."""
        with self._cond:
            self._failures.append(failure)

    def _check(self, method: str, path: str, body: Any = None) -> None:
        with self._cond:
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

    def calls(self, method: str, fragment: str = "") -> int:
        """How many requests ``method`` (``GET``, ``PUT``, ``POST``, ``PATCH``, ``WATCH``) sent to a path
        containing ``fragment``."""
        with self._cond:
            return sum(1 for m, p in self.requests if m == method and fragment in p)

    # -- nodes -----------------------------------------------------------------------------------------------

    def get_node(self, name: str) -> Obj:
        self._check("GET", f"/api/v1/nodes/{name}")
        with self._cond:
            return copy.deepcopy(self._node(name))

    def list_nodes(self, *, label_selector: str | None = None) -> Obj:
        self._check("GET", "/api/v1/nodes")
        return self._list("nodes", None, label_selector=label_selector)

    def patch_node(self, name: str, patch: Any, *, patch_type: str = "") -> Obj:
        self._check("PATCH", f"/api/v1/nodes/{name}", patch)
        with self._cond:
            node = self._node(name)
            patched = json_patch(node, patch) if patch_type == JSON_PATCH else merge_patch(node, patch)
            self.nodes[name] = self._record("nodes", None, "MODIFIED", patched)
            answer = copy.deepcopy(patched)
        for written in self._node_writes:
            written(name, copy.deepcopy(answer))
        return answer

    def on_node_written(self, callback: Callable[[str, Obj], None]) -> None:
        """Call ``callback(name, node)`` with the answer to every PATCH of a Node (as the real client)."""
        self._node_writes.append(callback)

    def watch_nodes(
        self,
        *,
        resource_version: str,
        field_selector: str | None = None,
        timeout_seconds: int = 60,
        quiet_seconds: float | None = None,
    ) -> Iterator[Obj]:
        query = {"resourceVersion": resource_version, "fieldSelector": field_selector}
        return self.watch("/api/v1/nodes", query=query, timeout_seconds=timeout_seconds)

    # -- pods (an empty node drains at once) -----------------------------------------------------------------

    def list_pods(
        self,
        *,
        namespace: str | None = None,
        field_selector: str | None = None,
        label_selector: str | None = None,
        limit: int | None = None,
    ) -> Obj:
        """Every pod of :attr:`pods` (the selectors are not applied: the tests' nodes run none)."""
        self._check("GET", "/api/v1/pods")
        with self._cond:
            return {"items": copy.deepcopy(self.pods), "metadata": {"resourceVersion": str(self._rv)}}

    def _pod_index(self, namespace: str, name: str) -> int:
        for index, pod in enumerate(self.pods):
            meta = pod.get("metadata") or {}
            if (meta.get("namespace"), meta.get("name")) == (namespace, name):
                return index
        raise _status(404, f'pods "{name}" not found')

    def get_pod(self, namespace: str, name: str) -> Obj:
        self._check("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
        with self._cond:
            return copy.deepcopy(self.pods[self._pod_index(namespace, name)])

    def delete_pod(
        self, namespace: str, name: str, *, grace_period_seconds: int | None = None, uid: str | None = None
    ) -> Obj:
        """Gone at once (no grace period is waited for); a ``uid`` precondition that fails is 409."""
        self._check("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}")
        with self._cond:
            index = self._pod_index(namespace, name)
            if uid is not None and (self.pods[index].get("metadata") or {}).get("uid") != uid:
                raise _status(409, f"Precondition failed: UID in precondition: {uid}")
            return self.pods.pop(index)

    def evict_pod(self, namespace: str, name: str, *, grace_period_seconds: int | None = None) -> Obj:
        """Granted at once: no PodDisruptionBudget is modelled (their refusals: tests/e2e/)."""
        self._check("POST", f"/api/v1/namespaces/{namespace}/pods/{name}/eviction")
        with self._cond:
            del self.pods[self._pod_index(namespace, name)]
        return {"kind": "Status", "apiVersion": "v1", "status": "Success"}

    def supports_eviction(self) -> bool:
        self._check("GET", "/api/v1")
        return True

    # -- daemonsets (kured's annotation lock) ----------------------------------------------------------------

    def get_daemonset(self, namespace: str, name: str) -> Obj:
        self._check("GET", f"/apis/apps/v1/namespaces/{namespace}/daemonsets/{name}")
        with self._cond:
            ds = self.daemonsets.get((namespace, name))
            if ds is None:
                raise _status(404, f'daemonsets.apps "{name}" not found')
            return copy.deepcopy(ds)

    def replace_daemonset(self, namespace: str, name: str, obj: Obj) -> Obj:
        self._check("PUT", f"/apis/apps/v1/namespaces/{namespace}/daemonsets/{name}", obj)
        with self._cond:
            current = self.daemonsets.get((namespace, name))
            if current is None:
                raise _status(404, f'daemonsets.apps "{name}" not found')
            wanted = obj.get("metadata", {}).get("resourceVersion")
            if wanted != current["metadata"]["resourceVersion"]:
                raise _status(
                    409,
                    f'Operation cannot be fulfilled on daemonsets.apps "{name}": '
                    "the object has been modified",
                )
            stored = self._record("daemonsets", namespace, "MODIFIED", copy.deepcopy(obj))
            self.daemonsets[(namespace, name)] = stored
            return copy.deepcopy(stored)

    def list_daemonsets(self, namespace: str, *, field_selector: str | None = None) -> Obj:
        self._check("GET", f"/apis/apps/v1/namespaces/{namespace}/daemonsets")
        return self._list("daemonsets", namespace, field_selector=field_selector)

    def watch_daemonsets(
        self,
        namespace: str,
        *,
        resource_version: str,
        field_selector: str | None = None,
        timeout_seconds: int = 60,
        quiet_seconds: float | None = None,
    ) -> Iterator[Obj]:
        query = {"resourceVersion": resource_version, "fieldSelector": field_selector}
        path = f"/apis/apps/v1/namespaces/{namespace}/daemonsets"
        return self.watch(path, query=query, timeout_seconds=timeout_seconds)

    # -- leases (the Lease lock, the roll queue) -------------------------------------------------------------

    @staticmethod
    def _lease_path(namespace: str, name: str = "") -> str:
        base = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        return f"{base}/{name}" if name else base

    def get_lease(self, namespace: str, name: str) -> Obj:
        self._check("GET", self._lease_path(namespace, name))
        with self._cond:
            lease = self.leases.get((namespace, name))
            if lease is None:
                raise _status(404, f'leases.coordination.k8s.io "{name}" not found')
            return copy.deepcopy(lease)

    def list_leases(self, namespace: str, *, label_selector: str | None = None) -> Obj:
        self._check("GET", self._lease_path(namespace))
        return self._list("leases", namespace, label_selector=label_selector)

    def create_lease(self, namespace: str, obj: Obj) -> Obj:
        self._check("POST", self._lease_path(namespace), obj)
        name = obj.get("metadata", {}).get("name") or ""
        with self._cond:
            if (namespace, name) in self.leases:
                raise _status(409, f'leases.coordination.k8s.io "{name}" already exists')
            stored = copy.deepcopy(obj)
            meta = stored.setdefault("metadata", {})
            meta.update(namespace=namespace, uid=f"uid-lease-{namespace}-{name}-{self._rv + 1}")
            meta.setdefault("creationTimestamp", "2026-01-01T00:00:00Z")
            self.leases[(namespace, name)] = self._record("leases", namespace, "ADDED", stored)
            return copy.deepcopy(stored)

    def replace_lease(self, namespace: str, name: str, obj: Obj) -> Obj:
        self._check("PUT", self._lease_path(namespace, name), obj)
        with self._cond:
            current = self.leases.get((namespace, name))
            if current is None:
                raise _status(404, f'leases.coordination.k8s.io "{name}" not found')
            wanted = obj.get("metadata", {}).get("resourceVersion")
            if wanted and wanted != current["metadata"]["resourceVersion"]:
                raise _status(
                    409,
                    f'Operation cannot be fulfilled on leases.coordination.k8s.io "{name}": the object has '
                    "been modified; please apply your changes to the latest version and try again",
                )
            stored = copy.deepcopy(obj)
            meta = stored.setdefault("metadata", {})
            for key in ("namespace", "uid", "creationTimestamp"):
                meta[key] = current["metadata"].get(key)
            self.leases[(namespace, name)] = self._record("leases", namespace, "MODIFIED", stored)
            return copy.deepcopy(stored)

    def delete_lease(self, namespace: str, name: str) -> None:
        self._check("DELETE", self._lease_path(namespace, name))
        with self._cond:
            lease = self.leases.pop((namespace, name), None)
            if lease is None:
                raise _status(404, f'leases.coordination.k8s.io "{name}" not found')
            self._record("leases", namespace, "DELETED", copy.deepcopy(lease))

    # -- lists and watches -----------------------------------------------------------------------------------

    def _store(self, resource: str) -> dict[Any, Obj]:
        stores: dict[str, dict[Any, Obj]] = {
            "nodes": self.nodes,
            "leases": self.leases,
            "daemonsets": self.daemonsets,
            "configmaps": self.configmaps,
        }
        return stores[resource]

    def _list(
        self,
        resource: str,
        namespace: str | None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> Obj:
        with self._cond:
            items = [
                copy.deepcopy(obj)
                for obj in self._store(resource).values()
                if self._matches(obj, namespace, label_selector, field_selector)
            ]
            items.sort(key=lambda o: (o["metadata"].get("namespace") or "", o["metadata"]["name"]))
            return {"items": items, "metadata": {"resourceVersion": str(self._rv)}}

    @staticmethod
    def _matches(obj: Obj, namespace: str | None, labels: str | None, fields: str | None) -> bool:
        meta = obj.get("metadata") or {}
        if namespace is not None and meta.get("namespace") != namespace:
            return False
        return selector_matches(labels, meta.get("labels") or {}) and _fields_match(fields, obj)

    def get(self, path: str, *, query: Mapping[str, Any] | None = None) -> Obj:
        """GET an object or a list of Nodes, Leases or DaemonSets (selectors in ``query``)."""
        self._check("GET", path)
        resource, namespace, name = parse_collection(path)
        if name is None:
            query = query or {}
            return self._list(
                resource,
                namespace,
                label_selector=query.get("labelSelector"),
                field_selector=query.get("fieldSelector"),
            )
        with self._cond:
            key: Any = name if resource == "nodes" else (namespace, name)
            obj = self._store(resource).get(key)
            if obj is None:
                raise _status(404, f'{resource} "{name}" not found')
            return copy.deepcopy(obj)

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str | None = None,
        timeout: float | None = None,
    ) -> Obj:
        """Any call on the objects the fake serves (ConfigMaps: the policy; others have their methods):
        ``GET``, ``POST`` to a collection (409 AlreadyExists), ``PUT`` (409 on a stale resourceVersion,
        unconditional without one), ``PATCH`` (merge, or JSON patch with ``JSON_PATCH``; a merge patch that
        names a stale resourceVersion is a 409 too), ``DELETE``."""
        if method == "GET":
            return self.get(path, query=query)
        self._check(method, path, body)
        resource, namespace, name = parse_collection(path)
        store = self._store(resource)
        with self._cond:
            if method == "POST" and name is None:
                name = (body.get("metadata") or {}).get("name") or ""
                key: Any = name if resource == "nodes" else (namespace, name)
                if key in store:
                    raise _status(409, f'{resource} "{name}" already exists')
                stored = copy.deepcopy(body)
                if namespace is not None:
                    stored["metadata"]["namespace"] = namespace
                store[key] = self._record(resource, namespace, "ADDED", stored)
                return copy.deepcopy(stored)
            key = name if resource == "nodes" else (namespace, name)
            current = store.get(key)
            if name is None or method not in ("PUT", "PATCH", "DELETE"):
                raise _status(405, f"{method} {path} is not served by the fake")
            if current is None:
                raise _status(404, f'{resource} "{name}" not found')
            if method == "DELETE":
                del store[key]
                self._record(resource, namespace, "DELETED", copy.deepcopy(current))
                return {}
            wanted = (body.get("metadata") or {}).get("resourceVersion") if isinstance(body, dict) else None
            if wanted and wanted != current["metadata"]["resourceVersion"]:  # a PUT's, or a merge patch's
                raise _status(
                    409,
                    f'Operation cannot be fulfilled on {resource} "{name}": the object has been modified',
                )
            if method == "PUT":
                updated = copy.deepcopy(body)
            else:
                updated = (
                    json_patch(current, body) if content_type == JSON_PATCH else merge_patch(current, body)
                )
            store[key] = self._record(resource, namespace, "MODIFIED", updated)
            return copy.deepcopy(updated)

    def create(self, path: str, obj: Obj) -> Obj:
        """POST to a collection path (as :meth:`request`)."""
        return self.request("POST", path, body=obj)

    def compact(self) -> None:
        """Forget the history up to now, as etcd's compaction does: a watch from an older resourceVersion
        answers 410 Gone."""
        with self._cond:
            self._compacted = self._rv
            self._history.clear()

    def end_watches(self) -> None:
        """End every open watch (as the API server does when a watch's ``timeoutSeconds`` pass)."""
        with self._cond:
            self._watch_epoch += 1
            self._cond.notify_all()

    def bookmark(self) -> None:
        """Send a ``BOOKMARK`` at the newest resourceVersion to every open watch."""
        with self._cond:
            self._bookmarks += 1
            self._cond.notify_all()

    def wait_for_watches(self, count: int, timeout: float = 10.0) -> bool:
        """Until ``count`` watches are open (a test's way to know a watcher is listening)."""
        with self._cond:
            return self._cond.wait_for(lambda: self.open_watches >= count, timeout=timeout)

    def watch_leases(
        self,
        namespace: str,
        *,
        resource_version: str,
        label_selector: str | None = None,
        timeout_seconds: int = 60,
        quiet_seconds: float | None = None,
    ) -> Iterator[Obj]:
        query = {"resourceVersion": resource_version, "labelSelector": label_selector}
        return self.watch(self._lease_path(namespace), query=query, timeout_seconds=timeout_seconds)

    def watch(
        self,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        timeout_seconds: int = 60,
        quiet_seconds: float | None = None,
    ) -> Iterator[Obj]:
        """The events after ``query["resourceVersion"]`` (every later one for ``"0"`` or none: a real server
        would start with ``ADDED`` for what exists), then each new one as it is written, until
        :meth:`end_watches` (``timeout_seconds`` is not counted: a test ends the watch)."""
        self._check("WATCH", path)
        resource, namespace, _ = parse_collection(path)
        query = dict(query or {})
        labels, fields = query.get("labelSelector"), query.get("fieldSelector")
        start = query.get("resourceVersion") or "0"
        if not str(start).isdigit():
            raise _status(400, f"invalid resourceVersion {start!r}")
        return self._events(resource, namespace, int(start), labels, fields)

    def _events(
        self, resource: str, namespace: str | None, since: int, labels: str | None, fields: str | None
    ) -> Iterator[Obj]:
        with self._cond:
            epoch, bookmarks = self._watch_epoch, self._bookmarks
            if since and since < self._compacted:
                message = f"too old resource version: {since} ({self._compacted})"
                yield {"type": "ERROR", "object": _status_object(410, "Expired", message)}
                return
            self.open_watches += 1
            self._cond.notify_all()
        try:
            while True:
                with self._cond:
                    pending = [
                        (kind, obj)
                        for rv, res, ns, kind, obj in self._history
                        if rv > since and res == resource and (namespace is None or ns == namespace)
                    ]
                    if pending:
                        since = max(rv for rv, *_ in self._history)
                    elif self._bookmarks != bookmarks:
                        bookmarks, since = self._bookmarks, self._rv
                        marker = {"metadata": {"resourceVersion": str(self._rv)}}
                        pending = [("BOOKMARK", {"kind": _KINDS[resource], **marker})]
                    elif self._watch_epoch != epoch:
                        return
                    else:
                        self._cond.wait()
                        continue
                for kind, obj in pending:
                    if kind == "BOOKMARK" or self._matches(obj, namespace, labels, fields):
                        yield {"type": kind, "object": copy.deepcopy(obj)}
        finally:
            with self._cond:
                self.open_watches -= 1

    # -- events ----------------------------------------------------------------------------------------------

    def create_event(self, namespace: str, obj: Obj) -> Obj:
        self._check("POST", f"/api/v1/namespaces/{namespace}/events", obj)
        with self._cond:
            self.events.append(self._bump(copy.deepcopy(obj)))
        return obj

    # -- helpers for assertions -----------------------------------------------------------------------------

    def annotations(self, name: str) -> Mapping[str, str]:
        return dict(self.nodes[name]["metadata"].get("annotations") or {})

    def cordoned(self, name: str) -> bool:
        return self.nodes[name]["spec"].get("unschedulable") is True

    def event_reasons(self) -> list[str]:
        return [e["reason"] for e in self.events]


_KINDS = {"nodes": "Node", "leases": "Lease", "daemonsets": "DaemonSet", "configmaps": "ConfigMap"}


@dataclasses.dataclass
class FakeClock:
    """A wall clock that moves only when told to (``advance``, or a ``sleep`` of the code under test)."""

    now: datetime.datetime

    def __call__(self) -> datetime.datetime:
        return self.now

    def advance(self, delta: datetime.timedelta) -> None:
        self.now += delta

    def sleep(self, seconds: float) -> None:
        """An injected ``time.sleep``: the clock moves on at once."""
        self.advance(datetime.timedelta(seconds=max(seconds, 0.0)))

    def monotonic(self) -> float:
        """An injected ``time.monotonic`` (seconds since the epoch of ``now``)."""
        return self.now.timestamp()

    def time_ns(self) -> int:
        """An injected ``time.time_ns``."""
        return int(self.now.timestamp()) * 1_000_000_000 + self.now.microsecond * 1000


class RecordingNotifier(Notifier):
    """kured's notifications, recorded instead of sent: ``sent`` holds ``(kind, node)`` in order (``kind``:
    ``drain``, ``reboot``, ``uncordon``); other messages (:meth:`Notifier.send`) go nowhere (no URL)."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[tuple[str, str]] = []

    @property
    def kinds(self) -> list[str]:
        """The kinds sent, in order."""
        return [kind for kind, _ in self.sent]

    def notify_drain(self, node: str) -> bool:
        self.sent.append(("drain", node))
        return True

    def notify_reboot(self, node: str) -> bool:
        self.sent.append(("reboot", node))
        return True

    def notify_uncordon(self, node: str) -> bool:
        self.sent.append(("uncordon", node))
        return True


class RecordingRebooter:
    """The reboot command, counted instead of run (nothing reboots this machine): ``calls`` reboots,
    ``withdrawn`` withdrawals. ``fail``: every reboot fails as a failing command does; ``hands_off``: a
    method that only allows someone else to reboot (Zincati's marker)."""

    def __init__(self, *, hands_off: bool = False, fail: bool = False) -> None:
        self.hands_off = hands_off
        self.fail = fail
        self.calls = 0
        self.withdrawn = 0

    def reboot(self) -> None:
        self.calls += 1
        if self.fail:
            raise errors.RebootError("reboot command failed")

    def withdraw(self) -> None:
        self.withdrawn += 1


if TYPE_CHECKING:  # mypy checks each double against the protocol it stands in for

    def _fake_kube_is_a_kube_api(kube: FakeKube) -> KubeApi:
        return kube

    def _fake_clock_is_a_clock(clock: FakeClock) -> Callable[[], datetime.datetime]:
        return clock

    def _recording_rebooter_is_a_rebooter(rebooter: RecordingRebooter) -> Rebooter:
        return rebooter
