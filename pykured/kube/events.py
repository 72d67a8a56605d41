"""Kubernetes Events on the Node, so ``kubectl describe node`` shows what pykured did and why.

Concept: a best-effort side channel. kured posts no Events (its RBAC, ``kured-rbac.yaml``, grants none);
pykured posts core/v1 Events with ``involvedObject`` = this Node, in namespace ``default`` (where the
kubelet posts its node events), ``source.component`` = ``pykured`` and ``source.host`` = the node.

Invariants:
* Never raises. A failure is logged at debug level; a 403 (kured's exact RBAC) is logged once and turns the
  recorder off for the life of the process, so it costs one request, not one per decision.
* Each call posts one new Event (``count`` 1, first = last timestamp); names are ``<node>.<hex nanoseconds>``
  like the client-go recorder's, so they never collide.
"""

from __future__ import annotations

import datetime
import logging
import time
from typing import Final

from pykured.core import errors
from pykured.core.times import format_rfc3339
from pykured.kube.api import KubeApi
from pykured.kube.client import Obj

logger = logging.getLogger(__name__)

NORMAL: Final = "Normal"
WARNING: Final = "Warning"

DRAIN_FAILED: Final = "DrainFailed"
REBOOTING: Final = "Rebooting"

EVENT_NAMESPACE: Final = "default"
_MAX_MESSAGE = 1024


def build_event(
    *,
    node: str,
    node_uid: str,
    reason: str,
    message: str,
    event_type: str,
    component: str,
    now: datetime.datetime,
    name: str,
) -> Obj:
    """The core/v1 Event body (pure)."""
    stamp = format_rfc3339(now)
    involved: Obj = {"apiVersion": "v1", "kind": "Node", "name": node}
    if node_uid:
        involved["uid"] = node_uid
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": EVENT_NAMESPACE},
        "involvedObject": involved,
        "reason": reason,
        "message": message[:_MAX_MESSAGE],
        "type": event_type,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
        "source": {"component": component, "host": node},
    }


class EventRecorder:
    """Posts Events about one Node; never raises."""

    def __init__(
        self,
        kube: KubeApi,
        *,
        node: str,
        node_uid: str = "",
        component: str = "pykured",
        enabled: bool = True,
    ) -> None:
        self._kube = kube
        self.node = node
        self.node_uid = node_uid
        self.component = component
        self.enabled = enabled

    def record(
        self, reason: str, message: str, *, warning: bool = False, now: datetime.datetime | None = None
    ) -> bool:
        """Post one Event; returns whether it was accepted."""
        if not self.enabled:
            return False
        moment = now or datetime.datetime.now(datetime.UTC)
        body = build_event(
            node=self.node,
            node_uid=self.node_uid,
            reason=reason,
            message=message,
            event_type=WARNING if warning else NORMAL,
            component=self.component,
            now=moment,
            name=f"{self.node}.{time.time_ns():x}",
        )
        try:
            self._kube.create_event(EVENT_NAMESPACE, body)
        except errors.ForbiddenError as exc:
            self.enabled = False
            logger.info("not allowed to post Events, disabling them: %s", exc)
            return False
        except Exception as exc:  # an event must never break the reboot cycle
            logger.debug("could not post event %s: %s", reason, exc)
            return False
        return True
