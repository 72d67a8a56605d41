"""Which agents honour a freeze, from the status each agent publishes on its Node (``pykured freeze``).

A freeze that no agent reads is worse than none, so ``pykured freeze`` says how many agents watch the policy
ConfigMap it wrote (their ``pykured.dev/status`` says ``freeze: on`` and names the ConfigMap) and warns when
none does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pykured.status import agent as agentstatus

if TYPE_CHECKING:
    from pykured.kube.client import Kube


def honouring(kube: Kube, *, namespace: str, name: str) -> tuple[int, int, dict[str, int]]:
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
