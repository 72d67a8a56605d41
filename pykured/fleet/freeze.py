"""``pykured freeze`` / ``pykured unfreeze`` / ``pykured freeze --status``: the cluster-wide freeze switch.

``freeze`` asks the API server who the caller is (``SelfSubjectReview``, authentication.k8s.io/v1) and writes
a :class:`~pykured.policy.freeze.FreezeRecord` under the ``freeze`` key of the policy ConfigMap (created when
missing, other keys untouched, JSON merge patch). ``unfreeze`` removes it and the halt an agent may have added
(``halt``), remembering a lifted halt's reboot in ``halts-lifted`` so it does not halt the fleet again. Agents
watching the ConfigMap stop starting new reboots within about a second; a node already holding the lock
finishes. ``honouring`` counts the agents that honour the freeze, from the status each agent publishes on its
Node: a freeze that no agent reads is worse than none, so ``pykured freeze`` says how many agents watch the
policy ConfigMap it wrote (their ``pykured.dev/status`` says ``freeze: on`` and names the ConfigMap) and warns
when none does. The writes themselves are :mod:`pykured.policy.writer`'s (an agent's halt too).
"""

from __future__ import annotations

import datetime
import json
from typing import IO, TYPE_CHECKING

from pykured.core.errors import ForbiddenError, KubeError, NotFoundError
from pykured.core.printable import one_line
from pykured.policy import writer
from pykured.policy.document import PolicyDoc, PolicyMapError, parse_policy_map
from pykured.policy.freeze import FreezeRecord, parse_until
from pykured.policy.pause import PAUSED_ANNOTATION, describe, paused_record, set_pause
from pykured.policy.source import configmaps_path
from pykured.policy.weekly import load_location
from pykured.policy.writer import write_freeze
from pykured.status import agent as agentstatus

if TYPE_CHECKING:
    from pykured.kube.api import KubeApi


def whoami(kube: KubeApi) -> str:
    """The caller's user name as the API server sees it (``unknown`` if SelfSubjectReview is unavailable)."""
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    try:
        answer = kube.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", body=body)
    except KubeError:
        return "unknown"
    return str(((answer.get("status") or {}).get("userInfo") or {}).get("username") or "unknown")


def freeze(
    kube: KubeApi,
    *,
    namespace: str,
    name: str,
    reason: str,
    until: datetime.datetime | None,
    now: datetime.datetime,
) -> FreezeRecord:
    """Set the freeze; returns the record written."""
    record = FreezeRecord(reason=reason, by=whoami(kube), at=now, until=until)
    write_freeze(kube, namespace, name, record.to_json())
    return record


def unfreeze(kube: KubeApi, *, namespace: str, name: str) -> FreezeRecord | None:
    """Remove the freeze and the halt (nothing to do when there is neither); the halt lifted, if any."""
    return writer.unfreeze(kube, namespace=namespace, name=name)


def read_freeze(kube: KubeApi, *, namespace: str, name: str) -> FreezeRecord | None:
    """The halt in the ConfigMap, else its freeze record, active or not (raises :class:`PolicyMapError` when
    it does not parse)."""
    return read_policy(kube, namespace=namespace, name=name).shown()


def read_policy(kube: KubeApi, *, namespace: str, name: str) -> PolicyDoc:
    """The whole policy ConfigMap, freeze and blackouts (empty when absent; times without a zone in UTC)."""
    try:
        obj = kube.request("GET", configmaps_path(namespace, name))
    except NotFoundError:
        return PolicyDoc()
    return parse_policy_map(obj.get("data") or {}, zone=datetime.UTC)


def policy_or_why(kube: KubeApi, *, namespace: str, name: str) -> tuple[PolicyDoc, str]:
    """The policy ConfigMap (freeze and blackouts), or why it could not be read."""
    try:
        return read_policy(kube, namespace=namespace, name=name), ""
    except ForbiddenError:
        why = "forbidden (403) for this user"
    except (KubeError, PolicyMapError) as exc:
        why = str(exc)
    return PolicyDoc(), f"policy ConfigMap {namespace}/{name}: {why}: a freeze or a halt would not show here"


def in_force(kube: KubeApi, *, namespace: str, name: str, now: datetime.datetime) -> FreezeRecord | None:
    """The halt or active freeze of the policy ConfigMap (None: none, or the caller may not read it)."""
    try:
        doc = read_policy(kube, namespace=namespace, name=name)
    except KubeError:
        return None
    except PolicyMapError as exc:  # refused whole, but the agents honour the freeze and halt it sets
        doc = exc.doc
    return doc.in_force(now)


