"""The Kubernetes API adapter: the only module that imports the ``kubernetes`` client.

pykured speaks the REST API with plain JSON over a urllib3 connection pool (:class:`_Http`): TLS, the
bearer token (re-read from the service-account directory every minute, as client-go does) and request
timeouts. It never touches the generated ``CoreV1Api`` classes, and in a pod it never imports the
``kubernetes`` package at all: that import alone costs ~14 MiB RSS and 0.2–0.4 s of CPU for models,
pydantic, YAML, OAuth and websocket code the agent does not use. The ``kubernetes`` client's loader reads
kubeconfig files (``--kubeconfig``, tests), which can carry every kind of credential. Objects come back as
plain dicts (``Obj``); errors come back as :mod:`pykured.core.errors` types with the HTTP status.

Every call carries a request timeout, so a half-open connection never hangs the daemon.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlencode

from pykured.core import errors

logger = logging.getLogger(__name__)

Obj = dict[str, Any]
"""A Kubernetes object or list, decoded from JSON."""

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
DEFAULT_TIMEOUT = 30.0
POOL_SIZE = 40
"""Connections kept per host: parallel evictions (32 at a time) plus the lock watch."""

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"

_ERRORS: dict[int, type[errors.KubeError]] = {
    403: errors.ForbiddenError,
    404: errors.NotFoundError,
    409: errors.ConflictError,
    429: errors.TooManyRequestsError,
}


def _q(value: str) -> str:
    return quote(value, safe="")


def error_from_status(status: int, body: str | bytes | None, reason: str = "") -> errors.KubeError:
    """Build the pykured error for an HTTP error answer of the API server."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else (body or "")
    message = reason or "request failed"
    status_reason = ""
    causes: tuple[tuple[str, str], ...] = ()
    try:
        decoded = json.loads(text) if text else {}
        if isinstance(decoded, dict):
            message = str(decoded.get("message") or message)
            status_reason = str(decoded.get("reason") or "")
            causes = _causes(decoded.get("details"))
    except (ValueError, RecursionError):
        if text:
            message = text[:300]
    cls = _ERRORS.get(status, errors.KubeError)
    return cls(f"{message} (HTTP {status})", status=status, reason=status_reason, causes=causes)


_MAX_CAUSES = 4
_MAX_CAUSE = 300


def _causes(details: Any) -> tuple[tuple[str, str], ...]:
    """The first few ``(type, message)`` of a Status' ``details.causes``, each cut (a hostile body stays
    bounded)."""
    found = details.get("causes") if isinstance(details, dict) else None
    if not isinstance(found, list):
        return ()
    return tuple(
        (str(c.get("type") or "")[:_MAX_CAUSE], str(c.get("message") or "")[:_MAX_CAUSE])
        for c in found[:_MAX_CAUSES]
        if isinstance(c, dict)
    )


def _check_in_cluster(environ: Mapping[str, str], token: str) -> None:
    """client-go ``rest.InClusterConfig``'s checks, with its error texts."""
    if not environ.get("KUBERNETES_SERVICE_HOST") or not environ.get("KUBERNETES_SERVICE_PORT"):
        raise errors.KubeError(
            "unable to load in-cluster configuration, KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT "
            "must be defined"
        )
    try:
        with open(token, "rb"):
            pass
    except OSError as exc:
        text = exc.strerror or str(exc)
        raise errors.KubeError(f"open {token}: {text[:1].lower()}{text[1:]}") from exc


USER_AGENT = "OpenAPI-Generator/37.0.2/python"
"""What the API server has always seen from pykured (the kubernetes client's default User-Agent)."""
TOKEN_REFRESH = 60.0
"""Re-read the service-account token after this long (kubelet rotates projected tokens; client-go: 1 min)."""


