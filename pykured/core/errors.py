"""pykured's own exception tree.

Every error pykured raises derives from :class:`PykuredError`; causes are chained with ``raise ... from``.
Client-library errors (the Kubernetes client, urllib3, apprise) are wrapped at the adapter that meets them,
so policy code (retry, block, warn) only ever catches these types::

    PykuredError
    ├── ConfigError            bad flag, env var or config file value (exit code carried)
    ├── KubeError              any Kubernetes API failure; .status is the HTTP status (0 = no answer)
    │   ├── NotFoundError      404
    │   ├── ConflictError      409 (optimistic concurrency: re-read and retry)
    │   ├── ForbiddenError     403 (RBAC)
    │   └── TooManyRequestsError 429 (eviction blocked by a PodDisruptionBudget, or throttling)
    ├── LockError              the lock could not be read, decoded, taken or released
    ├── DrainError             cordon or drain failed or timed out
    │   └── DrainTimeout       --drain-timeout ran out; .pods names the pods still on the node
    ├── RebootError            the reboot could not be triggered
    └── NotifyError            a notification could not be sent (only ever logged)
"""

from __future__ import annotations


class PykuredError(Exception):
    """Base class of every error pykured raises."""


class ConfigError(PykuredError):
    """A configuration value is invalid. ``exit_code`` follows kured: 2 for flags, 1 for env vars."""

    def __init__(self, message: str, *, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class KubeError(PykuredError):
    """A Kubernetes API call failed. ``status`` is the HTTP status code, 0 when no answer came; ``causes`` the
    first few ``(type, message)`` of the Status' ``details.causes`` (bounded; a PodDisruptionBudget's 429
    names the budget there)."""

    def __init__(
        self, message: str, *, status: int = 0, reason: str = "", causes: tuple[tuple[str, str], ...] = ()
    ) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.causes = causes


class NotFoundError(KubeError):
    """HTTP 404."""


class ConflictError(KubeError):
    """HTTP 409: the object changed since it was read."""


class ForbiddenError(KubeError):
    """HTTP 403: RBAC denied the request."""


class TooManyRequestsError(KubeError):
    """HTTP 429: an eviction would violate a PodDisruptionBudget, or the server throttles."""


class LockError(PykuredError):
    """The reboot lock could not be read, decoded, taken or released."""


class DrainError(PykuredError):
    """Cordon or drain failed or timed out."""


class DrainTimeout(DrainError):
    """``--drain-timeout`` ran out before the node emptied; ``pods`` names (``namespace/name``) the pods
    that would not leave (being evicted, or evicted and still terminating)."""

    def __init__(self, message: str, *, pods: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.pods = pods


class RebootError(PykuredError):
    """The reboot could not be triggered."""


class NotifyError(PykuredError):
    """A notification could not be sent."""