def freeze_line(record: FreezeRecord) -> str:
    """The first line of ``pykured status`` while the fleet is frozen or halted."""
    if record.halted:
        return f"HALTED: {one_line(record.describe())}; no reboot starts until `pykured unfreeze`\n"
    return f"FROZEN: {one_line(record.describe())}; no new reboot starts\n"


def until(text: str, *, now: datetime.datetime, time_zone: str) -> datetime.datetime:
    """``pykured freeze --until``: an RFC 3339 time (local to ``time_zone``, the agents' ``--time-zone``) or
    ``+DURATION`` from ``now``; raises :class:`ValueError` (:class:`~pykured.policy.freeze.FreezeError`) when
    it does not parse."""
    return parse_until(text, now=now, zone=load_location(time_zone))


def pause_nodes(
    kube: KubeApi, nodes: list[str], *, reason: str, until: datetime.datetime | None, now: datetime.datetime
) -> FreezeRecord:
    """Pause each node (raises :class:`KubeError`, e.g. NotFound for an unknown node)."""
    record = FreezeRecord(reason=reason, by=whoami(kube), at=now, until=until)
    for node in nodes:
        set_pause(kube, node, record)
    return record


def unpause_nodes(kube: KubeApi, nodes: list[str]) -> None:
    for node in nodes:
        set_pause(kube, node, None)


def paused_nodes(kube: KubeApi, now: datetime.datetime) -> list[tuple[str, FreezeRecord]]:
    """The nodes with an active pause, by name."""
    out = []
    for obj in kube.list_nodes().get("items") or []:
        meta = obj.get("metadata") or {}
        annotations = meta.get("annotations") or {}
        record = paused_record(annotations) if PAUSED_ANNOTATION in annotations else None
        if record is not None and record.active(now):
            out.append((str(meta.get("name", "")), record))
    return sorted(out, key=lambda item: item[0])


def print_status(
    kube: KubeApi, *, namespace: str, name: str, now: datetime.datetime, out: IO[str], as_json: bool = False
) -> int:
    """Print the freeze state (a halt first); exit code 0 (1 when the ConfigMap does not parse)."""
    try:
        doc = read_policy(kube, namespace=namespace, name=name)
    except PolicyMapError as exc:
        print(f"policy ConfigMap {namespace}/{name} does not parse: {exc}", file=out)
        return 1
    record = doc.shown()
    active = doc.in_force(now) is not None
    if as_json:
        data = json.loads(record.to_json()) if record else {}
        print(json.dumps({"frozen": active, **data}, sort_keys=True), file=out)
    elif record is None:
        print("not frozen", file=out)
    elif active:
        print(record.describe(), file=out)
    else:
        print(f"not frozen (expired: {record.describe()})", file=out)
    if not as_json:
        try:
            for node, pause in paused_nodes(kube, now):
                print(f"node {node}: {describe(pause)}", file=out)
        except KubeError as exc:
            print(f"paused nodes: cannot read: {exc}", file=out)
    return 0


def honouring(kube: KubeApi, *, namespace: str, name: str) -> tuple[int, int, dict[str, int]]:
    """``(honouring, agents, others)``: the agents whose status says they read this ConfigMap, all agents
    that publish a status, and the other agents by their freeze state (``forbidden``, ``off``, …).

    Raises :class:`KubeError` (listing Nodes needs ``list`` on nodes)."""
    where = f"{namespace}/{name}"
    honour, agents = 0, 0
    others: dict[str, int] = {}
    for obj in kube.list_nodes().get("items") or []:
        status = agentstatus.decode(((obj.get("metadata") or {}).get("annotations") or {}).get(
            agentstatus.STATUS_ANNOTATION
        ))  # fmt: skip
        if status is None:
            continue
        agents += 1
        if status.freeze == "on" and status.policy == where:
            honour += 1
        else:
            state = status.freeze or "unknown (an older agent)"
            if status.freeze == "on":
                state = f"watching {status.policy}"
            others[state] = others.get(state, 0) + 1
    return honour, agents, others


def honour_line(honour: int, agents: int, others: dict[str, int]) -> str:
    """``honoured by 3 of 3 agents`` (with the others' states)."""
    rest = ", ".join(f"{n} {state}" for state, n in sorted(others.items()))
    return f"honoured by {honour} of {agents} agents" + (f" (others: {rest})" if rest else "")