class _Http:
    """The HTTP side of the API: a urllib3 pool, TLS settings and the bearer token.

    The in-cluster path needs nothing else, so a pod never imports the ``kubernetes`` package (~14 MiB and
    0.2–0.4 s of start-up for generated API classes, pydantic, YAML, OAuth, websockets the agent never uses);
    kubeconfig files are still read by the ``kubernetes`` client's loader, which handles every auth form.
    """

    def __init__(
        self,
        host: str,
        *,
        ca_file: str | None = None,
        cert_file: str | None = None,
        key_file: str | None = None,
        verify: bool = True,
        assert_hostname: str | None = None,
        token: Callable[[], str | None] = lambda: None,
    ) -> None:
        import ssl

        import urllib3

        self.host = host.rstrip("/")
        self._token = token
        pool: dict[str, Any] = {
            "cert_reqs": ssl.CERT_REQUIRED if verify else ssl.CERT_NONE,
            "ca_certs": ca_file,
            "cert_file": cert_file,
            "key_file": key_file,
            "maxsize": POOL_SIZE,
        }
        if assert_hostname is not None:
            pool["assert_hostname"] = assert_hostname
        self.pool = urllib3.PoolManager(**pool)

    @classmethod
    def from_configuration(cls, configuration: Any) -> _Http:
        """From a ``kubernetes.client.Configuration`` (kubeconfig loader, tests' dead endpoints)."""

        def token() -> str | None:
            value = configuration.get_api_key_with_prefix("BearerToken", alias="authorization")
            return str(value) if value else None

        return cls(
            str(configuration.host),
            ca_file=configuration.ssl_ca_cert,
            cert_file=configuration.cert_file,
            key_file=configuration.key_file,
            verify=bool(configuration.verify_ssl),
            assert_hostname=configuration.assert_hostname,
            token=token,
        )

    def close(self) -> None:
        self.pool.clear()

    def send(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, Any]],
        headers: dict[str, str],
        body: bytes | None,
        timeout: float | tuple[float, float],
        retry: bool = True,
    ) -> Any:
        """One HTTP request; ``retry=False``: no retry of a failed connection by urllib3 (its caller retries
        on its own terms, and urllib3 would log a warning for each attempt)."""
        import urllib3

        url = self.host + path
        if query:
            url += "?" + urlencode([(k, _query_value(v)) for k, v in query])
        headers = {"User-Agent": USER_AGENT, **headers}
        token = self._token()
        if token:
            headers["Authorization"] = token
        limit = (
            urllib3.Timeout(connect=timeout[0], read=timeout[1])
            if isinstance(timeout, tuple)
            else urllib3.Timeout(total=timeout)
        )
        return self.pool.request(
            method,
            url,
            body=body,
            headers=headers,
            timeout=limit,
            preload_content=False,
            retries=None if retry else False,  # None: the pool's own retries
        )


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


