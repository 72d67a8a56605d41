"""Reboot budgets: how many nodes may hold the lock at once, as a number of nodes or a share of a node count.

``--max-unavailable=N|P%`` (and ``--concurrency-per-label=N|P%``) is Kubernetes' int-or-percent, as in a
DaemonSet's ``rollingUpdate.maxUnavailable``, OpenShift's MachineConfigPool ``maxUnavailable`` and
Karpenter's disruption budgets: ``N`` nodes, or ``P`` % of the nodes counted, rounded down, at least one.
The lock's limit is the lower of ``--concurrency`` and the budget.

Pure and standard-library only; the counts are read by the backends (:mod:`pykured.lock.annotation`,
:mod:`pykured.lock.lease`, :mod:`pykured.lock.paced`) and passed in. Invariants of :meth:`Budget.limit`:

* never 0 (a budget that let no node reboot would stop the fleet silently: the freeze does that openly);
* a percentage never exceeds the count it is taken of (for a count of at least one);
* a count that is unknown, unreadable or 0 gives a percentage's smallest limit, 1: never unlimited;
* monotonic in the percentage and in the count.
"""

from __future__ import annotations

import dataclasses
import re

MAX_NUMBER = 100_000
"""The largest number of nodes a budget may name (Kubernetes supports 5,000 nodes; the bound keeps the
parse total)."""
MAX_COUNT = 1_000_000
"""The largest node count read from the cluster that is believed; a larger one is garbled."""
_SYNTAX = re.compile(r"([0-9]{1,7})(%?)")


class BudgetError(ValueError):
    """A budget text that is neither a number of nodes nor a percentage; the message says what is wanted."""


@dataclasses.dataclass(frozen=True, slots=True)
class Budget:
    """``value`` nodes, or ``value`` % of a node count when ``percent``."""

    value: int
    percent: bool = False

    @classmethod
    def parse(cls, text: str) -> Budget:
        """``N`` (1 to :data:`MAX_NUMBER`) or ``P%`` (1 to 100); anything else raises :class:`BudgetError`."""
        match = _SYNTAX.fullmatch(text)
        if match is None:
            raise BudgetError(
                f"want a number of nodes (e.g. 3) or a percentage of them (e.g. 25%), not {text!r}"
            )
        value, percent = int(match[1]), bool(match[2])
        if percent and not 1 <= value <= 100:
            raise BudgetError(f"a percentage must be from 1% to 100%, not {text}")
        if not percent and not 1 <= value <= MAX_NUMBER:
            raise BudgetError(f"a number of nodes must be from 1 to {MAX_NUMBER}, not {text}")
        return cls(value, percent)

    @classmethod
    def of(cls, value: int | str) -> Budget:
        """The budget of a configuration value (an ``int``, or the text of a percentage)."""
        return cls.parse(str(value))

    def limit(self, count: int | None) -> int:
        """The nodes allowed at once: ``N``; or ``P`` % of ``count``, rounded down, at least 1 (1 when the
        count is unknown: ``None`` or below 1)."""
        if not self.percent:
            return self.value
        if count is None or count < 1:
            return 1
        return max(1, count * self.value // 100)

    def __str__(self) -> str:
        return f"{self.value}%" if self.percent else str(self.value)

    def config_value(self) -> int | str:
        """As the configuration holds it (Kubernetes' IntOrString JSON): ``3`` or ``"25%"``."""
        return str(self) if self.percent else self.value


def effective_limit(*, concurrency: int, budget: Budget | None, count: int | None) -> int:
    """The lock's limit: ``--concurrency`` (at least 1), lowered by the budget of ``count`` nodes."""
    slots = max(concurrency, 1)
    return slots if budget is None else min(slots, budget.limit(count))


def explain(
    *, concurrency: int, budget: Budget | None, count: int | None, flag: str = "max-unavailable"
) -> str:
    """``3 (--concurrency 5, --max-unavailable 25% of 12 nodes)``: the limit and where it comes from."""
    limit = effective_limit(concurrency=concurrency, budget=budget, count=count)
    if budget is None:
        return f"{limit} (--concurrency {max(concurrency, 1)})"
    if not budget.percent:
        share = str(budget)
    elif count is None or count < 1:
        share = f"{budget} of an unknown number of nodes: 1"
    else:
        share = f"{budget} of {count} node{'s' if count != 1 else ''}"
    return f"{limit} (--concurrency {max(concurrency, 1)}, --{flag} {share})"


def parse_count(value: object) -> int | None:
    """A node count read from the cluster (``status.desiredNumberScheduled``), or ``None`` when it is absent
    or garbled: not an integer, negative, or above :data:`MAX_COUNT`."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 0 <= value <= MAX_COUNT else None
