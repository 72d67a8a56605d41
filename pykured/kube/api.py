"""The Kubernetes API as pykured uses it: :class:`KubeApi`, the calls its parts make on their client.

A part that talks to the API server takes a ``KubeApi``, never the concrete client: the wiring and the command
lines build :class:`pykured.kube.client.Kube` (the one that speaks HTTP) and hand it over; the tests hand over
their in-memory API server instead. Both are checked against this protocol by mypy, as kured's Go code checks
an implementation with ``var _ Interface = (*Impl)(nil)``.

The calls answer decoded JSON objects (``Obj``) and raise :mod:`pykured.core.errors` types carrying the HTTP
status (404 :class:`~pykured.core.errors.NotFoundError`, 409 :class:`~pykured.core.errors.ConflictError`, …).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from pykured.kube.client import STRATEGIC_MERGE_PATCH, Obj

if TYPE_CHECKING:
    from pykured.kube.client import Kube


class KubeApi(Protocol):
    """The API calls pykured's parts make (every method of :class:`pykured.kube.client.Kube` but the ones
    that build, close or name the connection)."""

    # -- any path ------------------------------------------------------------------------------------------

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
        """One API call: the decoded answer."""
        ...

    def watch(
        self,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        timeout_seconds: int = 60,
        quiet_seconds: float | None = None,
    ) -> Iterator[Obj]:
        """The watch events (``{"type", "object"}``) of a collection until the server ends the watch."""
        ...

    def get(self, path: str, *, query: Mapping[str, Any] | None = None) -> Obj:
        """GET any path."""
        ...

    def create(self, path: str, obj: Obj) -> Obj:
        """POST an object to a collection path."""
        ...

    # -- nodes ---------------------------------------------------------------------------------------------

    def get_node(self, name: str) -> Obj: ...

    def list_nodes(self, *, label_selector: str | None = None) -> Obj: ...

    def watch_nodes(
        self,
        *,
        resource_version: str,
        field_selector: str | None = None,
        timeout_seconds: int = 60,
        quiet_seconds: float | None = None,
    ) -> Iterator[Obj]: ...

    def patch_node(self, name: str, patch: Any, *, patch_type: str = STRATEGIC_MERGE_PATCH) -> Obj:
        """PATCH a Node (strategic merge by default; a list body needs ``JSON_PATCH``)."""
        ...

    def on_node_written(self, callback: Callable[[str, Obj], None]) -> None:
        """Call ``callback(name, node)`` with the answer to every PATCH of a Node made through this client."""
        ...

    # -- pods ----------------------------------------------------------------------------------------------

    def list_pods(
        self,
        *,
        namespace: str | None = None,
        field_selector: str | None = None,
        label_selector: str | None = None,
        limit: int | None = None,
    ) -> Obj: ...

    def get_pod(self, namespace: str, name: str) -> Obj: ...

    def delete_pod(
        self, namespace: str, name: str, *, grace_period_seconds: int | None = None, uid: str | None = None
    ) -> Obj: ...

    def evict_pod(self, namespace: str, name: str, *, grace_period_seconds: int | None = None) -> Obj:
        """POST an Eviction; a PodDisruptionBudget's refusal raises ``TooManyRequestsError``."""
        ...

    def supports_eviction(self) -> bool: ...

    # -- daemonsets ----------------------------------------------------------------------------------------

    def get_daemonset(self, namespace: str, name: str) -> Obj: ...

    def replace_daemonset(self, namespace: str, name: str, obj: Obj) -> Obj: ...

    def list_daemonsets(self, namespace: str, *, field_selector: str | None = None) -> Obj: ...

    def watch_daemonsets(
        self,
        namespace: str,
        *,
        resource_version: str,
        field_selector: str | None = None,
        timeout_seconds: int = 60,
        quiet_seconds: float | None = None,
    ) -> Iterator[Obj]: ...

    # -- leases --------------------------------------------------------------------------------------------

    def get_lease(self, namespace: str, name: str) -> Obj: ...

    def list_leases(self, namespace: str, *, label_selector: str | None = None) -> Obj: ...

    def watch_leases(
        self,
        namespace: str,
        *,
        resource_version: str,
        label_selector: str | None = None,
        timeout_seconds: int = 60,
        quiet_seconds: float | None = None,
    ) -> Iterator[Obj]: ...

    def create_lease(self, namespace: str, obj: Obj) -> Obj: ...

    def replace_lease(self, namespace: str, name: str, obj: Obj) -> Obj: ...

    # -- events --------------------------------------------------------------------------------------------

    def create_event(self, namespace: str, obj: Obj) -> Obj: ...


if TYPE_CHECKING:

    def _kube_is_a_kube_api(kube: Kube) -> KubeApi:
        return kube  # mypy: the HTTP client has every call of the protocol