class _TokenFile:
    """The service-account token, re-read every :data:`TOKEN_REFRESH` seconds."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._value = ""
        self._read_at = float("-inf")
        self._lock = threading.Lock()
        self()

    def __call__(self) -> str:
        with self._lock:
            if time.monotonic() - self._read_at >= TOKEN_REFRESH:
                with open(self.path, encoding="utf-8") as handle:
                    content = handle.read()
                if not content:
                    raise errors.KubeError("Token file exists but empty.")
                self._value = "bearer " + content
                self._read_at = time.monotonic()
            return self._value


def _join_host_port(host: str, port: str) -> str:
    return f"[{host}]:{port}" if ":" in host or "%" in host else f"{host}:{port}"


class Kube:
    """A thin, typed JSON client for the handful of endpoints pykured uses."""

    def __init__(self, api_client: Any, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        """``api_client``: an :class:`_Http`, or a ``kubernetes.client.ApiClient`` (its configuration)."""
        self._http = (
            api_client
            if isinstance(api_client, _Http)
            else _Http.from_configuration(api_client.configuration)
        )
        self._timeout = timeout
        self._local = threading.local()
        self._node_writes: list[Callable[[str, Obj], None]] = []

    # -- construction -------------------------------------------------------------------------------------

    @classmethod
    def from_kubeconfig(
        cls, path: str, *, context: str | None = None, timeout: float = DEFAULT_TIMEOUT
    ) -> Kube:
        """A client for the cluster of a kubeconfig file."""
        from kubernetes import client, config

        configuration = client.Configuration()
        try:
            config.load_kube_config(config_file=path, context=context, client_configuration=configuration)
        except (config.ConfigException, OSError, ValueError) as exc:
            raise errors.KubeError(f"kubeconfig {path}: {exc}") from exc
        return cls(_Http.from_configuration(configuration), timeout=timeout)

    @classmethod
    def in_cluster(
        cls,
        *,
        token_dir: str = SERVICE_ACCOUNT_DIR,
        host: str | None = None,
        port: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> Kube:
        """A client from the pod's service account (``KUBERNETES_SERVICE_HOST``/``PORT``, token, ca.crt)."""
        environ = dict(os.environ)
        if host is not None:
            environ["KUBERNETES_SERVICE_HOST"] = host
        if port is not None:
            environ["KUBERNETES_SERVICE_PORT"] = port
        token = os.path.join(token_dir, "token")
        _check_in_cluster(environ, token)
        ca_file = os.path.join(token_dir, "ca.crt")
        if not os.path.isfile(ca_file):
            raise errors.KubeError("Service certification file does not exist.")
        if os.path.getsize(ca_file) == 0:
            raise errors.KubeError("Cert file exists but empty.")
        address = _join_host_port(environ["KUBERNETES_SERVICE_HOST"], environ["KUBERNETES_SERVICE_PORT"])
        return cls(_Http(f"https://{address}", ca_file=ca_file, token=_TokenFile(token)), timeout=timeout)

    @classmethod
    def auto(
        cls, *, kubeconfig: str | None = None, context: str | None = None, timeout: float = DEFAULT_TIMEOUT
    ) -> Kube:
        """The kubeconfig given or ``$KUBECONFIG`` (at ``context``, else its current context), else in-cluster
        when running in a pod (as kured)."""
        path = kubeconfig or os.environ.get("KUBECONFIG")
        if path:
            return cls.from_kubeconfig(path, context=context or None, timeout=timeout)
        if context:
            raise errors.KubeError(f"--context {context}: no kubeconfig (--kubeconfig or $KUBECONFIG)")
        try:
            return cls.in_cluster(timeout=timeout)
        except Exception as exc:
            raise errors.KubeError(f"no in-cluster configuration and no kubeconfig: {exc}") from exc

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    @property
    def server(self) -> str:
        """The API server's base URL."""
        return self._http.host

    # -- the transport -------------------------------------------------------------------------------------

    def _send(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None,
        body: Any,
        content_type: str | None,
        timeout: float | tuple[float, float] | None,
        retry: bool = True,
    ) -> Any:
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
            data = json.dumps(body).encode("utf-8")
        params = [(k, v) for k, v in (query or {}).items() if v is not None]
        try:
            return self._http.send(
                method,
                path,
                query=params,
                headers=headers,
                body=data,
                timeout=timeout if timeout is not None else self._timeout,
                retry=retry,
            )
        except errors.PykuredError:
            raise
        except Exception as exc:  # urllib3 errors, timeouts, refused connections
            raise errors.KubeError(f"{method} {path}: {type(exc).__name__}: {exc}") from exc

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
        """One API call; returns the decoded JSON answer, raises :class:`errors.KubeError` on failure."""
        response = self._send(
            method, path, query=query, body=body, content_type=content_type, timeout=timeout
        )
        try:
            data = response.data
        except Exception as exc:  # a read timeout or a reset while reading the body
            response.close()
            raise errors.KubeError(f"{method} {path}: {type(exc).__name__}: {exc}") from exc
        finally:
            response.release_conn()
        status = int(response.status)
        if status >= 400:
            raise error_from_status(status, data, str(response.reason or ""))
        if not data:
            return {}
        try:
            decoded = json.loads(data)
        except ValueError:  # plain-text endpoints such as /readyz
            return {"text": data.decode("utf-8", "replace")}
        return decoded if isinstance(decoded, dict) else {"items": decoded}

    def watch(
        self,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        timeout_seconds: int = 60,
        quiet_seconds: float | None = None,
    ) -> Iterator[Obj]:
        """Stream watch events (``{"type", "object"}``) until the server closes the watch.

        The server ends the watch after ``timeout_seconds``; the client read timeout is a little longer, so
        a dead connection is noticed, or ``quiet_seconds`` when given (the API server sends a bookmark about
        once a minute: a long watch need not wait for its end to notice a dead connection). ``ERROR`` events
        (410 Gone) are yielded for the caller to re-list.
        """
        params = dict(query or {})
        params.update(watch="true", timeoutSeconds=str(timeout_seconds), allowWatchBookmarks="true")
        response = self._send(
            "GET",
            path,
            query=params,
            body=None,
            content_type=None,
            timeout=(10.0, quiet_seconds if quiet_seconds is not None else timeout_seconds + 15.0),
            retry=False,  # every watcher has its own retry and back-off: a failed watch fails at once
        )
        raw = response
        finished = False
        try:
            if int(response.status) >= 400:
                raise error_from_status(int(response.status), raw.data, str(response.reason or ""))
            buffer = b""
            for chunk in raw.stream(4096, decode_content=True):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        yield json.loads(line)
            finished = True
        except errors.PykuredError:
            raise
        except Exception as exc:
            raise errors.KubeError(f"watch {path}: {type(exc).__name__}: {exc}") from exc
        finally:
            # A watch abandoned mid-stream must not go back to the pool still streaming: close it.
            if finished:
                raw.release_conn()
            else:
                raw.close()

    # -- nodes ---------------------------------------------------------------------------------------------

    def get_node(self, name: str) -> Obj:
        """GET a Node."""
        return self.request("GET", f"/api/v1/nodes/{_q(name)}")

    def list_nodes(self, *, label_selector: str | None = None) -> Obj:
        """LIST Nodes (needs ``list`` on nodes, which kured's RBAC does not grant)."""
        return self.request("GET", "/api/v1/nodes", query={"labelSelector": label_selector})

    def watch_nodes(
        self,
        *,
        resource_version: str,
        field_selector: str | None = None,
        timeout_seconds: int = 60,
        quiet_seconds: float | None = None,
    ) -> Iterator[Obj]:
        """WATCH Nodes from ``resource_version`` (central FleetLock's id index; an agent's own Node with
        ``field_selector=metadata.name=<node>``, as the kubelet watches it); needs ``watch`` on nodes."""
        query = {"resourceVersion": resource_version, "fieldSelector": field_selector}
        return self.watch(
            "/api/v1/nodes", query=query, timeout_seconds=timeout_seconds, quiet_seconds=quiet_seconds
        )

    def patch_node(self, name: str, patch: Any, *, patch_type: str = STRATEGIC_MERGE_PATCH) -> Obj:
        """PATCH a Node (strategic merge by default; a list body needs ``JSON_PATCH``)."""
        node = self.request("PATCH", f"/api/v1/nodes/{_q(name)}", body=patch, content_type=patch_type)
        for written in self._node_writes:
            written(name, node)
        return node

    def on_node_written(self, callback: Callable[[str, Obj], None]) -> None:
        """Call ``callback(name, node)`` with the answer to every PATCH of a Node made through this client
        (the agent's copy of its own Node, :mod:`pykured.cycle.nodecopy`)."""
        self._node_writes.append(callback)

    def patch_node_status(self, name: str, patch: Any, *, patch_type: str = STRATEGIC_MERGE_PATCH) -> Obj:
        """PATCH a Node's status subresource (used by the simulated kubelet)."""
        return self.request("PATCH", f"/api/v1/nodes/{_q(name)}/status", body=patch, content_type=patch_type)

    # -- pods ----------------------------------------------------------------------------------------------

    def list_pods(
        self,
        *,
        namespace: str | None = None,
        field_selector: str | None = None,
        label_selector: str | None = None,
        limit: int | None = None,
    ) -> Obj:
        """LIST Pods in one namespace or all of them."""
        path = f"/api/v1/namespaces/{_q(namespace)}/pods" if namespace else "/api/v1/pods"
        query = {"fieldSelector": field_selector, "labelSelector": label_selector, "limit": limit}
        return self.request("GET", path, query=query)

    def get_pod(self, namespace: str, name: str) -> Obj:
        """GET a Pod."""
        return self.request("GET", f"/api/v1/namespaces/{_q(namespace)}/pods/{_q(name)}")

    def delete_pod(
        self, namespace: str, name: str, *, grace_period_seconds: int | None = None, uid: str | None = None
    ) -> Obj:
        """DELETE a Pod, optionally with a grace period and a UID precondition."""
        body: Obj = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if grace_period_seconds is not None:
            body["gracePeriodSeconds"] = grace_period_seconds
        if uid is not None:
            body["preconditions"] = {"uid": uid}
        return self.request("DELETE", f"/api/v1/namespaces/{_q(namespace)}/pods/{_q(name)}", body=body)

    def evict_pod(self, namespace: str, name: str, *, grace_period_seconds: int | None = None) -> Obj:
        """POST a ``policy/v1`` Eviction; a PodDisruptionBudget refusal raises ``TooManyRequestsError``."""
        body: Obj = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        if grace_period_seconds is not None and grace_period_seconds >= 0:
            body["deleteOptions"] = {"gracePeriodSeconds": grace_period_seconds}
        path = f"/api/v1/namespaces/{_q(namespace)}/pods/{_q(name)}/eviction"
        return self.request("POST", path, body=body)

    def supports_eviction(self) -> bool:
        """Discovery: does ``/api/v1`` list the ``pods/eviction`` subresource (kubectl's check)?"""
        resources = self.request("GET", "/api/v1").get("resources", [])
        return any(r.get("name") == "pods/eviction" for r in resources)

    # -- daemonsets ----------------------------------------------------------------------------------------

    def get_daemonset(self, namespace: str, name: str) -> Obj:
        """GET an apps/v1 DaemonSet."""
        return self.request("GET", f"/apis/apps/v1/namespaces/{_q(namespace)}/daemonsets/{_q(name)}")

    def replace_daemonset(self, namespace: str, name: str, obj: Obj) -> Obj:
        """PUT a whole DaemonSet; its ``metadata.resourceVersion`` makes a stale write fail with 409."""
        path = f"/apis/apps/v1/namespaces/{_q(namespace)}/daemonsets/{_q(name)}"
        return self.request("PUT", path, body=obj)

    def list_daemonsets(self, namespace: str, *, field_selector: str | None = None) -> Obj:
        """LIST DaemonSets (one by name with ``field_selector=metadata.name=<name>``); the list's
        ``metadata.resourceVersion`` starts a watch. Needs ``list`` on daemonsets, which kured's RBAC does not
        grant."""
        path = f"/apis/apps/v1/namespaces/{_q(namespace)}/daemonsets"
        return self.request("GET", path, query={"fieldSelector": field_selector})

    def watch_daemonsets(
        self,
        namespace: str,
        *,
        resource_version: str,
        field_selector: str | None = None,
        timeout_seconds: int = 60,
        quiet_seconds: float | None = None,
    ) -> Iterator[Obj]:
        """WATCH DaemonSets from ``resource_version`` (one by name with ``field_selector``); needs ``watch``
        on daemonsets."""
        query = {"resourceVersion": resource_version, "fieldSelector": field_selector}
        return self.watch(
            f"/apis/apps/v1/namespaces/{_q(namespace)}/daemonsets",
            query=query,
            timeout_seconds=timeout_seconds,
            quiet_seconds=quiet_seconds,
        )

    # -- leases --------------------------------------------------------------------------------------------

    def _lease_path(self, namespace: str, name: str | None = None) -> str:
        base = f"/apis/coordination.k8s.io/v1/namespaces/{_q(namespace)}/leases"
        return f"{base}/{_q(name)}" if name else base

    def get_lease(self, namespace: str, name: str) -> Obj:
        """GET a Lease."""
        return self.request("GET", self._lease_path(namespace, name))

    def list_leases(self, namespace: str, *, label_selector: str | None = None) -> Obj:
        """LIST Leases; the list's ``metadata.resourceVersion`` starts a watch."""
        return self.request("GET", self._lease_path(namespace), query={"labelSelector": label_selector})

    def watch_leases(
        self,
        namespace: str,
        *,
        resource_version: str,
        label_selector: str | None = None,
        timeout_seconds: int = 60,
        quiet_seconds: float | None = None,
    ) -> Iterator[Obj]:
        """WATCH Leases from ``resource_version``."""
        query = {"resourceVersion": resource_version, "labelSelector": label_selector}
        return self.watch(
            self._lease_path(namespace),
            query=query,
            timeout_seconds=timeout_seconds,
            quiet_seconds=quiet_seconds,
        )

    def create_lease(self, namespace: str, obj: Obj) -> Obj:
        """POST a Lease; an existing name raises ``ConflictError``."""
        return self.request("POST", self._lease_path(namespace), body=obj)

    def replace_lease(self, namespace: str, name: str, obj: Obj) -> Obj:
        """PUT a Lease with its resourceVersion (optimistic concurrency)."""
        return self.request("PUT", self._lease_path(namespace, name), body=obj)

    # -- events --------------------------------------------------------------------------------------------

    def create_event(self, namespace: str, obj: Obj) -> Obj:
        """POST a core/v1 Event."""
        return self.request("POST", f"/api/v1/namespaces/{_q(namespace)}/events", body=obj)

    # -- anything else (tests, demo, lock status) -----------------------------------------------------------

    def create(self, path: str, obj: Obj) -> Obj:
        """POST an object to a collection path, e.g. ``/api/v1/namespaces``."""
        return self.request("POST", path, body=obj)

    def get(self, path: str, *, query: Mapping[str, Any] | None = None) -> Obj:
        """GET any path."""
        return self.request("GET", path, query=query)

    def version(self) -> Obj:
        """GET /version."""
        return self.request("GET", "/version")
